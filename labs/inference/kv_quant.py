"""An int8 KV cache with one scale per token and head.

At long contexts and large batches the KV cache, not the weights, fills the GPU: Llama-2-7B in
fp16 holds 0.5 MiB of keys and values per token. Storing them in int8 halves that (a quarter of
fp32), so twice as many sequences fit in the same memory, and each decode step reads half the
bytes of cache. Serving engines do this (vLLM's fp8 KV cache; KIVI, Liu et al. 2024, goes to 2
bits).

The scale is chosen per *token and head*: each new token's key (or value) vector of one head,
``D`` numbers, is stored as ``round(x / s)`` in ``[-127, 127]`` with ``s = max|x| / 127``. Per
token, so a token is quantized once when it is written and never revisited; per head, because
heads differ in magnitude and one shared scale would flatten the quiet heads to a few levels. A
head whose vector is all zeros gets ``s = 1`` (not 0, which would divide by zero)::

    q, scale = quantize_kv(k)                  # (..., H, D) float -> int8 (..., H, D), fp32 (..., H, 1)
    k_hat = dequantize_kv(q, scale)            # error at most scale / 2 per entry
    cache = QuantizedKVCache.for_model(model, batch=4, max_len=128)
    forward_cached(model, ids, cache)          # the cached forward pass, through an int8 cache
"""

from __future__ import annotations

import torch
import torch.nn as nn

from labs.inference.kv_cache import KVCache, kv_heads

__all__ = ["quantize_kv", "dequantize_kv", "kv_bytes_per_token", "QuantizedKVCache"]


def quantize_kv(x: torch.Tensor, per: str = "head") -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax int8 quantization of keys or values of shape (..., H, D).

    Args:
        x: floating-point keys or values; the last two dimensions are heads and head_dim.
        per: ``"head"`` (one scale per token and head, shape (..., H, 1)) or ``"token"`` (one
            scale shared by all heads of a token, shape (..., 1, 1): the coarser baseline).

    Returns:
        ``(q, scale)``: ``q`` int8 of ``x``'s shape in [-127, 127], ``scale`` fp32, with
        ``q * scale`` within ``scale / 2`` of ``x``. All-zero groups get scale 1.
    """
    if x.dim() < 2 or not x.is_floating_point():
        raise ValueError(f"quantize_kv: expected a float tensor (..., H, D), got {x.dtype} "
                         f"{tuple(x.shape)}")  # fmt: skip
    if per not in ("head", "token"):
        raise ValueError(f"quantize_kv: per must be 'head' or 'token', got {per!r}")
    if not torch.isfinite(x).all():
        raise ValueError("quantize_kv: the keys/values contain NaN or inf")
    dims = (-1,) if per == "head" else (-2, -1)
    amax = x.detach().float().abs().amax(dim=dims, keepdim=True)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    q = torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8)
    return q, scale


def dequantize_kv(q: torch.Tensor, scale: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """``q * scale`` in ``dtype``: the keys or values an attention kernel reads."""
    return (q.float() * scale).to(dtype)


def kv_bytes_per_token(n_layer: int, n_kv_heads: int, head_dim: int, bytes_per_value: float,
                       scale_bytes: float = 0) -> float:  # fmt: skip
    """Bytes of keys and values per token: ``2 * layers * heads * (head_dim * b + scale_bytes)``.

    ``scale_bytes`` is the storage of one scale per head (0 for a float cache; 2 for an fp16
    scale, 4 for fp32 next to an int8 cache).
    """
    return 2 * n_layer * n_kv_heads * (head_dim * bytes_per_value + scale_bytes)


class QuantizedKVCache(KVCache):
    """A :class:`~labs.inference.kv_cache.KVCache` that stores keys and values in int8.

    Per layer: int8 tensors (B, H_kv, max_len, D) and fp32 scales (B, H_kv, max_len, 1).
    :meth:`update` quantizes the new tokens, stores them, and returns the *dequantized* keys and
    values so far, so :func:`~labs.inference.kv_cache.forward_cached` runs on it unchanged.
    ``per="token"`` shares one scale between the heads of a token (for comparison).
    """

    def __init__(self, n_layer, batch, n_kv_heads, max_len, head_dim, dtype=torch.float32,
                 device=None, per: str = "head"):  # fmt: skip
        shape, sshape = (batch, n_kv_heads, max_len, head_dim), (batch, n_kv_heads, max_len, 1)
        self.k = [torch.zeros(shape, dtype=torch.int8, device=device) for _ in range(n_layer)]
        self.v = [torch.zeros(shape, dtype=torch.int8, device=device) for _ in range(n_layer)]
        self.k_scale = [torch.ones(sshape, device=device) for _ in range(n_layer)]
        self.v_scale = [torch.ones(sshape, device=device) for _ in range(n_layer)]
        self.max_len, self.length, self.dtype, self.per = max_len, 0, dtype, per

    @classmethod
    def for_model(cls, model: nn.Module, batch: int, max_len: int | None = None,
                  per: str = "head") -> QuantizedKVCache:  # fmt: skip
        """An empty int8 cache sized for ``model`` (a GPT), on its device; ``max_len`` defaults
        to block_size."""
        cfg, w = model.config, model.tok_emb.weight
        return cls(cfg.n_layer, batch, kv_heads(model), max_len or cfg.block_size,
                   cfg.n_embd // cfg.n_head, w.dtype, w.device, per)  # fmt: skip

    def _store(self, data, scales, layer, new, end):
        # (B, H, T, D) -> tokens first so that heads are the second-to-last dimension
        q, s = quantize_kv(new.transpose(1, 2), self.per)
        if self.per == "token":
            s = s.expand(-1, -1, new.shape[1], -1)
        data[layer][:, :, self.length : end] = q.transpose(1, 2)
        scales[layer][:, :, self.length : end] = s.transpose(1, 2)
        return dequantize_kv(data[layer][:, :, :end], scales[layer][:, :, :end], self.dtype)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Quantize and store (B, H_kv, T, D) keys/values; return all so far, dequantized."""
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(
                f"QuantizedKVCache: {self.length} cached + {k.shape[2]} new tokens exceed "
                f"max_len={self.max_len}; allocate a larger cache or generate fewer tokens"
            )
        keys = self._store(self.k, self.k_scale, layer, k, end)
        return keys, self._store(self.v, self.v_scale, layer, v, end)

    def nbytes(self) -> int:
        """Bytes of the int8 keys and values plus their fp32 scales (``max_len`` tokens each)."""
        tensors = self.k + self.v + self.k_scale + self.v_scale
        return sum(t.numel() * t.element_size() for t in tensors)
