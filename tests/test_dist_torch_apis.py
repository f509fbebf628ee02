"""PyTorch's wider APIs on emulated ranks, where a plain program cannot show the difference:
per-rank state of torch's process-wide tables, the profiler, async checkpoints, groups of other
backends, threads a rank starts, timeouts, and the layouts gloo gets wrong (refused here).

What a plain program can show (pipelining schedules, loss_parallel, async_save, reduction
order, strided tensors, errors) is compared with torchrun in tests/test_dist_backend.py and
tests/test_dist_programs.py (b06-b08, p12-p14).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import torch
import torch.distributed as tdist

from labs import dist


# -- pipelining at 4 ranks, launched directly ---------------------------------------------------
def _interleaved() -> tuple[list[float], bool]:
    from torch.distributed import pipelining as pp

    dist.init_process_group("gloo")
    r, n = dist.get_rank(), dist.get_world_size()

    def blocks():
        torch.manual_seed(0)
        return [torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Tanh()) for _ in range(2 * n)]

    mods = blocks()
    stages = [pp.PipelineStage(mods[i], i, 2 * n, torch.device("cpu")) for i in (r, r + n)]
    loss = lambda out, y: (out - y).pow(2).mean()  # noqa: E731
    torch.manual_seed(1)
    x, y = torch.randn(8, 6), torch.randn(8, 6)
    sched = pp.ScheduleInterleaved1F1B(stages, 4, loss_fn=loss)
    losses: list[torch.Tensor] = []
    if r == 0:
        sched.step(x)
    else:
        sched.step(target=y if r == n - 1 else None, losses=losses if r == n - 1 else None)
    ref = torch.nn.Sequential(*blocks())
    loss(ref(x), y).backward()
    grads = [p.grad for p in ref.parameters()]
    mine = [p.grad for i in (r, r + n) for p in mods[i].parameters()]
    want = [g for i in (r, r + n) for g in grads[2 * i : 2 * i + 2]]
    dist.destroy_process_group()
    return [v.item() for v in losses], all(
        torch.allclose(a, b, atol=1e-6) for a, b in zip(mine, want)
    )


def test_interleaved_1f1b_on_4_ranks_equals_one_process():
    res = dist.launch(_interleaved, 4, timeout=120)
    assert all(ok for _, ok in res) and len(res[3][0]) == 4


# -- torch's process-wide tables, per rank ------------------------------------------------------
def _loss_parallel_apart() -> tuple[bool, bool]:
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import loss_parallel

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2,))
    x = distribute_tensor(torch.randn(4, 6), mesh, [Shard(1)])
    handlers = DTensor._op_dispatcher._custom_op_handlers
    with loss_parallel():
        F.cross_entropy(x, torch.tensor([0, 1, 2, 5]))
        if dist.get_rank() == 1:
            dist.barrier()  # rank 0 leaves its context while rank 1 is still inside
            inside = torch.ops.aten._log_softmax.default in handlers
    if dist.get_rank() == 0:
        dist.barrier()
        inside = True
    left = torch.ops.aten._log_softmax.default not in DTensor._op_dispatcher._custom_op_handlers
    dist.destroy_process_group()
    return inside, left


def test_loss_parallel_edits_each_ranks_own_table():
    from torch.distributed.tensor import DTensor

    before = dict(DTensor._op_dispatcher._custom_op_handlers)
    assert dist.launch(_loss_parallel_apart, 2) == [(True, True)] * 2
    assert DTensor._op_dispatcher._custom_op_handlers == before  # the process's own, untouched


def _save_both_ways(root: str) -> list[float]:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

    dist.init_process_group("gloo")
    r = dist.get_rank()
    state = {"w": torch.arange(4.0) + r, f"own{r}": torch.full((2,), float(r))}
    done = []
    for kind in (AsyncCheckpointerType.THREAD, AsyncCheckpointerType.PROCESS):
        f = dcp.async_save(
            state, checkpoint_id=f"{root}/{kind.value}", async_checkpointer_type=kind
        )
        done.append(f.done())  # saved on the rank's thread before async_save returned
        f.result()
    back = {"w": torch.zeros(4), f"own{r}": torch.zeros(2)}
    dcp.load(back, checkpoint_id=f"{root}/{AsyncCheckpointerType.PROCESS.value}")
    dist.destroy_process_group()
    return done + back["w"].tolist() + back[f"own{r}"].tolist()


def test_async_save_both_executors_save_on_the_rank(tmp_path):
    res = dist.launch(_save_both_ways, 2, str(tmp_path))
    assert res == [
        [True, True, 0.0, 1.0, 2.0, 3.0, 0.0, 0.0],
        [True, True, 0.0, 1.0, 2.0, 3.0, 1.0, 1.0],
    ]


def _other_backends() -> tuple:
    dist.init_process_group("gloo")
    g = tdist.new_group([0, 1], backend="gloo")  # a real gloo group would block in C++
    x = torch.ones(2)
    tdist.all_reduce(x, group=g)
    cpu = tdist.new_group(backend="cpu:gloo,cuda:nccl")
    tdist.barrier(group=cpu)
    try:
        tdist.new_group([0, 1], backend="mpi")
        refused = ""
    except ValueError as err:
        refused = str(err)
    backend = tdist.get_backend(g)
    dist.destroy_process_group()
    return x.tolist(), backend, refused


def test_new_group_with_a_backend_runs_on_the_emulated_one():
    res = dist.launch(_other_backends, 2, timeout=30)
    assert res[0][:2] == ([2.0, 2.0], "gloo") and "backend 'mpi' is not emulated" in res[0][2]


# -- the profiler: one session for the process, each rank its own events -----------------------
def _profiled(both: bool) -> list:
    dist.init_process_group("gloo")
    r = dist.get_rank()
    events = None
    if both or r == 0:
        with torch.profiler.profile(record_shapes=True) as prof:
            x = torch.full((4,), float(r))
            tdist.all_reduce(x)
            if r == 1:
                torch.ones(3).mul_(2)  # only rank 1 multiplies
        events = [(e.name, e.is_async, e.input_shapes) for e in prof.events()
                  if e.name.startswith("gloo:") or e.name == "aten::mul_"]  # fmt: skip
    else:
        tdist.all_reduce(torch.zeros(4))
    dist.destroy_process_group()
    return events


@pytest.mark.parametrize("both", [True, False], ids=["every-rank", "rank-0-only"])
def test_each_rank_profiles_its_own_events(both):
    res = dist.launch(_profiled, 2, both, timeout=60)
    assert res[0] == [("gloo:all_reduce", True, [[4]])]  # as gloo records it: async, shapes
    assert res[1] == (
        [("gloo:all_reduce", True, [[4]]), ("aten::mul_", False, [[3], []])] if both else None
    )


# -- threads a rank starts -------------------------------------------------------------------
def _threads() -> tuple:
    dist.init_process_group("gloo")
    seen: dict = {}

    def helper():
        seen["rank"] = tdist.get_rank()
        seen["group"] = tdist.distributed_c10d._resolve_process_group(
            tdist.group.WORLD.group_name).size()  # fmt: skip
        try:
            tdist.all_reduce(torch.ones(1))
        except RuntimeError as err:
            seen["collective"] = str(err)

    t = threading.Thread(target=helper, name="my-helper")
    t.start()
    t.join()
    dist.destroy_process_group()
    return seen["rank"], seen["group"], seen["collective"]


def test_a_thread_a_rank_starts_belongs_to_it():
    res = dist.launch(_threads, 2)
    for r, (rank, size, err) in enumerate(res):
        assert (rank, size) == (r, 2)
        assert f"thread 'my-helper', which rank {r} started" in err


# -- timeouts the program chose: gloo's RuntimeError on the waiting rank ------------------------
def _timeouts() -> list[str]:
    dist.init_process_group("gloo")
    r, seen = dist.get_rank(), []
    g = tdist.new_group([0, 1], timeout=timedelta(seconds=0.2))
    if r == 0:
        for call in (lambda: tdist.monitored_barrier(g, timeout=timedelta(seconds=0.2)),
                     lambda: tdist.barrier(g)):  # fmt: skip
            try:
                call()
            except RuntimeError as err:
                seen.append(str(err).split(" (")[0])
    dist.barrier()  # the default group is unaffected
    dist.destroy_process_group()
    return seen


def test_timeouts_raise_gloos_error_on_the_waiting_rank():
    res = dist.launch(_timeouts, 2, timeout=60)
    assert res[0][0] == "[Rank 0]: Rank 1 failed to pass monitoredBarrier in 200 ms"
    assert "is unusable: rank 0 timed out in monitored_barrier" in res[0][1]  # as gloo: broken
    assert res[1] == []


def _monitored_all() -> str:
    dist.init_process_group("gloo")
    r = dist.get_rank()
    msg = ""
    if r != 2:
        try:
            tdist.monitored_barrier(wait_all_ranks=True)
        except RuntimeError as err:
            msg = str(err)
    if r == 2:
        dist.get_world_size()  # rank 2 never arrives
    return msg


def test_monitored_barrier_names_every_missing_rank_and_the_others_blame_rank_0():
    # torch's default for monitored_barrier is 30 minutes; since no rank can ever arrive, the
    # emulator raises gloo's error at once
    res = dist.launch(_monitored_all, 3, timeout=60)
    assert res[0] == "[Rank 0]: Ranks 2 failed to pass monitoredBarrier in 1800000 ms"
    assert res[1].startswith("Rank 1 successfully reached monitoredBarrier, but received errors")


def test_without_a_timeout_a_deadlock_still_stops_the_run_at_once():
    def prog():
        dist.init_process_group("gloo")
        if dist.get_rank() == 0:
            tdist.barrier()

    with pytest.raises(dist.DeadlockError, match="barrier"):
        dist.launch(prog, 2, timeout=60)


# -- layouts gloo gets wrong: refused with an error that says so --------------------------------
@pytest.mark.parametrize(
    "case, match",
    [("all_reduce-gaps", "view with gaps"), ("broadcast-gaps", "view with gaps"),
     ("reduce-expanded", "view with gaps or overlapping"), ("scatter-transposed", "not contiguous"),
     ("all_reduce-mixed", "collective mismatch")],
)  # fmt: skip
def test_layouts_gloo_gets_wrong_are_refused(case, match):
    def prog():
        dist.init_process_group("gloo")
        r = dist.get_rank()
        if case == "all_reduce-gaps":
            tdist.all_reduce(torch.zeros(4, 8)[:, ::2])
        elif case == "broadcast-gaps":
            tdist.broadcast(torch.zeros(4, 8)[:, ::2], src=0)
        elif case == "reduce-expanded":
            tdist.reduce(torch.ones(1).expand(4), dst=0)
        elif case == "scatter-transposed":
            tdist.scatter(torch.zeros(3, 2).t(), [torch.ones(2, 3)] * 2 if r == 0 else None, src=0)
        else:  # one rank channels_last, the other not: gloo adds mismatched memory
            x = torch.ones(1, 3, 2, 2)
            tdist.all_reduce(x.to(memory_format=torch.channels_last) if r else x)

    with pytest.raises((RuntimeError, ValueError), match=match):
        dist.launch(prog, 2, timeout=30)
