"""Tests of labs.serving.batcher, labs.serving.metrics and labs.serving.engine."""

import asyncio
import math

import numpy as np
import pytest
import torch

from labs import gpt
from labs.serving import batcher, engine, metrics


def test_should_flush():
    assert not batcher.should_flush(0, 10.0, 4, 0.01)
    assert batcher.should_flush(4, 0.0, 4, 0.01)
    assert not batcher.should_flush(3, 0.009, 4, 0.01)
    assert batcher.should_flush(1, 0.01, 4, 0.01)


def test_batcher_groups_and_bounds_queue():
    async def main():
        seen = []

        async def process(batch):
            seen.append(list(batch))
            await asyncio.sleep(0.05)

        b = batcher.AdaptiveBatcher(process, max_batch_size=4, max_wait_s=0.02, max_queue=6)
        with pytest.raises(RuntimeError, match="before start"):
            b.submit(0)
        await b.start()
        for i in range(6):
            b.submit(i)
        with pytest.raises(batcher.Overloaded):
            b.submit(99)
        await asyncio.sleep(0.3)
        b.submit(100)  # alone: flushed after max_wait_s
        await asyncio.sleep(0.2)
        await b.stop()
        return seen

    seen = asyncio.run(main())
    assert seen == [[0, 1, 2, 3], [4, 5], [100]]


def test_histogram_quantile_matches_promql_rule():
    buckets = [(0.1, 10.0), (0.2, 30.0), (0.5, 40.0), (math.inf, 40.0)]
    assert metrics.histogram_quantile(0.5, buckets) == pytest.approx(0.15)
    assert metrics.histogram_quantile(0.625, buckets) == pytest.approx(0.1 + 0.1 * 15 / 20)
    assert metrics.histogram_quantile(1.0, buckets) == pytest.approx(0.5)
    assert math.isnan(metrics.histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]))
    with pytest.raises(ValueError):
        metrics.histogram_quantile(1.5, buckets)
    # against the exact quantile of samples: within one bucket width
    rng = np.random.default_rng(0)
    samples = rng.exponential(0.3, 5000)
    m = metrics.ServiceMetrics()
    for s in samples:
        m.latency.observe(s)
    parsed = metrics.parse_metrics(m.render().decode())
    est = metrics.histogram_quantile(0.5, metrics.latency_buckets(parsed))
    assert abs(est - np.median(samples)) < 0.1


def test_engine_batch_equals_one_by_one_generation():
    model = gpt.GPT(gpt.GPTConfig(block_size=32))
    eng = engine.Engine(model)
    prompts = ["The GPU", "A", "Memory bandwidth limits decoding"]
    reqs = [engine.GenRequest(eng.encode(p), 12) for p in prompts]
    eng.run(reqs)
    for r in reqs:  # right padding never changes a greedy continuation
        ref = model.generate(r.prompt[None], 12, temperature=0.0)[0, len(r.prompt) :]
        assert r.output == ref.tolist()
    streamed = []
    r = engine.GenRequest(eng.encode("hi"), 5, temperature=1.0, seed=3, on_token=streamed.append)
    again = engine.GenRequest(eng.encode("hi"), 5, temperature=1.0, seed=3)
    eng.run([r])
    eng.run([again])
    assert streamed == r.output == again.output  # seeded sampling is reproducible


def test_engine_cancel_and_checkpoint(tmp_path):
    model = gpt.GPT(gpt.GPTConfig(block_size=32, n_layer=1))
    eng = engine.Engine(model)
    r = engine.GenRequest(eng.encode("x"), 50)
    r.on_token = lambda tok: r.cancelled.set() if len(r.output) >= 3 else None
    eng.run([r])
    assert len(r.output) == 3
    path = engine.save_checkpoint(model, tmp_path / "m.safetensors")
    loaded = engine.load_checkpoint(path)
    x = torch.randint(0, 96, (1, 8))
    assert torch.equal(loaded(x), model(x))
    with pytest.raises(FileNotFoundError, match="save_checkpoint"):
        engine.load_checkpoint(tmp_path / "missing.safetensors")
