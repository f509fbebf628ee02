"""A tiny serving engine: the GPT's forward pass over a paged KV cache, driven by the scheduler.

:func:`paged_forward` runs the model's own modules (as :func:`labs.inference.kv_cache.forward_cached`
does) but stores keys and values in a :class:`~labs.inference.paged.PagedKVCache` and attends
through block tables, so one batch can mix sequences of different lengths without padding the
cache. :class:`ModelRunner` is the executor that :func:`labs.inference.batching.run_trace` calls::

    runner = ModelRunner(model, num_blocks=256, block_size=16)
    sched = Scheduler("continuous", max_batch=8, manager=runner.manager)
    run_trace(make_trace(40, rate=50.0), sched, runner)   # measured seconds on this machine
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence

import torch
import torch.nn as nn

from labs.inference.kv_cache import kv_heads
from labs.inference.paged import PagedKVCache, paged_attention
from labs.inference.sampling import sample

__all__ = ["paged_forward", "ModelRunner"]


@torch.no_grad()
def paged_forward(
    model: nn.Module,
    cache: PagedKVCache,
    seq_ids: Sequence[Hashable],
    idx: torch.Tensor,
    start: torch.Tensor,
) -> torch.Tensor:
    """Logits (B, T, V) of tokens ``idx`` (B, T) at positions ``start[b] .. start[b] + T - 1``.

    The slots of those positions must already be reserved in ``cache.manager`` (by ``allocate``
    or ``append_slot``); their keys and values are written there. ``idx``, ``start``, the model
    and the cache share one device.
    """
    b, t = idx.shape
    limit = model.config.block_size
    if int(start.max()) + t > limit:
        raise ValueError(f"paged_forward: position {int(start.max()) + t} exceeds {limit}")
    pos = start.view(-1, 1) + torch.arange(t, device=idx.device).view(1, -1)  # (B, T)
    tables, lengths = cache.block_tables(seq_ids)
    bs = cache.manager.block_size
    blocks, offsets = tables.gather(1, pos // bs).flatten(), (pos % bs).flatten()
    x = model.tok_emb(idx) + model.pos_emb(pos)
    h_kv = kv_heads(model)
    for i, block in enumerate(model.blocks):
        attn = block.attn
        h_in = block.ln_1(x)
        h, d = attn.n_head, h_in.shape[-1] // attn.n_head
        q = attn.q_proj(h_in).view(b, t, h, d).transpose(1, 2)
        k = attn.k_proj(h_in).view(b * t, h_kv, d)
        v = attn.v_proj(h_in).view(b * t, h_kv, d)
        cache.write(i, blocks, offsets, k, v)
        y = paged_attention(q, cache.k[i], cache.v[i], tables, lengths, start)
        x = x + attn.o_proj(y.transpose(1, 2).reshape(b, t, h * d))
        x = x + block.mlp(block.ln_2(x))
    return model.lm_head(model.ln_f(x))


class ModelRunner:
    """Executor for :func:`~labs.inference.batching.run_trace` that runs the real model.

    Each step prefills the new requests one at a time (prompts differ in length) and decodes
    all running requests in one batched forward pass. Returns the measured wall-clock seconds.
    Greedy decoding unless ``temperature > 0`` (then seeded by ``generator``, a generator on the
    model's device). The cache and every input are built on the model's device.
    """

    def __init__(self, model, num_blocks, block_size, temperature=0.0, generator=None):
        cfg, w = model.config, model.tok_emb.weight
        self.model, self.device = model.eval(), w.device
        self.cache = PagedKVCache(cfg.n_layer, num_blocks, block_size, kv_heads(model),
                                  cfg.n_embd // cfg.n_head, w.dtype, w.device)  # fmt: skip
        self.manager = self.cache.manager
        self.temperature, self.generator = temperature, generator

    def _next(self, logits: torch.Tensor) -> list[int]:
        return sample(logits, self.temperature, generator=self.generator).tolist()

    def __call__(self, prefill, decode) -> tuple[float, list[int]]:
        t0 = time.perf_counter()
        out: list[int] = []
        for req in prefill:
            out += self._forward([req], [req.tokens], [0])
        if decode:
            out += self._forward(decode, [[r.tokens[-1]] for r in decode],
                                 [len(r.tokens) - 1 for r in decode])  # fmt: skip
        return time.perf_counter() - t0, out

    def _forward(self, reqs, ids: list[list[int]], start: list[int]) -> list[int]:
        """Run tokens ``ids`` (B lists of T) at positions ``start`` (B,); the next token each."""
        ids = torch.tensor(ids, dtype=torch.long, device=self.device)
        start = torch.tensor(start, dtype=torch.long, device=self.device)
        logits = paged_forward(self.model, self.cache, [r.rid for r in reqs], ids, start)
        return self._next(logits[:, -1])
