"""Tests of labs.serving.batcher, labs.serving.metrics, labs.serving.engine and static."""

import asyncio
import math

import numpy as np
import pytest
import torch

from labs import gpt
from labs.serving import batcher, checkpoint, engine, metrics, static


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


def test_engine_matches_greedy_generation_and_static_engine():
    model = gpt.GPT(gpt.GPTConfig(block_size=48))
    eng = engine.LLMEngine(model, max_batch=2)  # 3 requests: one waits and joins later
    prompts = ["The GPU", "A", "Memory bandwidth limits decoding"]
    reqs = [engine.GenRequest(eng.encode(p), n) for p, n in zip(prompts, (12, 3, 9))]
    eng.generate(reqs)
    old = static.StaticEngine(model)
    for r in reqs:  # the paged cache changes no greedy continuation
        ref = model.generate(r.prompt[None], r.max_new_tokens, temperature=0.0)[0, len(r.prompt) :]
        assert r.output == ref.tolist() and r.finish_reason == "length"
        again = engine.GenRequest(r.prompt, r.max_new_tokens)
        assert old.run([again])[0].output == r.output
    assert eng.steps > 0 and max(eng.batch_sizes) == 2
    eng.cache.manager.check()
    assert eng.cache.manager.num_free == eng.cache.manager.num_blocks  # every block came back


def test_engine_per_request_seeds_stop_strings_and_cancel():
    model = gpt.GPT(gpt.GPTConfig(block_size=48, n_layer=1))
    eng = engine.LLMEngine(model, max_batch=4)
    pieces = []
    a = engine.GenRequest(eng.encode("hi"), 20, temperature=1.0, seed=3, on_text=pieces.append)
    b = engine.GenRequest(eng.encode("hi"), 20, temperature=1.0, seed=3)
    c = engine.GenRequest(eng.encode("hi"), 20, temperature=1.0, seed=4)
    eng.generate([a, b, c])
    assert a.output == b.output != c.output  # each request has its own generator
    assert "".join(pieces) == a.text == eng.decode(a.output)
    stop = a.text[4:6]
    d = engine.GenRequest(eng.encode("hi"), 20, temperature=1.0, seed=3, stop=(stop, "~~~"))
    eng.generate([d])
    assert d.finish_reason == "stop" and d.text == a.text[: a.text.index(stop)]
    e = engine.GenRequest(eng.encode("x"), 40)
    e.on_text = lambda piece: e.cancelled.set() if len(e.output) >= 3 else None
    eng.generate([e])
    assert e.finish_reason == "cancelled" and len(e.output) == 3
    with pytest.raises(ValueError, match="at most 48"):
        eng.submit(engine.GenRequest(eng.encode("x" * 40), 9))


def test_a_failing_request_leaves_the_batch_alone(monkeypatch):
    model = gpt.GPT(gpt.GPTConfig(block_size=48, n_layer=1))
    eng = engine.LLMEngine(model, max_batch=8)
    good = [engine.GenRequest(eng.encode("ab"), 10, temperature=0.8, seed=s) for s in range(4)]
    reference = [engine.GenRequest(r.prompt, 10, temperature=0.8, seed=r.seed) for r in good]
    eng.generate(reference)
    nan = engine.GenRequest(eng.encode("ab"), 10, temperature=float("nan"))
    eng.generate(good[:2] + [nan] + good[2:])
    assert nan.finish_reason == "error" and "temperature" in nan.error
    assert [r.output for r in good] == [r.output for r in reference]
    # a forward pass that fails for one sequence: the batch is retried one request at a time
    real = engine.paged_forward

    def poisoned(model, cache, seq_ids, idx, start):
        if any(eng._live[s][0] is victim for s in seq_ids) and int(start.max()) > 4:
            raise RuntimeError("simulated device error")
        return real(model, cache, seq_ids, idx, start)

    monkeypatch.setattr(engine, "paged_forward", poisoned)
    good = [engine.GenRequest(r.prompt, 10, temperature=0.8, seed=r.seed) for r in reference]
    victim = engine.GenRequest(eng.encode("ab"), 10)
    eng.generate(good + [victim])
    assert victim.finish_reason == "error" and len(victim.output) == 4  # positions 0-4 ran
    assert [r.output for r in good] == [r.output for r in reference]
    eng.cache.manager.check()
    assert eng.cache.manager.num_free == eng.cache.manager.num_blocks


def test_engine_queue_bound_and_checkpoint(tmp_path):
    model = gpt.GPT(gpt.GPTConfig(block_size=32, n_layer=1))
    eng = engine.LLMEngine(model, max_batch=1, max_waiting=2)
    eng.submit(engine.GenRequest(eng.encode("a"), 2))
    eng.submit(engine.GenRequest(eng.encode("a"), 2))
    with pytest.raises(engine.Overloaded):
        eng.submit(engine.GenRequest(eng.encode("a"), 2))
    path = checkpoint.save_checkpoint(model, tmp_path / "m.safetensors")
    loaded = checkpoint.load_checkpoint(path)
    x = torch.randint(0, 96, (1, 8))
    assert torch.equal(loaded(x), model(x))
    with pytest.raises(FileNotFoundError, match="save_checkpoint"):
        checkpoint.load_checkpoint(tmp_path / "missing.safetensors")
