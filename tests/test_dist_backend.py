"""PyTorch's own DDP, FSDP2, DTensor and DCP on emulated ranks (``labs.dist.backend``).

``tests/dist_programs/b*.py`` are plain torch programs (no ``labs`` import); they run on 2
emulated ranks and under ``torchrun --nproc_per_node 2`` (gloo), and every rank's printed lines
must be identical.  The other tests check what the backend adds: traces of DDP's buckets and
FSDP2's collectives, clear errors instead of hangs, FSDP2 against the book's ZeRO trainer.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import procgroup
import pytest
import torch
import torch.distributed as tdist

from labs import dist
from labs.dist.run import run_script

HERE = Path(__file__).resolve().parent / "dist_programs"
RUN_ALL = str(HERE / "run_all.py")
WORLD = 2
PROGRAMS = sorted(p.name for p in HERE.glob("b[0-9]*.py"))


def _lines(rank_lines: list[str]) -> list[str]:
    return [x for x in rank_lines if "Warning" not in x and not x.startswith("  ")]


@pytest.fixture(scope="module")
def emulated() -> list[list[str]]:
    lines = run_script(RUN_ALL, WORLD, argv=PROGRAMS, prefix=False, timeout=120)
    return [_lines(x) for x in lines]


def test_programs_are_plain_torch_and_run_emulated(emulated):
    assert len(PROGRAMS) >= 4
    for name in PROGRAMS:
        text = (HERE / name).read_text()
        assert "import torch.distributed as dist" in text and "labs" not in text, name
    for r in range(WORLD):
        assert [x for x in emulated[r] if x.startswith("=== ")] == [f"=== {p}" for p in PROGRAMS]
    assert "dcp round trip True" in emulated[1]
    assert emulated[0][1] != emulated[1][1]  # the ranks' losses differ (own data) ...
    assert emulated[0][1].split()[-1] == emulated[1][1].split()[-1]  # ... their weights do not


@pytest.mark.skipif(sys.platform == "win32", reason="torchrun with gloo on Linux/macOS")
def test_same_output_under_torchrun(emulated, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    logs = tmp_path / "logs"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={WORLD}", "--log-dir", str(logs), "--redirects", "3", RUN_ALL,
           *PROGRAMS]  # fmt: skip
    proc = procgroup.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in range(WORLD):
        (out,) = logs.glob(f"*/attempt_0/{r}/stdout.log")
        assert _lines(out.read_text().splitlines()) == emulated[r], f"rank {r} differs"


# -- what the backend adds ---------------------------------------------------------------------
def _ddp_steps(steps: int = 2, bucket_mb: float = 0.0005) -> float:
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    ddp = DDP(model, bucket_cap_mb=bucket_mb)
    torch.manual_seed(dist.get_rank())
    for _ in range(steps):
        with dist.region("backward"):
            ddp(torch.randn(4, 8)).sum().backward()
    dist.destroy_process_group()
    return model[0].weight.grad.sum().item()


def test_ddp_buckets_are_traced_with_sizes_and_group():
    grads = dist.launch(_ddp_steps, WORLD)
    assert grads[0] == grads[1]
    tr = dist.last_trace()
    ar = [r for r in tr.records[0] if r.op == "all_reduce"]
    sizes = [r.nbytes for r in ar]
    grad_bytes = 4 * (8 * 32 + 32 + 32 * 4 + 4)
    # step 1: one bucket (DDP's first bucket is large); then DDP rebuilds its buckets in the
    # order the gradients became ready, capped at ~524 bytes: several all-reduces per step
    assert sizes[0] == grad_bytes and sum(sizes[1:]) == grad_bytes and len(sizes) >= 3, sizes
    assert all(r.group == (0, 1) and r.kind == "collective" for r in ar)
    back = [r for r in tr.records[0] if r.op == "backward"]
    inside = [r for r in ar if any(b.t_start <= r.t_start <= b.t_end for b in back)]
    assert len(inside) == len(ar)  # every bucket all-reduce is issued during backward


def _fsdp2_rank() -> None:
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    model(torch.randn(2, 8)).sum().backward()
    dist.destroy_process_group()


def test_fsdp2_all_gathers_and_reduce_scatters_are_traced():
    dist.launch(_fsdp2_rank, WORLD)
    ops = [r.op for r in dist.last_trace().records[0] if r.kind == "collective"]
    assert ops.count("all_gather_into_tensor") >= 2 and ops.count("reduce_scatter_tensor") == 2


def test_fsdp2_program_matches_zero3_losses_and_memory():
    from labs.parallel import fsdp

    cfg = fsdp.TrainConfig(steps=2, batch_size=4, seq_len=8, n_embd=16, n_layer=1)
    ours = fsdp.run_emulated(cfg, WORLD, 3)
    theirs = fsdp.run_fsdp(cfg, WORLD)
    torch.testing.assert_close(theirs["losses"], ours["losses"], rtol=0, atol=2e-6)
    assert theirs["ledgers"][0] == theirs["ledgers"][1] == ours["ledger"]


def _unsupported() -> None:
    dist.init_process_group("gloo")
    tdist.distributed_c10d._get_default_group().gather_coalesced([[torch.zeros(1)]], [])


def test_unsupported_call_names_itself():
    with pytest.raises(NotImplementedError, match="ProcessGroup.gather_coalesced"):
        dist.launch(_unsupported, WORLD, timeout=20)


def _premul() -> None:
    dist.init_process_group("gloo")
    out = torch.zeros(1)
    tdist.reduce_scatter_tensor(out, torch.ones(2), op=tdist._make_nccl_premul_sum(0.5))


def test_unsupported_reduce_op_names_itself():
    with pytest.raises(NotImplementedError, match="PREMUL_SUM"):
        dist.launch(_premul, WORLD, timeout=20)


def _rank1_skips_backward() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    ddp = DDP(torch.nn.Linear(4, 2))
    if dist.get_rank() == 0:  # rank 1 never runs backward: rank 0's bucket waits for it
        ddp(torch.ones(1, 4)).sum().backward()
    else:
        dist.destroy_process_group()


def test_missing_collective_raises_at_once_not_a_hang():
    t0 = time.perf_counter()
    with pytest.raises(dist.DeadlockError, match=r"all_reduce.*still missing ranks \[1\]"):
        dist.launch(_rank1_skips_backward, WORLD, timeout=30)
    assert time.perf_counter() - t0 < 25


def _shapes_differ() -> None:
    dist.init_process_group("gloo")
    tdist.all_reduce(torch.zeros(2 + dist.get_rank()))


def test_mismatched_collective_names_both_ranks():
    with pytest.raises(dist.CollectiveMismatchError, match="collective mismatch") as err:
        dist.launch(_shapes_differ, WORLD, timeout=30)
    assert "float32[2]" in str(err.value) and "float32[3]" in str(err.value)  # either rank first


def _nccl() -> tuple[str, str, str]:
    from labs.dist.backend import EmulatedProcessGroup

    dist.init_process_group("nccl")
    pg = tdist.distributed_c10d._get_default_group()
    kind = type(pg).__name__ if isinstance(pg, EmulatedProcessGroup) else "?"
    answer = (kind, pg.getBackendName(), tdist.get_backend())
    dist.destroy_process_group()
    return answer


def test_nccl_runs_on_the_emulated_backend_with_one_notice(capfd):
    # the emulated backend runs gloo's collectives on CPU tensors, and says so
    assert dist.launch(_nccl, WORLD) == [("EmulatedProcessGroup", "gloo", "gloo")] * WORLD
    err = capfd.readouterr().err
    assert len(re.findall("backend 'nccl' runs on the emulated backend", err)) == 1


def test_backend_refuses_outside_emulated_ranks():
    from labs.dist import _torch_world

    _torch_world.register()
    with pytest.raises(RuntimeError, match="only on emulated ranks"):
        tdist.init_process_group("emulated", store=tdist.HashStore(), rank=0, world_size=1)
    assert not tdist.is_initialized()


def _mesh_2d() -> tuple:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo")
    r = dist.get_rank()
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    a, b = torch.tensor([float(r)]), torch.tensor([float(r)])
    tdist.all_reduce(a, group=mesh["tp"].get_group())
    tdist.all_reduce(b, group=mesh["dp"].get_group())
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 4)
    fully_shard(m, mesh=mesh)  # HSDP: replicated over dp, sharded over tp
    m(torch.ones(2, 4)).sum().backward()
    # torch's own batch_isend_irecv and coalescing manager (not labs.dist's)
    x, y = torch.full((2,), float(r)), torch.zeros(2)
    peer = r ^ 1
    ops = [tdist.P2POp(tdist.isend, x, peer), tdist.P2POp(tdist.irecv, y, peer)]
    for w in tdist.batch_isend_irecv(ops):
        w.wait()
    with tdist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        tdist.all_reduce(x)
        tdist.all_reduce(a)
    cm.wait()
    dist.destroy_process_group()
    return a.item(), b.item(), tuple(m.weight.to_local().shape), y[0].item(), x[0].item()


def test_two_dimensional_mesh_hsdp_p2p_and_coalescing():
    res = dist.launch(_mesh_2d, 4, timeout=60)
    # tp groups {0,1} {2,3} sum to 1 and 5, then all_reduce over the world: 1+1+5+5 = 12
    assert [r[0] for r in res] == [12.0] * 4 and [r[1] for r in res] == [2.0, 4.0, 2.0, 4.0]
    assert all(r[2] == (2, 4) for r in res)
    assert [r[3] for r in res] == [1.0, 0.0, 3.0, 2.0] and [r[4] for r in res] == [6.0] * 4


def _plain_torch_init() -> float:
    from torch.nn.parallel import DistributedDataParallel as DDP

    tdist.init_process_group("gloo")  # torch's own function, inside labs.dist.launch
    torch.manual_seed(dist.get_rank())  # different weights: DDP broadcasts rank 0's
    model = DDP(torch.nn.Linear(3, 1))
    model(torch.ones(2, 3) * (1 + tdist.get_rank())).sum().backward()
    tdist.destroy_process_group()
    return model.module.bias.grad.item()


def test_torch_init_process_group_inside_launch():
    assert dist.launch(_plain_torch_init, WORLD) == [2.0, 2.0]
    assert tdist.init_process_group.__module__ == "torch.distributed.distributed_c10d"
