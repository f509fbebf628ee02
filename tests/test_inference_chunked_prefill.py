"""Chunked prefill: the budget holds, outputs are unchanged, long prompts stop stalling decodes."""

import numpy as np
import pytest

from labs import gpt
from labs.inference import batching, engine
from labs.inference.batching import CostModel, Request
from labs.inference.chunked_prefill import (
    ChunkCost,
    ChunkedModelRunner,
    ChunkedScheduler,
    max_token_gap,
    run_chunked,
)
from labs.inference.paged import BlockManager


def _trace(n=6, seed=0, long=(10, 20), out=4):
    rng = np.random.default_rng(seed)
    return [
        Request(i, 0.002 * i, rng.integers(0, 64, int(rng.integers(*long))).tolist(), out)
        for i in range(n)
    ]


def test_budget_must_cover_every_decode():
    with pytest.raises(ValueError, match="token_budget"):
        ChunkedScheduler(max_batch=8, manager=BlockManager(8, 4), token_budget=4)


@pytest.mark.parametrize("budget", [None, 5, 16])
def test_chunked_prefill_gives_the_same_tokens_within_the_budget(budget):
    model = gpt.GPT(gpt.GPTConfig(n_embd=32, n_head=4, n_layer=2, block_size=64, vocab_size=64))
    trace = _trace()
    runner = ChunkedModelRunner(model, num_blocks=128, block_size=4)
    sched = ChunkedScheduler(max_batch=4, manager=runner.manager, token_budget=budget)
    steps = []

    def executor(chunks, decode):
        steps.append(sum(c.length for c in chunks) + len(decode))
        return runner(chunks, decode)

    run_chunked(trace, sched, executor)
    if budget is not None:
        assert max(steps) <= budget
    reference = _trace()
    base = engine.ModelRunner(model, num_blocks=128, block_size=4)
    batching.run_trace(reference, batching.Scheduler("continuous", 4, base.manager), base)
    assert [r.generated for r in trace] == [r.generated for r in reference]
    runner.manager.check()
    assert runner.manager.num_free == runner.manager.num_blocks


def test_chunking_bounds_the_worst_stall_in_the_cost_model():
    gaps, ttft = {}, {}
    for budget in (None, 256):
        rng = np.random.default_rng(0)
        trace = [
            Request(i, i * 0.5, rng.integers(0, 100, int(rng.integers(1000, 2000))).tolist(), 100)
            for i in range(20)
        ]
        times = {}
        sched = ChunkedScheduler(16, BlockManager(4000, 16), budget)
        run_chunked(trace, sched, ChunkCost(CostModel.llama2_7b_a100()), times)
        gaps[budget] = max_token_gap(times)["gap_max_s"]
        ttft[budget] = batching.summarize(trace)["ttft_mean_s"]
    assert gaps[256] < gaps[None] / 3
    assert ttft[256] > ttft[None]


@pytest.mark.parametrize("budget", [None, 6])
def test_prefix_caching_chunks_and_preemption_together_keep_the_tokens(budget):
    """A pool so small that requests are preempted; shared prompts; the greedy tokens still agree."""
    model = gpt.GPT(gpt.GPTConfig(n_embd=32, n_head=4, n_layer=2, block_size=64, vocab_size=64))
    rng = np.random.default_rng(1)
    system = rng.integers(0, 64, 10).tolist()

    def trace():
        gen = np.random.default_rng(2)
        return [
            Request(i, 0.0, system + gen.integers(0, 64, 1 + i % 5).tolist(), 12) for i in range(10)
        ]

    reference = trace()
    base = engine.ModelRunner(model, num_blocks=128, block_size=4)
    batching.run_trace(reference, batching.Scheduler("continuous", 4, base.manager), base)
    got = trace()
    runner = ChunkedModelRunner(model, num_blocks=16, block_size=4, prefix_caching=True)
    run_chunked(got, ChunkedScheduler(4, runner.manager, budget), runner)
    assert sum(r.preemptions for r in got) > 0, "the pool was meant to run dry"
    assert [r.generated for r in got] == [r.generated for r in reference]
    assert runner.manager.hits > 0
    runner.manager.check()
