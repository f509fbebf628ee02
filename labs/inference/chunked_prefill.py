"""Chunked prefill under a per-step token budget, with optional prefix caching.

In plain continuous batching (:class:`~labs.inference.batching.Scheduler`) a newcomer's whole
prompt is prefilled in the step that admits it, and every running request waits for that step:
one long prompt stalls everybody's next token. Sarathi-Serve (Agrawal et al., 2024) caps the
tokens a step may process (the *token budget*): running requests decode first (one token each),
and what is left of the budget goes to prompt *chunks*; a long prompt is spread over several
steps. Decode steps stay short (better time per output token, TPOT) at the price of a later
first token for the long prompt (worse time to first token, TTFT).

:class:`ChunkedScheduler` does this on the same block manager. With a
:class:`~labs.inference.prefix_cache.PrefixCachingBlockManager` it also skips the prompt tokens
found in the cache: a request's prefill starts at ``manager.num_cached[rid]``::

    sched = ChunkedScheduler(max_batch=8, manager=PrefixCachingBlockManager(256, 16),
                             token_budget=64)            # None: whole prompts (no chunking)
    times = {}
    run_chunked(trace, sched, ChunkCost(CostModel.llama2_7b_a100()), token_times=times)
    summarize(trace), max_token_gap(times)               # TTFT, TPOT, worst stall

An executor takes ``(chunks, decode)`` and returns ``(seconds, tokens)``: one token per chunk
(used only when the chunk ends its prompt) and per decoding request. :class:`ChunkCost` prices a
step with the roofline cost model; :class:`ChunkedModelRunner` runs the tiny GPT.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from labs.inference.batching import CostModel, Request, Scheduler
from labs.inference.engine import ModelRunner
from labs.inference.paged import BlockManager, OutOfBlocks
from labs.inference.prefix_cache import PrefixCachingBlockManager

__all__ = ["Chunk", "ChunkedScheduler", "ChunkCost", "ChunkedModelRunner", "run_chunked",
           "max_token_gap"]  # fmt: skip


@dataclass
class Chunk:
    """Prompt tokens ``start .. start + length - 1`` of ``req.tokens``, prefilled in one step."""

    req: Request
    start: int
    length: int

    @property
    def last(self) -> bool:
        """Whether this chunk ends the prompt (its forward pass yields the first output token)."""
        return self.start + self.length == len(self.req.tokens)


class ChunkedScheduler(Scheduler):
    """Continuous batching whose steps process at most ``token_budget`` tokens.

    Args:
        max_batch: most requests running (prefilling or decoding) at once.
        manager: a :class:`BlockManager`; a ``PrefixCachingBlockManager`` adds prefix caching.
        token_budget: tokens per step (decodes count one each); ``None`` prefills whole prompts
            in the admitting step, like :class:`Scheduler`. Must be ``>= max_batch`` so that a
            step always has room for every decode.
    """

    def __init__(self, max_batch: int, manager: BlockManager, token_budget: int | None = None):
        super().__init__("continuous", max_batch, manager)
        if token_budget is not None and token_budget < max_batch:
            raise ValueError(
                f"ChunkedScheduler: token_budget={token_budget} must be >= max_batch={max_batch} "
                "(every running request decodes one token per step)"
            )
        self.token_budget = token_budget
        self.prefilled: dict[
            int, int
        ] = {}  # rid -> prompt tokens whose KV exists (while prefilling)

    def _preempt(self, req: Request) -> None:
        self.prefilled.pop(req.rid, None)
        super()._preempt(req)

    def _allocate(self, req: Request) -> bool:
        tokens = req.tokens
        prefix = hasattr(self.manager, "num_cached")
        args = (len(tokens), tokens) if prefix else (len(tokens),)
        if not self.manager.can_allocate(*args):
            return False
        self.manager.allocate(req.rid, *args)
        self.prefilled[req.rid] = self.manager.num_cached[req.rid] if prefix else 0
        return True

    def schedule_chunks(self) -> tuple[list[Chunk], list[Request]]:
        """Return ``(chunks, decode)`` for this step, with KV slots reserved for all of them."""
        decode: list[Request] = []
        i = 0
        while i < len(self.running):  # decodes first, oldest first; preempt the newest on shortage
            req = self.running[i]
            if req.rid in self.prefilled:
                i += 1
                continue
            try:
                self.manager.append_slot(req.rid)
                decode.append(req)
                i += 1
            except OutOfBlocks:
                victim = self.running[-1]
                if victim in decode:
                    decode.remove(victim)
                self._preempt(victim)
        budget = (self.token_budget or float("inf")) - len(decode)
        chunks: list[Chunk] = []
        for req in self.running:  # prompts already being prefilled continue, oldest first
            if req.rid in self.prefilled and budget > 0:
                done = self.prefilled[req.rid]
                n = int(min(len(req.tokens) - done, budget))
                chunks.append(Chunk(req, done, n))
                budget -= n
        while self.waiting and len(self.running) < self.max_batch and budget > 0:
            req = self.waiting[0]
            if not self._allocate(req):
                break
            self.running.append(self.waiting.popleft())
            done = self.prefilled[req.rid]
            n = int(min(len(req.tokens) - done, budget))
            chunks.append(Chunk(req, done, n))
            budget -= n
        return chunks, decode

    def chunk_done(self, chunk: Chunk) -> None:
        """Record that a chunk's keys and values are written (call after the executor ran)."""
        end = chunk.start + chunk.length
        if hasattr(self.manager, "mark_computed"):
            self.manager.mark_computed(chunk.req.rid, end)
        if chunk.last:
            del self.prefilled[chunk.req.rid]
        else:
            self.prefilled[chunk.req.rid] = end


@dataclass
class ChunkCost:
    """Roofline time of a chunked step: the :class:`CostModel` with chunks instead of prompts."""

    model: CostModel

    def __call__(self, chunks: list[Chunk], decode: list[Request]) -> tuple[float, list[int]]:
        m = self.model
        tokens = sum(c.length for c in chunks) + len(decode)
        context = sum(c.start + c.length for c in chunks) + sum(len(r.tokens) for r in decode)
        flops = 2 * m.n_params * tokens
        moved = m.weight_bytes + m.kv_bytes_per_token * context
        return max(flops / m.peak_flops, moved / m.bandwidth) + m.overhead_s, [0] * (
            len(chunks) + len(decode)
        )


class ChunkedModelRunner(ModelRunner):
    """The tiny GPT as an executor of chunks: each chunk attends to the KV already in the pool.

    Same arguments as :class:`ModelRunner`; ``prefix_caching=True`` gives its cache a
    :class:`~labs.inference.prefix_cache.PrefixCachingBlockManager` (``runner.manager``).
    """

    def __init__(self, model, num_blocks, block_size, temperature=0.0, generator=None,
                 prefix_caching: bool = False):  # fmt: skip
        super().__init__(model, num_blocks, block_size, temperature, generator)
        if prefix_caching:
            self.manager = self.cache.manager = PrefixCachingBlockManager(num_blocks, block_size)

    def __call__(self, chunks, decode) -> tuple[float, list[int]]:
        t0 = time.perf_counter()
        out: list[int] = []
        for c in chunks:
            out += self._forward([c.req], [c.req.tokens[c.start : c.start + c.length]], [c.start])
        if decode:
            out += self._forward(decode, [[r.tokens[-1]] for r in decode],
                                 [len(r.tokens) - 1 for r in decode])  # fmt: skip
        return time.perf_counter() - t0, out


def run_chunked(
    requests: list[Request],
    scheduler: ChunkedScheduler,
    executor,
    token_times: dict[int, list[float]] | None = None,
) -> float:
    """Serve ``requests`` to completion like :func:`~labs.inference.batching.run_trace`.

    ``token_times``, if given, receives for every request id the clock at each of its tokens.
    Returns the final clock in seconds.
    """
    pending = deque(sorted(requests, key=lambda r: r.arrival))
    clock = 0.0
    while pending or scheduler.has_work():
        while pending and pending[0].arrival <= clock:
            scheduler.add(pending.popleft())
        if not scheduler.has_work():
            clock = pending[0].arrival
            continue
        chunks, decode = scheduler.schedule_chunks()
        if not chunks and not decode:
            raise RuntimeError("run_chunked: the scheduler made no progress (KV pool too small?)")
        seconds, tokens = executor(chunks, decode)
        clock += seconds
        emitted = []
        for c, tok in zip(chunks, tokens[: len(chunks)], strict=True):
            scheduler.chunk_done(c)
            if c.last:
                emitted.append((c.req, tok))
        emitted += list(zip(decode, tokens[len(chunks) :], strict=True))
        for req, tok in emitted:
            req.generated.append(int(tok))
            if token_times is not None:
                token_times.setdefault(req.rid, []).append(clock)
            if req.first_token_time is None:
                req.first_token_time = clock
            if req.done:
                req.finish_time = clock
                scheduler.retire(req)
    return clock


def max_token_gap(token_times: dict[int, list[float]]) -> dict[str, float]:
    """Worst and 99th-percentile gap between consecutive tokens of a request (seconds)."""
    gaps = [b - a for ts in token_times.values() for a, b in zip(ts, ts[1:])]
    if not gaps:
        return {"gap_max_s": 0.0, "gap_p99_s": 0.0}
    return {"gap_max_s": float(max(gaps)), "gap_p99_s": float(np.percentile(gaps, 99))}
