"""Speculative decoding (Leviathan et al., 2023; Chen et al., 2023): a draft model proposes, the
target model verifies ``gamma`` tokens in one forward pass, and a rejection step keeps the output
distributed *exactly* as the target's.

The rule, for a draft token ``x`` drawn from the draft's distribution ``q``: accept it with
probability ``min(1, p(x) / q(x))``; at the first rejection sample the replacement from the
residual ``norm(max(0, p - q))``; if all ``gamma`` are accepted, sample one bonus token from the
target's next distribution. Each round therefore emits between 1 and ``gamma + 1`` tokens, on
average ``(1 - alpha**(gamma + 1)) / (1 - alpha)`` where ``alpha = sum(min(p, q))``::

    ids, stats = speculative_generate(target, draft, prompt, max_new_tokens=60, gamma=4)
    stats["accepted"] / (stats["accepted"] + stats["rejected"])   # measured acceptance rate
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn as nn

from labs.inference.kv_cache import KVCache, _check_prompt, forward_cached
from labs.inference.sampling import check_sampling_params, sampling_probs

__all__ = [
    "residual_distribution",
    "accept_reject",
    "acceptance_rate",
    "expected_tokens_per_round",
    "expected_speedup",
    "speculative_generate",
]


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``norm(max(0, p - q))`` over the last dimension (V,); ``p`` itself where ``p == q``."""
    r = torch.clamp(p - q, min=0.0)
    total = r.sum(-1, keepdim=True)
    return torch.where(total > 0, r / total.clamp_min(1e-30), p)


def accept_reject(
    p: torch.Tensor,
    q: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[int, int]:
    """Verify draft tokens against the target; returns ``(n_accepted, next_token)``.

    Args:
        p: target probabilities (gamma + 1, V): row i is the distribution of position i.
        q: draft probabilities (gamma, V) from which ``draft_tokens`` (gamma,) were sampled.
        generator: source of the uniform draws and of the replacement sample, on the device of
            ``p`` and ``q`` (None: PyTorch's default generator of that device).

    The emitted tokens are ``draft_tokens[:n_accepted]`` followed by ``next_token``.
    """
    gamma = draft_tokens.shape[0]
    if p.shape[0] != gamma + 1 or q.shape[0] != gamma:
        raise ValueError(
            f"accept_reject: expected p with {gamma + 1} rows and q with {gamma} rows for "
            f"{gamma} draft tokens, got {p.shape[0]} and {q.shape[0]}"
        )
    for i in range(gamma):
        x = int(draft_tokens[i])
        r = float(torch.rand((), generator=generator, device=p.device))
        if r * q[i, x] < p[i, x]:  # r < p/q without dividing by a zero q
            continue
        resid = residual_distribution(p[i], q[i])
        return i, int(torch.multinomial(resid, 1, generator=generator))
    return gamma, int(torch.multinomial(p[gamma], 1, generator=generator))


def acceptance_rate(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Probability that a draft token is accepted, ``sum(min(p, q))`` over the last dimension."""
    return torch.minimum(p, q).sum(-1)


def expected_tokens_per_round(alpha: float, gamma: int) -> float:
    """Expected tokens emitted per target forward pass: ``(1 - alpha**(gamma+1)) / (1 - alpha)``."""
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """Wall-clock speed-up over plain decoding when a draft step costs ``cost_ratio`` target steps."""
    return expected_tokens_per_round(alpha, gamma) / (gamma * cost_ratio + 1.0)


@torch.no_grad()
def speculative_generate(
    target: nn.Module,
    draft: nn.Module,
    idx: torch.Tensor,
    max_new_tokens: int,
    gamma: int = 4,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, dict[str, int]]:
    """Generate ``max_new_tokens`` tokens after ``idx`` (1, T) with draft-then-verify rounds.

    Both models keep KV caches; rejected positions are rolled back by shortening the cache.
    Greedy (``temperature == 0``) output equals the target's greedy output token for token; with
    sampling the output has the target's distribution (``generator`` on the models' device, which
    ``idx`` shares). Returns ``(ids (1, T + n), stats)`` with
    ``stats = {"rounds", "drafted", "accepted", "rejected"}``: drafts after the first rejection
    of a round are never tested, so the acceptance rate is ``accepted / (accepted + rejected)``.
    """
    check_sampling_params(temperature, top_k, top_p)
    _check_prompt(target, idx, max_new_tokens)
    if idx.shape[0] != 1:
        raise ValueError(f"speculative_generate: one sequence at a time, got batch {idx.shape[0]}")
    if gamma < 1:
        raise ValueError(f"speculative_generate: gamma must be >= 1, got {gamma}")
    target.eval()
    draft.eval()
    total = idx.shape[1] + max_new_tokens
    t_cache, d_cache = KVCache.for_model(target, 1, total), KVCache.for_model(draft, 1, total)
    ids = idx[0].tolist()
    stats = {"rounds": 0, "drafted": 0, "accepted": 0, "rejected": 0}
    tensor = partial(torch.tensor, dtype=torch.long, device=idx.device)  # ids on the models' device

    def probs(logits: torch.Tensor) -> torch.Tensor:
        return sampling_probs(logits, temperature, top_k, top_p)

    while len(ids) < total:
        g = min(gamma, total - len(ids) - 1)
        drafted, q_rows = [], []
        new = ids[d_cache.length :]  # tokens the draft has not seen yet (>= 1)
        for _ in range(g):
            q = probs(forward_cached(draft, tensor([new]), d_cache)[:, -1])[0]
            x = (
                int(q.argmax())
                if temperature == 0
                else int(torch.multinomial(q, 1, generator=generator))
            )
            drafted.append(x)
            q_rows.append(q)
            new = [x]
        feed = ids[t_cache.length :] + drafted
        logits = forward_cached(target, tensor([feed]), t_cache)[0, -(g + 1) :]
        p = probs(logits)
        q = torch.stack(q_rows) if q_rows else p.new_zeros(0, p.shape[-1])
        n_acc, nxt = accept_reject(p, q, tensor(drafted), generator)
        ids += drafted[:n_acc] + [nxt]
        t_cache.length = len(ids) - 1  # drop the rejected drafts' keys and values
        d_cache.length = min(d_cache.length, len(ids) - 1)
        stats["rounds"] += 1
        stats["drafted"] += g
        stats["accepted"] += n_acc
        stats["rejected"] += int(n_acc < g)
    return tensor([ids]), stats
