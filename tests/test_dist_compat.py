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
    fresh = dist.launch(lambda: torch.randint(0, 1000, (2,)).tolist(), 2, per_rank_rng=True)
    assert fresh[0] == fresh[1]  # unseeded ranks start alike, as new processes do
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
