"""A key/value cache for the tiny GPT, a cached forward pass and a cached ``generate``.

Without a cache, generating token t re-runs the model over all t previous tokens. With one, the
prefill pass stores every layer's keys and values, and each decode step computes K and V for the
one new token only, appends them, and attends over the stored ones::

    cache = KVCache.for_model(model, batch=1, max_len=128)
    logits = forward_cached(model, prompt, cache)        # prefill: (1, T) -> (1, T, V)
    logits = forward_cached(model, next_token, cache)    # decode:  (1, 1) -> (1, 1, V)
    out = generate(model, prompt, max_new_tokens=50)     # greedy, cached; same ids as no cache
    for token in stream(model, prompt, 50, temperature=0.8, generator=gen): ...  # (B,) per step

The forward pass reads the GPT's own modules (``tok_emb``, ``blocks[i].attn.q_proj`` ...), so it
works on any :class:`labs.gpt.GPT` and on the GQA models of :mod:`labs.inference.attention`.
Size of the cache: ``2 * layers * kv_heads * head_dim * bytes * tokens`` per sequence.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn as nn

from labs.inference.attention import causal_attention
from labs.inference.sampling import check_sampling_params, sample

__all__ = ["KVCache", "kv_heads", "forward_cached", "generate", "stream"]


def kv_heads(model: nn.Module) -> int:
    """Number of key/value heads of a GPT's attention (``n_head`` for multi-head attention)."""
    attn = model.blocks[0].attn
    return getattr(attn, "n_kv_heads", attn.n_head)


class KVCache:
    """Pre-allocated keys and values: per layer two tensors of shape (B, H_kv, max_len, D),
    in ``dtype`` on ``device`` (:meth:`for_model` takes both from the model).

    ``length`` tokens are filled; :meth:`update` writes the next ones for one layer and
    :meth:`advance` moves ``length`` on once every layer has written them.
    """

    def __init__(self, n_layer, batch, n_kv_heads, max_len, head_dim, dtype=torch.float32,
                 device=None):  # fmt: skip
        shape = (batch, n_kv_heads, max_len, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layer)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layer)]
        self.max_len = max_len
        self.length = 0

    @classmethod
    def for_model(cls, model: nn.Module, batch: int, max_len: int | None = None) -> KVCache:
        """An empty cache sized for ``model`` (a GPT), on its device and in its dtype;
        ``max_len`` defaults to its block_size."""
        cfg, w = model.config, model.tok_emb.weight
        max_len = max_len or cfg.block_size
        return cls(cfg.n_layer, batch, kv_heads(model), max_len, cfg.n_embd // cfg.n_head,
                   w.dtype, w.device)  # fmt: skip

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Store new keys/values (B, H_kv, T, D) of ``layer``; return all so far (B, H_kv, L+T, D)."""
        t = k.shape[2]
        end = self.length + t
        if end > self.max_len:
            raise ValueError(
                f"KVCache: {self.length} cached + {t} new tokens exceed max_len={self.max_len}; "
                "allocate a larger cache or generate fewer tokens"
            )
        self.k[layer][:, :, self.length : end] = k
        self.v[layer][:, :, self.length : end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def advance(self, t: int) -> None:
        """Mark ``t`` more tokens as cached (call after every layer has been updated)."""
        self.length += t

    def nbytes(self) -> int:
        """Bytes of all key and value tensors as allocated (``max_len`` tokens each)."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


def forward_cached(model: nn.Module, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits (B, T, V) of tokens ``idx`` (B, T) that follow the ``cache.length`` cached ones.

    Equal (up to float rounding) to ``model(full_sequence)[:, -T:]``; the new keys and values are
    appended to ``cache``.
    """
    b, t = idx.shape
    start = cache.length
    if start + t > model.config.block_size:
        raise ValueError(
            f"forward_cached: position {start + t} exceeds block_size={model.config.block_size}"
        )
    pos = torch.arange(start, start + t, device=idx.device)
    x = model.tok_emb(idx) + model.pos_emb(pos)
    for i, block in enumerate(model.blocks):
        attn = block.attn
        h, h_kv = attn.n_head, kv_heads(model)
        h_in = block.ln_1(x)
        d = h_in.shape[-1] // h
        q = attn.q_proj(h_in).view(b, t, h, d).transpose(1, 2)
        k = attn.k_proj(h_in).view(b, t, h_kv, d).transpose(1, 2)
        v = attn.v_proj(h_in).view(b, t, h_kv, d).transpose(1, 2)
        k_all, v_all = cache.update(i, k, v)
        y = causal_attention(q, k_all, v_all, q_start=start)
        x = x + attn.o_proj(y.transpose(1, 2).reshape(b, t, h * d))
        x = x + block.mlp(block.ln_2(x))
    cache.advance(t)
    return model.lm_head(model.ln_f(x))


def _check_prompt(model: nn.Module, idx: torch.Tensor, max_new_tokens: int) -> None:
    if idx.dim() != 2 or idx.shape[1] == 0:
        raise ValueError(
            f"generate: prompt must have shape (B, T) with T >= 1, got {tuple(idx.shape)}"
        )
    if max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be >= 0, got {max_new_tokens}")
    device = model.tok_emb.weight.device
    if idx.device != device:
        raise ValueError(f"generate: the prompt is on {idx.device} but the model on {device}; "
                         f"pass idx.to({str(device)!r})")  # fmt: skip
    total, limit = idx.shape[1] + max_new_tokens, model.config.block_size
    if total > limit:
        raise ValueError(
            f"generate: prompt of {idx.shape[1]} tokens + max_new_tokens={max_new_tokens} = {total} "
            f"exceeds the model's context of {limit} tokens; shorten the prompt or ask for fewer"
        )


def stream(
    model: nn.Module,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> Iterator[torch.Tensor]:
    """Yield the next token ids, shape (B,) int64, one step at a time (for streaming responses).

    Same arguments and checks as :func:`generate`, which collects what this yields. The checks
    run when ``stream`` is called, before the first token is requested.
    """
    check_sampling_params(temperature, top_k, top_p)
    _check_prompt(model, idx, max_new_tokens)
    return _stream(model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache)


def _stream(model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache):
    was_training = model.training
    model.eval()
    try:
        b, t = idx.shape
        cache = KVCache.for_model(model, b, t + max_new_tokens) if use_cache else None
        step_input = idx
        for _ in range(max_new_tokens):
            with torch.no_grad():
                logits = forward_cached(model, step_input, cache) if use_cache else model(idx)
            nxt = sample(logits[:, -1], temperature, top_k, top_p, generator)
            yield nxt
            step_input = nxt.unsqueeze(1)
            if not use_cache:
                idx = torch.cat([idx, step_input], dim=1)
    finally:
        model.train(was_training)


@torch.no_grad()
def generate(
    model: nn.Module,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    stop_token: int | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Append up to ``max_new_tokens`` tokens to the prompt ``idx`` (B, T); returns (B, T + n).

    Greedy when ``temperature == 0`` (the default); otherwise samples with
    :func:`labs.inference.sampling.sample`. ``use_cache=False`` recomputes the whole sequence
    every step (the slow reference); both give the same ids. Stops early once every row has
    produced ``stop_token``. Raises ``ValueError`` for an empty prompt, a bad sampling parameter,
    or a prompt plus ``max_new_tokens`` longer than the model's ``block_size``.
    """
    tokens = stream(model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache)
    done = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
    out = [idx]
    for nxt in tokens:
        out.append(nxt.unsqueeze(1))
        if stop_token is not None:
            done |= nxt == stop_token
            if bool(done.all()):
                tokens.close()
                break
    return torch.cat(out, dim=1)
