"""Turning next-token logits into a token: greedy, temperature, top-k and top-p (nucleus) sampling.

Every function takes logits of shape (B, V) -- one row per sequence -- and, where it draws random
numbers, a ``torch.Generator`` so that a seeded run repeats exactly::

    probs = sampling_probs(logits, temperature=0.8, top_k=40, top_p=0.95)   # (B, V), rows sum to 1
    token = sample(logits, temperature=0.8, top_p=0.95, generator=gen)        # (B,) int64

``temperature == 0`` means greedy decoding (the arg-max token, no randomness).
"""

from __future__ import annotations

import math

import torch

__all__ = ["check_sampling_params", "sampling_probs", "sample"]


def check_sampling_params(
    temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> None:
    """Raise ``ValueError`` naming the parameter when a sampling setting is out of range.

    Valid: ``temperature >= 0`` and finite, ``top_k >= 1`` (an int) or None, ``0 < top_p <= 1`` or
    None.
    """
    if not isinstance(temperature, int | float) or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be an integer >= 1 or None, got {top_k!r}")
    if top_p is not None:
        if not isinstance(top_p, int | float) or not (0.0 < top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] or None, got {top_p!r}")


def _check_logits(logits: torch.Tensor) -> torch.Tensor:
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}")
    logits = logits.float()
    bad = ~torch.isfinite(logits).all(dim=-1)
    if bool(bad.any()):
        rows = bad.nonzero().flatten().tolist()
        raise ValueError(
            f"logits contain NaN or inf in row(s) {rows[:8]} of {logits.shape[0]}; "
            "the model produced non-finite values (check the weights and the input ids)"
        )
    return logits


def sampling_probs(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """The distribution that :func:`sample` draws from, shape (B, V), each row summing to 1.

    Order of operations (as in Hugging Face ``generate``): divide by ``temperature``, keep the
    ``top_k`` largest logits, then keep the smallest set of tokens whose probability reaches
    ``top_p`` (the most likely token always survives), and renormalise. ``temperature == 0``
    returns the one-hot distribution of the arg-max (ties go to the lowest id).
    """
    check_sampling_params(temperature, top_k, top_p)
    logits = _check_logits(logits)
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass of the tokens ranked above
        drop_sorted = before >= top_p  # already reached top_p without this token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token per row of ``logits`` (B, V); returns int64 ids of shape (B,).

    Greedy when ``temperature == 0``. ``generator`` must be on the device of ``logits`` (as
    ``torch.multinomial`` requires). Raises ``ValueError`` on a bad parameter or non-finite logits.
    """
    probs = sampling_probs(logits, temperature, top_k, top_p)
    if temperature == 0:
        return probs.argmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
