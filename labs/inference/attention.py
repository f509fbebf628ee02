"""Multi-head, multi-query and grouped-query attention: one module with ``n_kv_heads``.

In multi-head attention (MHA) every query head has its own key and value head. Multi-query
attention (MQA, Shazeer 2019) keeps one key/value head for all query heads; grouped-query attention
(GQA, Ainslie et al. 2023) keeps ``n_kv_heads`` of them, each shared by ``n_head // n_kv_heads``
query heads. The KV cache shrinks by the same factor, which is why Llama-2-70B and most later
models use GQA::

    attn = GQAttention(n_embd=96, n_head=4, n_kv_heads=2)   # 2 query heads per KV head
    y = attn(x)                                               # (B, T, C) -> (B, T, C)
    gqa_model = convert_to_gqa(model, n_kv_heads=1)           # a GPT's heads mean-pooled (MQA)

:func:`causal_attention` is the kernel every module here shares, including the cached and paged
forward passes: queries at absolute positions ``q_start .. q_start + Tq - 1`` attend to keys
``0 .. q_start + i``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["repeat_kv", "causal_attention", "GQAttention", "mha_to_gqa", "convert_to_gqa"]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, H_kv, T, D) -> (B, H_kv * n_rep, T, D): KV head g serves query heads g*n_rep ...."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_start: int | torch.Tensor = 0,
    key_lengths: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention of new queries over all keys so far, with KV heads shared in groups.

    Args:
        q: queries (B, H, Tq, D); query i sits at absolute position ``q_start + i``.
        k, v: keys and values (B, H_kv, Tk, D) with ``H % H_kv == 0``; key j is position j.
        q_start: position of the first query, an int or a (B,) tensor (one per sequence).
        key_lengths: (B,) number of valid keys per sequence (the rest is padding), or None.

    Returns:
        (B, H, Tq, D).
    """
    b, h, tq, _ = q.shape
    h_kv, tk = k.shape[1], k.shape[2]
    if h % h_kv:
        raise ValueError(f"causal_attention: {h} query heads are not a multiple of {h_kv} KV heads")
    k, v = repeat_kv(k, h // h_kv), repeat_kv(v, h // h_kv)
    start = torch.as_tensor(q_start, device=q.device).reshape(-1, 1, 1)  # (B or 1, 1, 1)
    q_pos = start + torch.arange(tq, device=q.device).view(1, tq, 1)
    k_pos = torch.arange(tk, device=q.device).view(1, 1, tk)
    mask = k_pos <= q_pos  # (B or 1, Tq, Tk)
    if key_lengths is not None:
        mask = mask & (k_pos < key_lengths.view(-1, 1, 1))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.unsqueeze(1))


class GQAttention(nn.Module):
    """Causal self-attention with ``n_head`` query heads and ``n_kv_heads`` key/value heads.

    Same layer names as the tiny GPT's attention (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``);
    ``k_proj`` and ``v_proj`` map C to ``n_kv_heads * head_dim``. ``n_kv_heads == n_head`` is MHA,
    ``n_kv_heads == 1`` is MQA. Shape (B, T, C) -> (B, T, C). ``device`` and ``dtype`` of the
    weights as in ``nn.Linear``.
    """

    def __init__(self, n_embd: int, n_head: int, n_kv_heads: int, bias: bool = True,
                 device=None, dtype=None):  # fmt: skip
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"GQAttention: n_embd={n_embd} is not divisible by n_head={n_head}")
        if n_kv_heads < 1 or n_head % n_kv_heads:
            raise ValueError(
                f"GQAttention: n_kv_heads={n_kv_heads} must be >= 1 and divide n_head={n_head}"
            )
        self.n_head, self.n_kv_heads, self.head_dim = n_head, n_kv_heads, n_embd // n_head
        kv, like = n_kv_heads * self.head_dim, {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(n_embd, n_embd, bias=bias, **like)
        self.k_proj = nn.Linear(n_embd, kv, bias=bias, **like)
        self.v_proj = nn.Linear(n_embd, kv, bias=bias, **like)
        self.o_proj = nn.Linear(n_embd, n_embd, bias=bias, **like)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        d = self.head_dim
        q = self.q_proj(x).view(b, t, self.n_head, d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv_heads, d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, d).transpose(1, 2)
        y = causal_attention(q, k, v)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, c))


@torch.no_grad()
def mha_to_gqa(attn: nn.Module, n_kv_heads: int) -> GQAttention:
    """A :class:`GQAttention` from a multi-head one by mean-pooling each group's K and V heads.

    This is the conversion of Ainslie et al. (2023), who then "uptrain" for a few percent of the
    pre-training steps; without uptraining the model gets somewhat worse. When the heads of a group
    are identical (tied), the result computes exactly what the original did. The new layer is on
    the old one's device, in its dtype.
    """
    n_head = attn.n_head
    c = attn.q_proj.in_features
    bias = attn.q_proj.bias is not None
    w = attn.q_proj.weight
    new = GQAttention(c, n_head, n_kv_heads, bias=bias, device=w.device, dtype=w.dtype)
    d, group = c // n_head, n_head // n_kv_heads
    new.q_proj.load_state_dict(attn.q_proj.state_dict())
    new.o_proj.load_state_dict(attn.o_proj.state_dict())
    for name in ("k_proj", "v_proj"):
        old, dst = getattr(attn, name), getattr(new, name)
        dst.weight.copy_(old.weight.view(n_kv_heads, group, d, c).mean(1).reshape(-1, c))
        if bias:
            dst.bias.copy_(old.bias.view(n_kv_heads, group, d).mean(1).reshape(-1))
    return new


def convert_to_gqa(model: nn.Module, n_kv_heads: int) -> nn.Module:
    """A copy of a :class:`labs.gpt.GPT` whose attention layers all use ``n_kv_heads`` KV heads."""
    model = copy.deepcopy(model)
    for block in model.blocks:
        block.attn = mha_to_gqa(block.attn, n_kv_heads)
    return model
