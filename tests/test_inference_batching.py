"""Static vs continuous batching: scheduler, paged engine on the real GPT, cost-model simulator."""

import pytest
import torch

from labs import gpt
from labs.inference.batching import CostModel, Request, Scheduler, make_trace, run_trace, summarize
from labs.inference.engine import ModelRunner
from labs.inference.kv_cache import generate
from labs.inference.paged import BlockManager

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model():
    return gpt.GPT(gpt.GPTConfig(n_embd=32, n_head=4, block_size=96)).eval()


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_engine_outputs_equal_single_sequence_generation(model, policy):
    trace = make_trace(12, rate=1e4, mean_output=10, max_output=30, seed=2)
    runner = ModelRunner(model, num_blocks=24, block_size=4)  # small pool: forces preemption
    run_trace(trace, Scheduler(policy, 6, runner.manager), runner)
    for req in trace:
        ref = generate(model, torch.tensor([req.prompt]), req.output_len)[0, len(req.prompt) :]
        assert req.generated == ref.tolist(), f"request {req.rid}"
    runner.manager.check()
    assert runner.manager.num_free == 24
    if policy == "continuous":
        assert sum(r.preemptions for r in trace) > 0


def test_continuous_beats_static_in_the_simulator():
    results = {}
    for policy in ("static", "continuous"):
        trace = make_trace(
            200, rate=30.0, prompt_len=(50, 400), mean_output=150, max_output=1000, seed=0
        )
        run_trace(trace, Scheduler(policy, 32, BlockManager(4000, 16)), CostModel.llama2_7b_a100())
        results[policy] = summarize(trace)
    assert results["continuous"]["throughput_tok_s"] > 1.5 * results["static"]["throughput_tok_s"]
    assert results["continuous"]["ttft_mean_s"] < results["static"]["ttft_mean_s"]


def test_scheduler_admits_every_step_only_when_continuous():
    for policy, admitted in (("static", 0), ("continuous", 1)):
        s = Scheduler(policy, 4, BlockManager(16, 4))
        s.add(Request(0, 0.0, [1, 2], 5))
        assert s.schedule() == ([s.running[0]], [])
        s.running[0].generated.append(0)
        s.add(Request(1, 0.0, [3], 5))
        prefill, decode = s.schedule()
        assert len(prefill) == admitted and len(decode) == 1


def test_bad_requests():
    s = Scheduler("continuous", 4, BlockManager(4, 4))
    with pytest.raises(ValueError, match="need 5 KV blocks, the pool has 4"):
        s.add(Request(0, 0.0, [1] * 10, 10))
    with pytest.raises(ValueError, match="policy"):
        Scheduler("greedy", 4, BlockManager(4, 4))
    with pytest.raises(ValueError, match="not finished"):
        summarize([Request(0, 0.0, [1], 3)])


def test_failed_prompt_leaves_other_sequences_intact(model):
    runner = ModelRunner(model, num_blocks=8, block_size=4)
    sched = Scheduler("continuous", 4, runner.manager)
    a = Request(0, 0.0, list(range(10)), 3)
    run_trace([a], sched, runner)  # a finished and freed its blocks
    b = Request(1, 0.0, list(range(12)), 2)
    sched.add(b)
    sched.schedule()
    runner([b], [])
    before = runner.cache.k.clone()
    with pytest.raises(ValueError, match="position 100 exceeds 96"):
        runner.manager.allocate(2, 4)
        c = Request(2, 0.0, list(range(100)), 1)
        runner([c], [])
    assert torch.equal(
        runner.cache.k[:, runner.manager.tables[1]], before[:, runner.manager.tables[1]]
    )
