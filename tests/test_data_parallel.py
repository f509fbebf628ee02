"""Data parallelism: sharding, bucket plans, bucketed all-reduce, DDP on core.Model and torchrun."""

from __future__ import annotations

import sys

import numpy as np
import procgroup
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labs import core, dist
from labs.dist import alpha_beta
from labs.parallel import data_parallel as dp


def test_shard():
    x = np.arange(12).reshape(6, 2)
    assert dp.shard(x, 1, 3).tolist() == [[4, 5], [6, 7]]
    assert torch.equal(dp.shard(torch.arange(4), 0, 2), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="does not split evenly over 4 ranks"):
        dp.shard(x, 0, 4)
    with pytest.raises(ValueError, match="rank 3 is not in 0..2"):
        dp.shard(x, 3, 3)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 100), min_size=1, max_size=30), cap=st.integers(1, 300))
def test_bucket_plan_properties(sizes, cap):
    plan = dp.bucket_plan(sizes, cap)
    assert [i for b in plan for i in b] == list(range(len(sizes)))  # every gradient once, in order
    for b in plan:
        assert len(b) == 1 or sum(sizes[i] for i in b) <= cap
    for b, nxt in zip(plan, plan[1:]):  # greedy: the next gradient did not fit
        assert sum(sizes[i] for i in b) + sizes[nxt[0]] > cap


def test_bucket_plan_rejects_bad_cap():
    with pytest.raises(ValueError, match="must be positive"):
        dp.bucket_plan([1, 2], 0)


@pytest.mark.parametrize("world", [1, 2, 5])
@pytest.mark.parametrize("cap", [1, 100, 10_000])
def test_bucketed_ddp_matches_single_device(world, cap):
    m = core.Model(3, 2, 5)
    x, y = core.gen_inp(10, 2)
    ref = m.copy()
    ref.backward(ref.forward(x) - y)

    def step():
        local = m.copy()
        r, w = dist.get_rank(), dist.get_world_size()
        local.backward(local.forward(dp.shard(x, r, w)) - dp.shard(y, r, w))
        plan = dp.all_reduce_buckets(dp.core_grads(local), cap)
        return local, plan

    results = dist.launch(step, world)
    sizes = [g.nbytes for g in dp.core_grads(ref)]
    for local, plan in results:
        assert ref.compare(local)
        assert plan == dp.bucket_plan(sizes, cap)
    assert dist.last_trace().op_counts(0)["all_reduce"] == len(dp.bucket_plan(sizes, cap))


def test_average_and_tensors():
    def step():
        g = [torch.full((3,), float(dist.get_rank())), torch.ones(2)]
        dp.all_reduce_buckets(g, 1e6, average=True)
        return g

    for g in dist.launch(step, 4):
        torch.testing.assert_close(g[0], torch.full((3,), 1.5))
        torch.testing.assert_close(g[1], torch.ones(2))


def test_predicted_time_prefers_fewer_larger_buckets():
    sizes = [4096] * 100
    many = dp.predicted_time(dp.bucket_plan(sizes, 1), sizes, 8, alpha_beta.INFINIBAND)
    one = dp.predicted_time(dp.bucket_plan(sizes, 1e9), sizes, 8, alpha_beta.INFINIBAND)
    assert many > one > 0
    assert many - one == pytest.approx(99 * 2 * 7 * alpha_beta.INFINIBAND.alpha, rel=1e-6)


def test_torch_ddp_under_torchrun_matches_emulated(tmp_path):
    from labs.parallel.ddp_torchrun import ddp_step

    out_file = tmp_path / "ddp.pt"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "labs.parallel.ddp_torchrun",
        "--out",
        str(out_file),
    ]
    run = procgroup.run(cmd, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (
        "DDP matches one process: True; hand-written all-reduce matches one process: True"
        in run.stdout
    )
    real = torch.load(out_file)
    emulated = dist.launch(ddp_step, 2)
    for a, b in zip(emulated[0], real):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


@settings(max_examples=80, deadline=None)
@given(
    numels=st.lists(st.integers(1, 400_000), min_size=1, max_size=25),
    cap_mb=st.one_of(st.none(), st.sampled_from([0.001, 0.1, 0.5, 1, 2.5])),
)
def test_ddp_bucket_plan_is_torchs_assignment(numels, cap_mb):
    """The hand-written rule against the function DDP's C++ reducer uses to rebuild its buckets,
    with the limits DDP passes it: [1 MiB, 25 MiB] by default, [cap, cap] when the cap is set."""
    import torch.distributed as tdist

    tensors = [torch.empty(n) for n in numels]
    cap = int((25 if cap_mb is None else cap_mb) * 2**20)
    limits = [2**20 if cap_mb is None else cap, cap]
    assert tdist._DEFAULT_FIRST_BUCKET_BYTES == dp.DDP_FIRST_BUCKET_BYTES
    want, _ = tdist._compute_bucket_assignment_by_size(tensors, limits)
    assert dp.ddp_bucket_plan([4 * n for n in numels], cap_mb) == want


def test_ddp_bucket_plan_rejects_bad_cap():
    with pytest.raises(ValueError, match="must be positive"):
        dp.ddp_bucket_plan([1, 2], 0)


def _ddp_default_buckets(kwargs):
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(6)]), **kwargs)
    for step in range(2):
        with dist.region(f"backward {step}"):
            model(torch.randn(4, 256)).sum().backward()
    dist.destroy_process_group()


@pytest.mark.parametrize("cap_mb", [None, 0.25])
def test_ddp_buckets_follow_ddp_bucket_plan(cap_mb):
    """PyTorch's DDP on emulated ranks: one bucket in the first step, then the plan of
    ddp_bucket_plan over the gradients in backward order (bias, then weight, last layer first)."""
    dist.launch(_ddp_default_buckets, 2, {} if cap_mb is None else {"bucket_cap_mb": cap_mb})
    records = dist.last_trace().records[0]
    sizes = [4 * n for _ in range(6) for n in (256, 256 * 256)]
    for step, want in ((0, [sum(sizes)]), (1, None)):
        back = next(r for r in records if r.op == f"backward {step}")
        got = [
            r.nbytes
            for r in records
            if r.op == "all_reduce" and back.t_start <= r.t_start <= back.t_end
        ]
        if want is None:
            want = [sum(sizes[i] for i in b) for b in dp.ddp_bucket_plan(sizes, cap_mb)]
            assert len(want) > 1
        assert got == want, (step, got, want)
