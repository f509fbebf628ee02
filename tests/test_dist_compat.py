"""The torch.distributed API that labs.dist adds for drop-in programs (emulated ranks)."""

import random
import warnings

import numpy as np
import pytest
import torch
import torch.distributed as tdist

from labs import dist
from labs.dist.run import PATCHED, patched_torch_distributed


def test_setup_and_queries():
    def program():
        dist.init_process_group("gloo", rank=dist.get_rank(), world_size=3)
        out = (dist.is_available(), dist.get_backend(), dist.get_process_group_ranks(None),
               dist.get_global_rank(None, 2), dist.get_group_rank(None, 1))  # fmt: skip
        dist.monitored_barrier()
        dist.destroy_process_group()
        return out

    assert dist.launch(program, 3) == [(True, "gloo", [0, 1, 2], 2, 1)] * 3
    with pytest.raises(ValueError, match="world_size=5"):
        dist.launch(lambda: dist.init_process_group("gloo", world_size=5), 2)


def test_subgroups_and_non_members():
    def program():
        cur, groups = dist.new_subgroups(group_size=2)
        odd, _ = dist.new_subgroups_by_enumeration([[1, 3]])
        x = torch.tensor([dist.get_rank()])
        dist.all_reduce(x, group=cur)
        return len(groups), x.item(), odd is None, dist.get_rank(groups[1])

    assert dist.launch(program, 4) == [(2, 1, True, -1), (2, 1, False, -1), (2, 5, True, 0),
                                       (2, 5, False, 1)]  # fmt: skip
    with pytest.raises(ValueError, match="must be divisible"):  # torch's checks and messages
        dist.launch(lambda: dist.new_subgroups(group_size=3), 4)
    with pytest.raises(ValueError, match="has appeared in both subgroup"):
        dist.launch(lambda: dist.new_subgroups_by_enumeration([[0, 1], [1]]), 2)


def test_a_non_member_gets_what_torch_gives_it(monkeypatch):
    """As in torch: a collective on a group the rank is not in warns and does nothing (recv
    returns -1); ``_p2p.TORCH_NON_MEMBER = False`` makes it raise, naming the rank and the op."""
    from labs.dist import _p2p

    def program():
        g = dist.new_group([0])  # every rank creates it; only rank 0 is a member
        if dist.get_rank() == 0:
            return None
        x = torch.full((2,), 2.0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ret = dist.all_reduce(x, group=g), dist.recv(x, group=g, group_src=0)
        return ret, x.tolist(), [str(w.message) for w in caught]

    ret1, x1, w1 = dist.launch(program, 2)[1]
    assert (ret1, x1) == ((None, -1), [2.0, 2.0])
    assert w1 == [f"Running {op} on global rank 1 which does not belong to the given group."
                  for op in ("all_reduce", "recv")]  # fmt: skip
    monkeypatch.setattr(_p2p, "TORCH_NON_MEMBER", False)
    with pytest.raises(ValueError, match="rank 1: all_reduce: this rank is not a member"):
        dist.launch(lambda: dist.all_reduce(torch.zeros(1), group=dist.new_group([0])), 2)


def test_batch_isend_irecv_and_p2pop_checks():
    def program():
        r, n = dist.get_rank(), dist.get_world_size()
        got = torch.empty(2)
        ops = [dist.P2POp(dist.isend, torch.full((2,), float(r)), (r + 1) % n),
               dist.P2POp(dist.irecv, got, (r - 1) % n)]  # fmt: skip
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return got.tolist()

    assert dist.launch(program, 3) == [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]]
    with pytest.raises(ValueError, match="Invalid ``op``"):
        dist.P2POp(dist.send, torch.zeros(1), 0)
    with pytest.raises(ValueError, match="non-empty list"):
        dist.launch(lambda: dist.batch_isend_irecv([]), 2)


def test_all_to_all_single_uneven_zero_and_errors():
    def program(bad=False):
        r, n = dist.get_rank(), dist.get_world_size()
        send = [(r + j) % 3 for j in range(n)]
        recv = [(i + r) % 3 for i in range(n)]
        if bad and r == 1:
            recv = recv[::-1]
        x = torch.arange(sum(send), dtype=torch.float32) + 100 * r
        y = torch.empty(sum(recv))
        dist.all_to_all_single(y, x, recv, send)
        return y.tolist()

    assert dist.launch(program, 3) == [[100.0, 200.0, 201.0], [0.0, 101.0, 102.0],
                                       [1.0, 2.0, 202.0]]  # fmt: skip
    sent = dist.last_trace().bytes_sent()
    assert sent == [4 * 3, 4 * 1, 4 * 2]  # rows not kept at home, 4 bytes each
    with pytest.raises(ValueError, match="expects"):
        dist.launch(program, 3, True)
    with pytest.raises(ValueError, match="summing to dim 0"):
        dist.launch(
            lambda: dist.all_to_all_single(torch.empty(2), torch.zeros(2), [1, 1], [2, 1]), 2
        )
    with pytest.raises(RuntimeError, match="invalid tensor size"):  # gloo's rule, as RuntimeError
        dist.launch(
            lambda: dist.all_to_all([torch.empty(1), torch.empty(2)], [torch.zeros(1)] * 2), 2
        )


def test_object_collectives_give_copies():
    shared = {"items": [1]}

    def program():
        r = dist.get_rank()
        objs = [None, None]
        dist.all_gather_object(objs, shared if r == 0 else {"r": r})
        lst = [shared] if r == 0 else [None]
        dist.broadcast_object_list(lst, src=0)
        got = [None]
        dist.scatter_object_list(got, [("a", 0), ("b", 1)] if r == 1 else None, src=1)
        gathered = [None, None] if r == 1 else None
        dist.gather_object(r * 10, gathered, dst=1)
        return objs[0] is shared, lst[0] is shared, objs[0], got[0], gathered

    res = dist.launch(program, 2)
    assert res[1][:2] == (False, False) and res[1][2] == {"items": [1]}
    assert res[0][3] == ("a", 0) and res[1][3] == ("b", 1) and res[1][4] == [0, 10]
    with pytest.raises(TypeError, match="cannot pickle"):
        dist.launch(lambda: dist.all_gather_object([None, None], lambda: 0), 2)


def test_bitwise_reduce_ops():
    def program():
        x = torch.tensor([1 << dist.get_rank(), 7])
        dist.all_reduce(x, op=tdist.ReduceOp.BOR)
        y = torch.tensor([dist.get_rank() + 1])
        dist.all_reduce(y, op=dist.ReduceOp.BXOR)
        return x.tolist(), y.item()

    assert dist.launch(program, 3) == [([7, 7], 0)] * 3
    # gloo's RuntimeError (the emulator's error is also a ValueError)
    with pytest.raises(RuntimeError, match="Cannot use ReduceOp.BAND with non-integral dtype"):
        dist.launch(lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND), 2)


def test_per_rank_random_state_is_deterministic_and_isolated():
    def program():
        r = dist.get_rank()
        torch.manual_seed(r)
        np.random.seed(r)
        random.seed(r)
        a = torch.randn(3)
        dist.barrier()
        return a.tolist() + torch.rand(1).tolist(), np.random.randint(0, 99, 2).tolist(), \
            random.randint(0, 99)  # fmt: skip

    def expected(r):
        g = torch.Generator().manual_seed(r)
        a = torch.randn(3, generator=g).tolist() + torch.rand(1, generator=g).tolist()
        return (
            a,
            np.random.RandomState(r).randint(0, 99, 2).tolist(),
            random.Random(r).randint(0, 99),
        )

    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first = dist.launch(program, 3, per_rank_rng=True)
    assert torch.equal(torch.rand(1), before)  # the caller's stream is untouched
    assert first == dist.launch(program, 3, per_rank_rng=True) == [expected(r) for r in range(3)]

    def unseeded():
        return (torch.nn.Linear(4, 4).weight.detach().clone(), np.random.randint(0, 2**31),
                random.randint(0, 2**31), torch.initial_seed())  # fmt: skip

    torch.manual_seed(7)
    fresh = dist.launch(unseeded, 3, per_rank_rng=True)
    # the launcher's generator is not consumed
    assert torch.equal(torch.rand(1), torch.rand(1, generator=torch.Generator().manual_seed(7)))
    # unseeded ranks start different, as torchrun's processes do (each its own random seed)
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        assert not torch.equal(fresh[a][0], fresh[b][0])
        assert fresh[a][1:] != fresh[b][1:]
    torch.manual_seed(7)
    again = dist.launch(unseeded, 3, per_rank_rng=True)  # a seeded notebook repeats itself
    assert all(torch.equal(x[0], y[0]) and x[1:] == y[1:] for x, y in zip(fresh, again))
    with pytest.raises(ZeroDivisionError, match=r"rank \d failed"):  # a failure does not hang
        dist.launch(
            lambda: (
                (dist.barrier(), 1 / dist.get_rank() if dist.get_rank() == 1 else 0, dist.barrier())
                and 1 / 0
            ),
            3,
            per_rank_rng=True,
            timeout=20,
        )


def test_patching_is_undone():
    before = {n: getattr(tdist, n) for n in PATCHED if hasattr(tdist, n)}
    with patched_torch_distributed():
        # labs.dist's on emulated ranks, torch's own on any other thread
        assert tdist.init_process_group is not before["init_process_group"]
        assert tdist.P2POp is dist.P2POp and issubclass(dist.P2POp, before["P2POp"])
        # labs.dist's before init_process_group, torch's own (on the emulated backend) after
        assert tdist.all_to_all_single is not before["all_to_all_single"]
    assert all(getattr(tdist, n) is f for n, f in before.items())


def test_each_script_rank_has_its_own_environment(tmp_path, monkeypatch):
    """labs.dist.run: every rank sees torchrun's variables and its own copy of os.environ; the
    real environment is untouched afterwards."""
    import os

    from labs.dist.run import run_script

    monkeypatch.delenv("RANK", raising=False)
    script = tmp_path / "env.py"
    script.write_text(
        "import os, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "os.environ['ONLY_MINE'] = os.environ['RANK']\n"
        "dist.barrier()\n"
        "print(os.environ['LOCAL_RANK'], os.getenv('WORLD_SIZE'), os.environ['ONLY_MINE'],\n"
        "      sorted(k for k in os.environ.copy() if k == 'ONLY_MINE'))\n"
    )
    real = os.environ
    lines = run_script(str(script), 3, prefix=False)
    assert lines == [[f"{r} 3 {r} ['ONLY_MINE']"] for r in range(3)]
    assert os.environ is real and "RANK" not in os.environ and "ONLY_MINE" not in os.environ


# -- every function of the drop-in module, with torch's default group and without it ---------------
def _walk(with_torch_group: bool) -> dict:
    """Call every public function of ``labs.dist`` on 4 ranks; return what each gave (rank's
    view).  ``with_torch_group``: after ``init_process_group("gloo")`` (the emulated backend)."""
    r, out = dist.get_rank(), {}
    if with_torch_group:
        dist.init_process_group("gloo")
    out["is_initialized"] = dist.is_initialized()
    out["is_emulated"] = dist.is_emulated()
    out["is_available"] = dist.is_available()
    out["get_backend"] = dist.get_backend()
    out["get_rank"], out["get_world_size"] = dist.get_rank(), dist.get_world_size()
    g = dist.new_group([1, 2, 3])
    out["new_group"] = dist.get_rank(g), dist.get_world_size(g)
    if r:
        out["get_process_group_ranks"] = dist.get_process_group_ranks(g)
        out["get_global_rank"] = dist.get_global_rank(g, 0)
        out["get_group_rank"] = dist.get_group_rank(g, 3)
    cur, subs = dist.new_subgroups(group_size=2)
    out["new_subgroups"] = dist.get_process_group_ranks(cur), len(subs)
    mine, grid = dist.new_subgroups_by_enumeration([[0, 2], [1, 3]])  # picotron's grid
    out["new_subgroups_by_enumeration"] = dist.get_process_group_ranks(mine), len(grid)
    x = torch.full((2,), float(r))
    dist.all_reduce(x)
    out["all_reduce"] = x.tolist()
    b = torch.full((2,), float(r))
    dist.broadcast(b, src=2)
    out["broadcast"] = b.tolist()
    y = torch.full((2,), float(r + 1))
    dist.reduce(y, dst=0)
    out["reduce"] = y.tolist() if r == 0 else None
    lst = [torch.zeros(1) for _ in range(4)]
    dist.all_gather(lst, torch.tensor([float(r)]))
    out["all_gather"] = [t.item() for t in lst]
    flat = torch.zeros(4)
    dist.all_gather_into_tensor(flat, torch.tensor([float(r)]))
    single = torch.zeros(4)
    dist.all_gather_single(single, torch.tensor([float(r)]))
    out["all_gather_into_tensor"] = flat.tolist(), single.tolist()
    gl = [torch.zeros(1) for _ in range(4)] if r == 3 else None
    dist.gather(torch.tensor([float(r)]), gl, dst=3)
    out["gather"] = [t.item() for t in gl] if gl else None
    s = torch.zeros(1)
    dist.scatter(s, [torch.tensor([10.0 + i]) for i in range(4)] if r == 1 else None, src=1)
    out["scatter"] = s.item()
    rs = torch.zeros(1)
    dist.reduce_scatter(rs, [torch.tensor([float(i)]) for i in range(4)])
    rst, rss = torch.zeros(1), torch.zeros(1)
    dist.reduce_scatter_tensor(rst, torch.arange(4.0))
    dist.reduce_scatter_single(rss, torch.arange(4.0))
    out["reduce_scatter"] = rs.item(), rst.item(), rss.item()
    a2a = [torch.zeros(1) for _ in range(4)]
    dist.all_to_all(a2a, [torch.tensor([float(10 * r + j)]) for j in range(4)])
    single_out = torch.zeros(4)
    dist.all_to_all_single(single_out, torch.arange(4.0) + 10 * r)
    out["all_to_all"] = [t.item() for t in a2a], single_out.tolist()
    got = torch.zeros(1)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.tensor([float(r)]), (r + 1) % 4),
                                    dist.P2POp(dist.irecv, got, (r - 1) % 4)])  # fmt: skip
    for w in works:
        w.wait()
    out["batch_isend_irecv"] = got.item()
    if r == 0:
        dist.send(torch.tensor([5.0]), dst=1)
        dist.isend(torch.tensor([6.0]), dst=1).wait()
    elif r == 1:
        a, c = torch.zeros(1), torch.zeros(1)
        src = dist.recv(a, src=0)
        dist.irecv(c, src=0).wait()
        out["send_recv"] = a.item(), c.item(), src
    objs = [None] * 4
    dist.all_gather_object(objs, {"r": r})
    bo = [{"from": r}]
    dist.broadcast_object_list(bo, src=1)
    go = [None] * 4 if r == 0 else None
    dist.gather_object(r * 2, go, dst=0)
    so = [None]
    dist.scatter_object_list(so, list("abcd") if r == 3 else None, src=3)
    out["objects"] = objs, bo, go, so
    if r == 2:
        dist.send_object_list([("x", 1)], dst=3)
    elif r == 3:
        ro = [None]
        out["send_object_list"] = dist.recv_object_list(ro, src=2), ro
    with dist.region("compute"):
        pass
    dist.barrier()
    dist.monitored_barrier()
    dist.destroy_process_group(g)  # a subgroup, then everything
    dist.destroy_process_group()
    out["after"] = dist.is_initialized()
    return out


WALKED = {
    "is_initialized", "is_emulated", "is_available", "get_backend", "get_rank",
    "get_world_size", "new_group", "get_process_group_ranks", "get_global_rank",
    "get_group_rank", "new_subgroups", "new_subgroups_by_enumeration", "all_reduce",
    "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "all_gather_single",
    "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single",
    "all_to_all", "all_to_all_single", "batch_isend_irecv", "P2POp", "isend", "irecv", "send",
    "recv", "all_gather_object", "broadcast_object_list", "gather_object",
    "scatter_object_list", "send_object_list", "recv_object_list", "region", "barrier",
    "monitored_barrier", "destroy_process_group", "init_process_group", "launch",
    "last_trace", "torchrun_backend",
}  # fmt: skip


@pytest.mark.parametrize("with_torch_group", [False, True], ids=["labs-groups", "torch-groups"])
def test_every_function_of_the_drop_in_module(with_torch_group):
    """The drop-in module, function by function, before ``init_process_group`` (the emulator's
    own groups) and after it (torch's groups on the emulated backend): the same answers."""
    public = {n for n in dist.__all__ if callable(getattr(dist, n)) and n[0].islower()}
    assert public - {"group"} <= WALKED, f"walk these too: {sorted(public - WALKED)}"
    res = dist.launch(_walk, 4, with_torch_group)
    assert dist.torchrun_backend() == "gloo" and dist.last_trace().world_size == 4
    for r, out in enumerate(res):
        assert (out["is_initialized"], out["is_emulated"], out["is_available"]) == (True,) * 3
        assert out["get_backend"] == "gloo" and (out["get_rank"], out["get_world_size"]) == (r, 4)
        assert out["new_group"] == ((r - 1, 3) if r else (-1, -1))
        if r:
            assert (out["get_process_group_ranks"], out["get_global_rank"],
                    out["get_group_rank"]) == ([1, 2, 3], 1, 2)  # fmt: skip
        assert out["new_subgroups"] == ([0, 1] if r < 2 else [2, 3], 2)
        assert out["new_subgroups_by_enumeration"] == ([0, 2] if r % 2 == 0 else [1, 3], 2)
        assert out["all_reduce"] == [6.0, 6.0] and out["broadcast"] == [2.0, 2.0]
        assert out["reduce"] == ([10.0, 10.0] if r == 0 else None)
        assert out["all_gather"] == [0.0, 1.0, 2.0, 3.0]
        assert out["all_gather_into_tensor"] == ([0.0, 1.0, 2.0, 3.0],) * 2
        assert out["gather"] == ([0.0, 1.0, 2.0, 3.0] if r == 3 else None)
        assert out["scatter"] == 10.0 + r and out["reduce_scatter"] == (4.0 * r,) * 3
        assert out["all_to_all"] == ([10.0 * i + r for i in range(4)],) * 2
        assert out["batch_isend_irecv"] == (r - 1) % 4
        objs, bo, go, so = out["objects"]
        assert objs == [{"r": i} for i in range(4)] and bo == [{"from": 1}]
        assert go == ([0, 2, 4, 6] if r == 0 else None) and so == ["abcd"[r]]
        assert out["after"] is True  # emulated ranks stay ranks after destroy_process_group
    assert res[1]["send_recv"] == (5.0, 6.0, 0)
    assert res[3]["send_object_list"] == (2, [("x", 1)])
