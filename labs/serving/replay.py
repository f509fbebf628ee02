"""Replay a request trace through the service's engine and through the old static engine.

Both run the real tiny GPT on a *virtual clock*: each step advances the clock by its measured
time, and idle gaps are skipped, so the numbers reflect the computation only (no HTTP, no
load generator competing for the cores) and two engines see exactly the same offered load. A step
is timed by ``clock``: the wall clock by default, or ``time.thread_time`` (the CPU time of the
calling thread, which time given to other programs does not inflate) for a model on the CPU with
``torch.set_num_threads(1)``::

    trace = make_trace(60, rate=100.0, prompt_len=(8, 24), mean_output=24, max_output=96)
    serve_trace("continuous", trace, model, max_batch=16)   # {'throughput_tok_s': ..., ...}
    serve_trace("static", trace, model, max_batch=16)

``"continuous"`` is :class:`labs.serving.engine.LLMEngine` (Chapter 10's scheduler over the paged
KV cache, as the server runs it); ``"static"`` is the service's former engine: a batch is formed
from whatever waits when the previous batch is done, and every step recomputes every sequence
from its first token in one right-padded forward pass (:class:`labs.serving.static.PaddedRunner`).
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable

import numpy as np
import torch

from labs.inference.batching import Request, Scheduler, run_trace, summarize
from labs.inference.paged import BlockManager
from labs.serving.engine import GenRequest, LLMEngine
from labs.serving.static import PaddedRunner

__all__ = ["replay", "serve_trace", "ttft_p99"]


def replay(
    trace: list[Request], engine: LLMEngine, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Serve ``trace`` (greedy) through ``engine`` step by step on a virtual clock that advances
    by each step's time on ``clock``; fills each request's ``generated``, ``first_token_time``
    and ``finish_time``. Returns the final clock."""
    pending = deque(sorted(trace, key=lambda r: r.arrival))
    live: list[tuple[GenRequest, Request]] = []
    now = 0.0
    while pending or engine.has_work():
        while pending and pending[0].arrival <= now:
            r = pending.popleft()
            g = GenRequest(r.prompt, r.output_len, temperature=0.0)
            engine.submit(g)
            live.append((g, r))
        if not engine.has_work():
            now = pending[0].arrival
            continue
        t0 = clock()
        engine.step()
        now += clock() - t0
        for g, r in live:
            if g.output and r.first_token_time is None:
                r.first_token_time = now
            if g.finish_reason is not None:
                if g.finish_reason != "length":
                    raise RuntimeError(f"replay: request {r.rid} ended with {g.error}")
                r.generated, r.finish_time = list(g.output), now
        live = [(g, r) for g, r in live if r.finish_time is None]
    return now


def ttft_p99(requests: list[Request]) -> float:
    """99th percentile of the time to first token, in seconds."""
    return float(np.percentile([r.first_token_time - r.arrival for r in requests], 99))


def serve_trace(
    kind: str,
    trace: list[Request],
    model,
    max_batch: int = 16,
    clock: Callable[[], float] = time.perf_counter,
) -> dict:
    """Serve a fresh copy of ``trace`` with the ``"continuous"`` or ``"static"`` engine, each step
    timed by ``clock`` (``time.thread_time`` needs ``torch.set_num_threads(1)``: it counts one
    thread); returns :func:`labs.inference.batching.summarize` plus ``ttft_p99_s`` and the outputs
    (token ids)."""
    if clock is time.thread_time and torch.get_num_threads() != 1:
        raise ValueError(
            "serve_trace: clock=time.thread_time counts the calling thread only, but PyTorch runs "
            f"on {torch.get_num_threads()} threads; call torch.set_num_threads(1) first"
        )
    reqs = copy.deepcopy(trace)
    if kind == "continuous":
        replay(reqs, LLMEngine(model, max_batch=max_batch, max_waiting=len(reqs) + 1), clock)
    elif kind == "static":
        blocks = max_batch * -(-model.config.block_size // 16)
        sched = Scheduler("static", max_batch, BlockManager(blocks, 16))
        run_trace(reqs, sched, PaddedRunner(model, clock))
    else:
        raise ValueError(f"serve_trace: kind must be 'continuous' or 'static', got {kind!r}")
    out = summarize(reqs)
    out["ttft_p99_s"] = ttft_p99(reqs)
    out["outputs"] = [r.generated for r in reqs]
    return out
