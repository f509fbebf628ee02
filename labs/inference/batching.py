"""Static and continuous (iteration-level) batching: requests, a scheduler, and the serving loop.

A *static* batch is formed once and runs until its longest request finishes; a request that
finishes early leaves its slot idle, and new arrivals wait for the whole batch. *Continuous*
batching (Orca, Yu et al. 2022; vLLM) re-forms the batch every decode step: finished requests
leave, waiting ones join as soon as a slot and KV blocks are free. The same :class:`Scheduler`
drives the real tiny GPT (:mod:`labs.inference.engine`) and a roofline cost model
(:class:`CostModel`) that extrapolates to a GPU::

    trace = make_trace(n=40, rate=20.0, seed=0)           # Poisson arrivals, long-tailed outputs
    sched = Scheduler("continuous", max_batch=8, manager=BlockManager(256, 16))
    run_trace(trace, sched, CostModel.llama2_7b_a100())   # or an engine.ModelRunner
    summarize(trace)                                      # throughput, TTFT, TPOT, p50/p99
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from labs.inference.paged import BlockManager, OutOfBlocks

__all__ = ["Request", "make_trace", "Scheduler", "CostModel", "run_trace", "summarize"]


@dataclass
class Request:
    """One generation request; times are in seconds since the start of the trace."""

    rid: int
    arrival: float
    prompt: list[int]
    output_len: int
    generated: list[int] = field(default_factory=list)
    first_token_time: float | None = None
    finish_time: float | None = None
    preemptions: int = 0

    @property
    def tokens(self) -> list[int]:
        """Prompt followed by the tokens generated so far."""
        return self.prompt + self.generated

    @property
    def done(self) -> bool:
        return len(self.generated) >= self.output_len


def make_trace(
    n: int,
    rate: float,
    prompt_len: tuple[int, int] = (8, 24),
    mean_output: float = 24.0,
    max_output: int = 96,
    vocab_size: int = 96,
    seed: int = 0,
) -> list[Request]:
    """``n`` requests with Poisson arrivals at ``rate`` per second and long-tailed output lengths.

    Prompt lengths are uniform in ``prompt_len``; output lengths are log-normal (sigma 0.8) with
    mean ``mean_output``, clipped to ``[1, max_output]``; prompt tokens are random ids.
    """
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    sigma = 0.8
    outs = rng.lognormal(np.log(mean_output) - sigma**2 / 2, sigma, size=n)
    outs = np.clip(np.round(outs), 1, max_output).astype(int)
    lens = rng.integers(prompt_len[0], prompt_len[1] + 1, size=n)
    return [
        Request(
            i,
            float(arrivals[i]),
            rng.integers(0, vocab_size, size=int(lens[i])).tolist(),
            int(outs[i]),
        )
        for i in range(n)
    ]


class Scheduler:
    """Decides, every step, which requests prefill and which decode.

    Args:
        policy: ``"static"`` (refill only when the whole batch is done) or ``"continuous"``
            (admit and retire every step).
        max_batch: most requests running at once.
        manager: the KV block manager; a request is admitted only if its tokens fit, and when a
            decode step runs out of blocks the newest request is preempted (its blocks freed and
            it re-queued at the front, to be recomputed from its prompt and generated tokens).
    """

    def __init__(self, policy: str, max_batch: int, manager: BlockManager):
        if policy not in ("static", "continuous"):
            raise ValueError(f"Scheduler: policy must be 'static' or 'continuous', got {policy!r}")
        if max_batch < 1:
            raise ValueError(f"Scheduler: max_batch must be >= 1, got {max_batch}")
        self.policy, self.max_batch, self.manager = policy, max_batch, manager
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add(self, req: Request) -> None:
        """Queue an arrived request; reject one that could never fit in the KV pool."""
        need = self.manager.blocks_for(len(req.prompt) + req.output_len)
        if need > self.manager.num_blocks:
            raise ValueError(
                f"request {req.rid}: {len(req.prompt)} prompt + {req.output_len} output tokens "
                f"need {need} KV blocks, the pool has {self.manager.num_blocks}"
            )
        self.waiting.append(req)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def _preempt(self, req: Request) -> None:
        self.manager.free(req.rid)
        self.running.remove(req)
        req.preemptions += 1
        self.waiting.appendleft(req)

    def schedule(self) -> tuple[list[Request], list[Request]]:
        """Return ``(prefill, decode)`` for this step, with KV slots reserved for all of them."""
        decode: list[Request] = []
        i = 0
        while i < len(self.running):  # oldest first; on a shortage preempt the newest
            req = self.running[i]
            try:
                self.manager.append_slot(req.rid)
                decode.append(req)
                i += 1
            except OutOfBlocks:
                victim = self.running[-1]
                if victim in decode:
                    decode.remove(victim)
                self._preempt(victim)
        prefill: list[Request] = []
        if self.policy == "continuous" or not self.running:
            while self.waiting and len(self.running) < self.max_batch:
                req = self.waiting[0]
                if not self.manager.can_allocate(len(req.tokens)):
                    break
                self.manager.allocate(req.rid, len(req.tokens))
                self.running.append(self.waiting.popleft())
                prefill.append(req)
        return prefill, decode

    def retire(self, req: Request) -> None:
        """Remove a finished request and free its blocks."""
        self.running.remove(req)
        self.manager.free(req.rid)


@dataclass
class CostModel:
    """Roofline time of one step on an accelerator: ``max(FLOPs / peak, bytes / bandwidth)``.

    A step reads every weight once, reads each running sequence's KV cache, and computes
    ``2 * n_params`` FLOPs per token processed (prefill and decode tokens alike).
    """

    n_params: float
    weight_bytes: float
    kv_bytes_per_token: float
    peak_flops: float
    bandwidth: float
    overhead_s: float = 0.0

    @classmethod
    def llama2_7b_a100(cls) -> CostModel:
        """Llama-2-7B in fp16 on an A100-80GB: 312 TFLOP/s, 2.04 TB/s, 0.5 MiB of KV per token."""
        return cls(6.74e9, 2 * 6.74e9, 2 * 32 * 32 * 128 * 2, 312e12, 2.039e12, 2e-4)

    def step_time(self, prefill: list[Request], decode: list[Request]) -> float:
        """Seconds for a step that prefills ``prefill`` and decodes one token for ``decode``."""
        tokens = sum(len(r.tokens) for r in prefill) + len(decode)
        context = sum(len(r.tokens) for r in prefill + decode)
        flops = 2 * self.n_params * tokens
        moved = self.weight_bytes + self.kv_bytes_per_token * context
        return max(flops / self.peak_flops, moved / self.bandwidth) + self.overhead_s

    def __call__(self, prefill: list[Request], decode: list[Request]):
        """An executor: step time and a dummy next token (0) for every request."""
        return self.step_time(prefill, decode), [0] * (len(prefill) + len(decode))


def run_trace(requests: list[Request], scheduler: Scheduler, executor) -> float:
    """Serve ``requests`` (sorted by arrival) to completion; returns the final clock in seconds.

    ``executor(prefill, decode) -> (seconds, next_tokens)`` runs one step (the real model or a
    :class:`CostModel`). The clock advances by each step's seconds and jumps over idle gaps, so
    the run is as fast as the computation and reproducible for a cost model.
    """
    pending = deque(sorted(requests, key=lambda r: r.arrival))
    clock = 0.0
    while pending or scheduler.has_work():
        while pending and pending[0].arrival <= clock:
            scheduler.add(pending.popleft())
        if not scheduler.has_work():
            clock = pending[0].arrival
            continue
        prefill, decode = scheduler.schedule()
        if not prefill and not decode:
            raise RuntimeError("run_trace: the scheduler made no progress (KV pool too small?)")
        seconds, tokens = executor(prefill, decode)
        clock += seconds
        for req, tok in zip(prefill + decode, tokens, strict=True):
            req.generated.append(int(tok))
            if req.first_token_time is None:
                req.first_token_time = clock
            if req.done:
                req.finish_time = clock
                scheduler.retire(req)
    return clock


def summarize(requests: list[Request]) -> dict[str, float]:
    """Throughput (output tokens/s), mean TTFT and TPOT, p50/p99 latency, all in seconds."""
    if any(r.finish_time is None for r in requests):
        raise ValueError("summarize: some requests have not finished; run the trace first")
    start = min(r.arrival for r in requests)
    end = max(r.finish_time for r in requests)
    latency = np.array([r.finish_time - r.arrival for r in requests])
    ttft = np.array([r.first_token_time - r.arrival for r in requests])
    tpot = [
        (r.finish_time - r.first_token_time) / (r.output_len - 1)
        for r in requests
        if r.output_len > 1
    ]
    return {
        "throughput_tok_s": sum(r.output_len for r in requests) / (end - start),
        "ttft_mean_s": float(ttft.mean()),
        "tpot_mean_s": float(np.mean(tpot)) if tpot else 0.0,
        "latency_p50_s": float(np.percentile(latency, 50)),
        "latency_p99_s": float(np.percentile(latency, 99)),
    }
