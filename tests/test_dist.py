"""labs.dist on emulated ranks: every collective against a numpy reference, and the faults."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs import dist

DTYPES = ["float32", "float64", "int32", "int64"]
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG"]
SETTINGS = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def _data(rank: int, shape: tuple[int, ...], dtype: str, salt: int = 0) -> np.ndarray:
    """Small integer values, so that every reduction order gives exactly the same floats."""
    rng = np.random.default_rng(1000 * salt + rank)
    return rng.integers(-3, 4, size=shape).astype(dtype)


def _reduce_ref(arrays: list[np.ndarray], op: str) -> np.ndarray:
    stack = np.stack(arrays)
    if op == "SUM":
        return stack.sum(0).astype(arrays[0].dtype)
    if op == "PRODUCT":
        return stack.prod(0).astype(arrays[0].dtype)
    if op == "MIN":
        return stack.min(0)
    if op == "MAX":
        return stack.max(0)
    return (stack.sum(0) / len(arrays)).astype(arrays[0].dtype)


def _wrap(x: np.ndarray, kind: str):
    return torch.from_numpy(x.copy()) if kind == "torch" else x.copy()


def _np(x) -> np.ndarray:
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


cases = st.fixed_dictionaries(
    {
        "n": st.integers(1, 8),
        "shape": st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
        "dtype": st.sampled_from(DTYPES),
        "op": st.sampled_from(OPS),
        "kind": st.sampled_from(["torch", "numpy"]),
        "members": st.lists(st.booleans(), min_size=8, max_size=8),
        "root": st.integers(0, 7),
    }
)


def _group_of(c) -> list[int]:
    ranks = [r for r in range(c["n"]) if c["members"][r]]
    return ranks or [0]


@SETTINGS
@given(cases)
def test_reductions_match_numpy(c):
    """all_reduce, reduce, reduce_scatter(_tensor) on a random sub-group, every op and dtype."""
    n, shape, dtype, op, kind = c["n"], c["shape"], c["dtype"], c["op"], c["kind"]
    if op == "AVG" and not dtype.startswith("float"):
        op = "SUM"
    ranks = _group_of(c)
    p = len(ranks)
    root = ranks[c["root"] % p]
    rop = getattr(dist.ReduceOp, op)

    def prog():
        r = dist.get_rank()
        g = dist.new_group(ranks)
        if r not in ranks:
            return None
        i = ranks.index(r)
        x = _wrap(_data(i, shape, dtype), kind)
        dist.all_reduce(x, op=rop, group=g)
        y = _wrap(_data(i, shape, dtype, 1), kind)
        dist.reduce(y, dst=root, op=rop, group=g)
        out = _wrap(np.zeros(shape, dtype), kind)
        dist.reduce_scatter(out, [_wrap(_data(i, shape, dtype, 2 + j), kind) for j in range(p)],
                            op=rop, group=g)  # fmt: skip
        flat_out = _wrap(np.zeros(int(np.prod(shape)), dtype), kind)  # gloo: 1-d in, 1-d out
        big = np.concatenate([_data(i, shape, dtype, 20 + j).reshape(-1) for j in range(p)])
        dist.reduce_scatter_tensor(flat_out, _wrap(big, kind), op=rop, group=g)
        return _np(x), _np(y), _np(out), _np(flat_out)

    res = dist.launch(prog, n)
    for r in range(n):
        if r not in ranks:
            assert res[r] is None
            continue
        i = ranks.index(r)
        x, y, out, flat_out = res[r]
        np.testing.assert_array_equal(
            x, _reduce_ref([_data(k, shape, dtype) for k in range(p)], op)
        )
        if r == root:  # (the others hold gloo's partial sums: p12_reduction_order.py checks them)
            ref = _reduce_ref([_data(k, shape, dtype, 1) for k in range(p)], op)
            np.testing.assert_array_equal(y, ref)
        ref = _reduce_ref([_data(k, shape, dtype, 2 + i) for k in range(p)], op)
        np.testing.assert_array_equal(out, ref)
        ref = _reduce_ref([_data(k, shape, dtype, 20 + i) for k in range(p)], op)
        np.testing.assert_array_equal(flat_out.reshape(-1), ref.reshape(-1))


@SETTINGS
@given(cases)
def test_data_movement_matches_numpy(c):
    """broadcast, all_gather(_into_tensor), gather, scatter, all_to_all, send/recv."""
    n, shape, dtype, kind = c["n"], c["shape"], c["dtype"], c["kind"]
    ranks = _group_of(c)
    p = len(ranks)
    root = ranks[c["root"] % p]

    def prog():
        r = dist.get_rank()
        g = dist.new_group(ranks)
        if r not in ranks:
            return None
        i = ranks.index(r)
        b = _wrap(_data(i, shape, dtype), kind)
        dist.broadcast(b, src=root, group=g)
        lst = [_wrap(np.zeros(shape, dtype), kind) for _ in range(p)]
        dist.all_gather(lst, _wrap(_data(i, shape, dtype, 1), kind), group=g)
        flat = _wrap(np.zeros(p * int(np.prod(shape)), dtype), kind)
        mine = _data(i, shape, dtype, 2).reshape(-1)  # gloo: concatenated along dim 0
        dist.all_gather_into_tensor(flat, _wrap(mine, kind), group=g)
        gl = [_wrap(np.zeros(shape, dtype), kind) for _ in range(p)] if r == root else None
        dist.gather(_wrap(_data(i, shape, dtype, 3), kind), gl, dst=root, group=g)
        sl = [_wrap(_data(j, shape, dtype, 4), kind) for j in range(p)] if r == root else None
        sc = _wrap(np.zeros(shape, dtype), kind)
        dist.scatter(sc, sl, src=root, group=g)
        outs = [_wrap(np.zeros(shape, dtype), kind) for _ in range(p)]
        ins = [_wrap(_data(10 * i + j, shape, dtype, 5), kind) for j in range(p)]
        dist.all_to_all(outs, ins, group=g)
        ring = _wrap(np.zeros(shape, dtype), kind)
        if p > 1:
            dist.send(_wrap(_data(i, shape, dtype, 6), kind), dst=ranks[(i + 1) % p], group=g)
            dist.recv(ring, src=ranks[(i - 1) % p], group=g)
        return (_np(b), [_np(t) for t in lst], _np(flat), gl and [_np(t) for t in gl], _np(sc),
                [_np(t) for t in outs], _np(ring))  # fmt: skip

    res = dist.launch(prog, n)
    for r in ranks:
        i = ranks.index(r)
        b, lst, flat, gl, sc, outs, ring = res[r]
        np.testing.assert_array_equal(b, _data(ranks.index(root), shape, dtype))
        for k in range(p):
            np.testing.assert_array_equal(lst[k], _data(k, shape, dtype, 1))
            np.testing.assert_array_equal(outs[k], _data(10 * k + i, shape, dtype, 5))
        ref = np.concatenate([_data(k, shape, dtype, 2).reshape(-1) for k in range(p)])
        np.testing.assert_array_equal(flat, ref)
        if r == root:
            for k in range(p):
                np.testing.assert_array_equal(gl[k], _data(k, shape, dtype, 3))
        np.testing.assert_array_equal(sc, _data(i, shape, dtype, 4))
        if p > 1:
            np.testing.assert_array_equal(ring, _data((i - 1) % p, shape, dtype, 6))


def test_launch_returns_values_and_passes_arguments():
    def prog(a, b=0):
        return (dist.get_rank(), dist.get_world_size(), a, b)

    assert dist.launch(prog, 3, "x", b=5, timeout=10) == [(r, 3, "x", 5) for r in range(3)]


def test_async_ops_and_message_order():
    def prog():
        r = dist.get_rank()
        bufs = [torch.zeros(1) for _ in range(3)]
        if r == 0:
            for k in range(3):
                dist.isend(torch.tensor([float(k)]), dst=1, tag=7).wait()
        else:
            works = [dist.irecv(b, src=0, tag=7) for b in bufs]
            for w in reversed(works):  # waiting out of order still matches posting order
                w.wait()
        x = torch.ones(2)
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        return [b.item() for b in bufs], x.tolist()

    res = dist.launch(prog, 2)
    assert res[1] == ([0.0, 1.0, 2.0], [2.0, 2.0])


def test_recv_any_source_returns_sender():
    def prog():
        r = dist.get_rank()
        if r == 0:
            got = sorted(dist.recv(torch.zeros(1)) for _ in range(2))
            return got
        dist.send(torch.tensor([float(r)]), dst=0)
        return None

    assert dist.launch(prog, 3)[0] == [1, 2]


def test_trace_counts_bytes_and_messages():
    def prog():
        r, n = dist.get_rank(), dist.get_world_size()
        x = torch.zeros(10, dtype=torch.float32)
        dist.send(x, dst=(r + 1) % n)
        dist.recv(x, src=(r - 1) % n)
        with dist.region("compute"):
            time.sleep(0.001)
        dist.all_reduce(x)

    dist.launch(prog, 4)
    tr = dist.last_trace()
    assert tr.message_counts() == [1, 1, 1, 1]
    assert tr.bytes_sent(kind="p2p") == [40] * 4
    assert tr.bytes_received(kind="p2p") == [40] * 4
    assert tr.bytes_sent(kind="collective") == [2 * 3 * 40 // 4] * 4
    ops = [op for op, _, _ in tr.timeline(2)]
    assert ops == ["send", "recv", "compute", "all_reduce"]
    starts = [t0 for _, t0, _ in tr.timeline(2)]
    assert starts == sorted(starts)
    assert all(r.t_end >= r.t_start for r in tr[2])
    sends = {rec.msg_id: rec for rs in tr.select(op="send") for rec in rs}
    for rs in tr.select(op="recv"):
        (rec,) = rs
        assert sends[rec.msg_id].rank == rec.peers[0]


# -- faults ---------------------------------------------------------------------------------
def _raises(exc, fn, n, match=(), timeout=10.0, **kw):
    t0 = time.perf_counter()
    with pytest.raises(exc) as info:
        dist.launch(fn, n, timeout=timeout, **kw)
    elapsed = time.perf_counter() - t0
    for text in match:
        assert text in str(info.value), (text, str(info.value))
    return info.value, elapsed


def test_deadlock_is_reported_at_once_naming_each_rank():
    def prog():
        r = dist.get_rank()
        dist.recv(torch.zeros(1), src=1 - r)

    err, elapsed = _raises(dist.DeadlockError, prog, 2, ["rank 0", "rank 1", "recv(src=1"])
    assert elapsed < 5.0


def test_recv_without_send_and_early_return_are_deadlocks():
    def no_send():
        if dist.get_rank() == 1:
            dist.recv(torch.zeros(1), src=0)

    _raises(dist.DeadlockError, no_send, 2, ["rank 0: finished", "rank 1: waiting"])

    def early_return():
        if dist.get_rank() != 2:
            dist.barrier()

    _raises(dist.DeadlockError, early_return, 3, ["barrier", "missing ranks [2]"])


@pytest.mark.parametrize(
    "variant", ["op", "shape", "dtype", "root", "reduce_op"], ids=lambda v: f"different-{v}"
)
def test_mismatched_collectives_raise(variant):
    def prog():
        r = dist.get_rank()
        x = torch.zeros(3)
        if r == 1 and variant == "op":
            dist.broadcast(x, src=0)
        elif r == 1 and variant == "shape":
            dist.all_reduce(torch.zeros(4))
        elif r == 1 and variant == "dtype":
            dist.all_reduce(torch.zeros(3, dtype=torch.float64))
        elif variant == "root":
            dist.broadcast(x, src=r)
        elif r == 1 and variant == "reduce_op":
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
        else:
            dist.all_reduce(x)

    err, _ = _raises(dist.CollectiveMismatchError, prog, 2, ["rank 0", "rank 1"])
    assert isinstance(err, ValueError)


def test_exception_in_a_rank_stops_all_and_keeps_type_and_traceback():
    def prog():
        if dist.get_rank() == 2:
            raise KeyError("boom")
        dist.barrier()  # the others would wait forever

    err, elapsed = _raises(KeyError, prog, 4, ["rank 2 failed"])
    assert isinstance(err.__cause__, KeyError)
    assert err.__cause__.__traceback__ is not None
    assert elapsed < 5.0


@pytest.mark.parametrize(
    "case",
    ["dst-range", "src-range", "self-send", "list-length", "view-with-gaps", "list-shape",
     "recv-size", "scatter-list", "gather-output", "scatter-list-non-src",
     "gather-list-non-dst"],
)  # fmt: skip
def test_bad_arguments_raise_value_error_naming_rank_and_op(case):
    def prog():
        r = dist.get_rank()
        x = torch.zeros(4)
        if case == "dst-range" and r == 0:
            dist.send(x, dst=3)
        elif case == "src-range" and r == 0:
            dist.recv(x, src=-1)
        elif case == "self-send" and r == 0:
            dist.send(x, dst=0)
        elif case == "list-length":
            dist.all_gather([torch.zeros(4)], x)
        elif case == "view-with-gaps":
            dist.all_reduce(torch.zeros(4, 8)[:, ::2])  # a view with gaps (gloo: garbage)
        elif case == "list-shape":
            dist.all_gather([torch.zeros(4), torch.zeros(5)], x)
        elif case == "recv-size":
            if r == 0:
                dist.send(torch.zeros(3), dst=1)
            else:
                dist.recv(x, src=0)
        elif case == "scatter-list":
            dist.scatter(x, [torch.zeros(4)] * 3 if r == 0 else None, src=0)
        elif case == "gather-output":
            dist.all_gather_into_tensor(torch.zeros(7), x)
        elif case == "scatter-list-non-src":  # torch: "must NOT be specified on non-source ranks"
            dist.scatter(x, [torch.zeros(4)] * 2, src=0)
        elif case == "gather-list-non-dst":
            dist.gather(x, [torch.zeros(4)] * 2, dst=1)
        dist.barrier()

    err, _ = _raises(ValueError, prog, 2, ["rank "])
    text = str(err)
    assert "failed" in text
    assert any(
        op in text
        for op in (
            "send",
            "recv",
            "all_gather",
            "all_reduce",
            "scatter",
            "gather",
            "all_gather_into_tensor",
        )
    )


def test_numpy_views_and_wrong_types():
    def prog():
        a = np.zeros((4, 4))
        dist.all_reduce(a[:, 0])

    _raises(ValueError, prog, 2, ["C-contiguous", "all_reduce"])

    def prog2():
        dist.all_reduce([1.0, 2.0])

    _raises(TypeError, prog2, 2, ["torch.Tensor or a numpy.ndarray"])


def test_avg_needs_floats_and_new_group_must_match():
    def prog():
        dist.all_reduce(torch.zeros(2, dtype=torch.int64), op=dist.ReduceOp.AVG)

    _raises(ValueError, prog, 2, ["AVG"])

    def prog2():
        dist.new_group([0, 1] if dist.get_rank() == 0 else [1, 2])

    _raises(dist.CollectiveMismatchError, prog2, 3, ["new_group"])


def test_timeout_names_running_ranks_and_threads_do_not_survive():
    before = threading.active_count()

    def prog():
        if dist.get_rank() == 0:
            while True:  # stuck in its own Python code
                pass
        dist.barrier()

    err, elapsed = _raises(dist.DistTimeoutError, prog, 2, ["rank 0: running", "rank 1: waiting"],
                           timeout=0.5)  # fmt: skip
    assert elapsed < 5.0
    assert threading.active_count() == before
    assert dist.launch(lambda: dist.get_rank(), 3) == [0, 1, 2]  # the next launch is unaffected
    assert threading.active_count() == before


def test_launch_arguments_are_checked():
    with pytest.raises(ValueError, match="world_size"):
        dist.launch(lambda: None, 0)
    with pytest.raises(RuntimeError, match="outside dist.launch"):
        dist.all_reduce(torch.zeros(1))

    def nested():
        dist.launch(lambda: None, 2)

    _raises(RuntimeError, nested, 2, ["cannot nest"])


def test_bfloat16_and_tensors_that_require_grad():
    """bfloat16 takes the torch path (numpy has no bfloat16); autograd leaves work in place."""

    def prog():
        r = dist.get_rank()
        small = torch.full((5,), float(r + 1), dtype=torch.bfloat16)
        dist.all_reduce(small, op=dist.ReduceOp.MAX)
        big = torch.ones(70_000, dtype=torch.bfloat16)  # several 256 KiB chunks
        dist.all_reduce(big)
        leaf = torch.ones(3, requires_grad=True)
        dist.all_reduce(leaf)
        return small.float(), big.float(), leaf.detach()

    for small, big, leaf in dist.launch(prog, 3):
        assert torch.all(small == 3.0) and torch.all(big == 3.0) and torch.all(leaf == 3.0)


def test_one_buffer_shared_by_every_rank_counts_once_per_rank():
    """Threads share memory: a tensor captured by every rank is p contributions, as p processes
    holding a copy each would give (small, chunked and split paths alike; the chunked ones must
    not accumulate in place in a buffer that is also an input)."""
    for n in (4, 5_000, 100_000, 300_000, 1_000_000):
        x = torch.ones(n)
        dist.launch(lambda x=x: dist.all_reduce(x), 4)
        assert torch.all(x == 4.0), n


def test_scalar_tensors_reduce():
    def prog():
        x = torch.tensor(float(dist.get_rank() + 1))
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        return x

    assert [float(x) for x in dist.launch(prog, 3)] == [2.0] * 3


@pytest.mark.parametrize("sleeper", ["waker", "first woken"])
def test_ranks_released_together_do_not_wait_for_each_others_own_code(sleeper):
    """When a collective completes, every waiting rank proceeds, whatever the rank that completed
    it (or another released rank) does next in its own code."""
    p = 6
    after = {}

    def prog():
        r = dist.get_rank()
        if r == 0:
            time.sleep(0.1)  # arrive last: ranks 1..5 wait, then are released together
        dist.barrier()
        after[r] = time.perf_counter()
        if (sleeper == "waker" and r == 0) or (sleeper == "first woken" and r == 1):
            time.sleep(0.6)  # own code, no labs.dist call: nobody else may be held up by it
        return r

    assert dist.launch(prog, p) == list(range(p))
    late = max(after.values()) - min(after.values())
    assert late < 0.3, f"ranks left the barrier {late:.3f} s apart"


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and at least two CPUs",
)
def test_ranks_sleep_pinned_where_it_pays(monkeypatch):
    """labs.dist._sched: a rank waiting in an all-reduce of >= 1 MiB whose parts are short
    (<= PIN_PART_BYTES) sleeps on one CPU, and so does a rank that hands its turn to the next
    (ranks taking turns, the default); one waiting to reduce long parts does not, nor, with
    ranks side by side (``per_rank_rng=False``), one in a small all-reduce (unless
    World.pin_all); its own code (and the torch thread pools it starts) keeps every CPU; rank
    threads are SCHED_BATCH; LABS_DIST_PIN=0 turns pinning and SCHED_BATCH off."""
    from labs.dist._emulator import World

    everywhere = os.sched_getaffinity(0)
    home = [{min(everywhere)}] * 2
    sizes = {"small": 2, "short parts": 1 << 18, "long parts": 1 << 21}  # 8 B, 1 MiB, 8 MiB
    seen, tids, asleep, expect = [], {}, {k: [] for k in sizes}, {}

    def prog():
        r = dist.get_rank()
        tids[r] = threading.get_native_id()
        dist.barrier()
        for size, n in sizes.items():
            for _ in range(3):
                if r == 0:
                    time.sleep(0.02)  # the others are asleep in the all_reduce meanwhile
                    # ... or, on a loaded machine, on their way there: give them up to 2 s
                    deadline = time.monotonic() + 2.0
                    while True:
                        masks = [os.sched_getaffinity(tids[k]) for k in (1, 2)]
                        if masks == expect[size] or time.monotonic() > deadline:
                            break
                        time.sleep(0.005)
                    asleep[size].append(masks)
                dist.all_reduce(torch.zeros(n))
                seen.append(os.sched_getaffinity(0))
        return os.sched_getscheduler(0)

    def run(per_rank_rng=True, **expected):
        seen.clear()
        for v in asleep.values():
            v.clear()
        expect.clear()
        expect.update({k.replace("_", " "): v for k, v in expected.items()})
        return dist.launch(prog, 3, per_rank_rng=per_rank_rng)

    # ranks taking turns (per-rank random state, the default) hand the turn over on one CPU
    everywhere2 = [everywhere] * 2
    assert run(small=home, short_parts=home, long_parts=everywhere2) == [os.SCHED_BATCH] * 3
    assert all(masks == home for masks in asleep["small"]), asleep
    assert all(masks == home for masks in asleep["short parts"]), asleep
    assert all(masks == [everywhere] * 2 for masks in asleep["long parts"]), asleep
    assert all(mask == everywhere for mask in seen)
    assert os.sched_getaffinity(0) == everywhere  # the caller is untouched

    side_by_side = run(False, small=everywhere2, short_parts=home, long_parts=everywhere2)
    assert side_by_side == [os.SCHED_BATCH] * 3  # ranks side by side
    assert all(masks == [everywhere] * 2 for masks in asleep["small"]), asleep
    assert all(masks == home for masks in asleep["short parts"]), asleep
    assert all(masks == [everywhere] * 2 for masks in asleep["long parts"]), asleep
    assert all(mask == everywhere for mask in seen)

    monkeypatch.setattr(World, "pin_all", True)
    run(small=home, short_parts=home, long_parts=home)
    assert all(masks == home for v in asleep.values() for masks in v), asleep
    assert all(mask == everywhere for mask in seen)

    monkeypatch.setenv("LABS_DIST_PIN", "0")
    assert (
        run(small=everywhere2, short_parts=everywhere2, long_parts=everywhere2)
        == [os.SCHED_OTHER] * 3
    )
    assert all(masks == [everywhere] * 2 for v in asleep.values() for masks in v), asleep


def test_async_small_all_reduce_reads_the_buffer_when_the_collective_completes():
    """An async all_reduce reads its caller's buffer when the last member arrives (as a real
    backend would, once the operation runs): a caller that swaps the buffer's storage meanwhile
    gets the new storage reduced, never a view of freed memory."""

    def prog():
        r = dist.get_rank()
        x = torch.full((4,), float(r))
        if r == 0:
            work = dist.all_reduce(x, async_op=True)
            x.set_(torch.full((4,), 100.0))  # the old storage is freed here
            dist.send(torch.zeros(1), dst=1)  # only now may rank 1 arrive (and complete it)
            work.wait()
        else:
            if r == 1:
                dist.recv(torch.zeros(1), src=0)
            dist.all_reduce(x)
        return x.tolist()

    assert dist.launch(prog, 3) == [[103.0] * 4] * 3


@pytest.mark.parametrize("swap", ["data", "set_", "resize_", "new_tensor"])
def test_small_all_reduce_follows_the_tensor_when_its_storage_changes(swap):
    """Small all-reduces memoize each rank's numpy view of its tensor
    (labs.dist._reduce.small_view); a tensor that keeps its identity but changes storage, shape
    or dtype must not be served a stale view."""

    def prog():
        r = dist.get_rank()
        x = torch.full((4,), float(r))
        dist.all_reduce(x)  # memoizes x's view
        if swap == "data":
            x.data = torch.full((4,), 10.0 * (r + 1), dtype=torch.float64)
        elif swap == "set_":
            x.set_(torch.full((4,), 10.0 * (r + 1)))
        elif swap == "resize_":
            x.resize_(6).fill_(10.0 * (r + 1))
        else:
            x = torch.full((4,), 10.0 * (r + 1))
        dist.all_reduce(x)
        return x.clone()

    out = dist.launch(prog, 3)
    n = 6 if swap == "resize_" else 4
    for x in out:
        assert torch.equal(x, torch.full((n,), 60.0, dtype=x.dtype))
    assert out[0].dtype == (torch.float64 if swap == "data" else torch.float32)


@pytest.mark.parametrize("route", ["fast", "public"])
def test_numpy_views_share_memory_and_leave_storage_resizable(route, monkeypatch):
    """labs.dist._reduce.numpy_view: a writable zero-copy view (DLPack, through torch's C
    exporter or, where that is missing, ``numpy.from_dlpack(t)``); None for what numpy cannot
    view faithfully; unlike ``t.numpy()``, the tensor's storage stays resizable."""
    from labs.dist import _reduce

    if route == "public":
        monkeypatch.setattr(_reduce, "_EXPORT", lambda t: t)
    x = torch.arange(6.0)[2:5]
    v = _reduce.numpy_view(x)
    if not np.from_dlpack(torch.zeros(1)).flags.writeable:  # older numpy: read-only DLPack
        assert v is None  # so the collectives reduce with torch ops
        assert dist.launch(lambda: _allreduce_ones(3), 3) == [[3.0] * 3] * 3
        return
    v += 10
    assert torch.equal(x, torch.tensor([12.0, 13.0, 14.0]))
    for bad in (
        torch.zeros(2, dtype=torch.complex64).conj(),
        torch.zeros(2, requires_grad=True),
        torch.zeros(2, dtype=torch.bfloat16),
    ):
        assert _reduce.numpy_view(bad) is None
    y = torch.zeros(4)
    assert _reduce.numpy_view(y) is not None
    y.resize_(100)  # t.numpy() would have made this raise

    assert dist.launch(lambda: _allreduce_ones(3), 3) == [[3.0] * 3] * 3  # works on this route too


def _allreduce_ones(n: int) -> list[float]:
    z = torch.ones(n)
    dist.all_reduce(z)
    return z.tolist()


@pytest.mark.parametrize("n", [4, 8_000, 100_000])
def test_overflow_saturates_to_inf_without_warnings(n):
    """float16 sums that overflow give inf, as in torch, and numpy's overflow warning is kept
    quiet on every path (small memoized views, whole buffers, chunks)."""
    import warnings

    def prog():
        x = torch.full((n,), 60000.0, dtype=torch.float16)
        dist.all_reduce(x)
        return bool(torch.isinf(x).all())

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dist.launch(prog, 2) == [True, True]
