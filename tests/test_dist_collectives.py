"""labs.parallel.collectives: the chapter's algorithms give the sum and send what the formulas say."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from labs import dist
from labs.parallel import collectives as C


def _prog(name, length):
    r = dist.get_rank()
    x = torch.arange(length, dtype=torch.float64) * (r + 1) + r
    getattr(C, name)(x)
    return x


def _ref(p, length):
    return sum(torch.arange(length, dtype=torch.float64) * (r + 1) + r for r in range(p))


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_ring_all_reduce_bytes_and_steps(p):
    length = 8 * p  # divisible, so every chunk has the same size
    res = dist.launch(_prog, p, "ring_all_reduce", length)
    assert all(torch.equal(x, _ref(p, length)) for x in res)
    tr = dist.last_trace()
    assert tr.bytes_sent() == [2 * (p - 1) * length * 8 // p] * p
    assert tr.message_counts() == [2 * (p - 1)] * p


@pytest.mark.parametrize("p", [1, 2, 4, 8])
@pytest.mark.parametrize("name", ["recursive_doubling_all_reduce", "rabenseifner_all_reduce"])
def test_power_of_two_algorithms(name, p):
    length = 8 * p
    res = dist.launch(_prog, p, name, length)
    assert all(torch.equal(x, _ref(p, length)) for x in res)
    tr = dist.last_trace()
    lg = int(math.log2(p))
    n = length * 8
    if name == "recursive_doubling_all_reduce":
        assert tr.bytes_sent() == [lg * n] * p
        assert tr.message_counts() == [lg] * p
    else:
        assert tr.bytes_sent() == [2 * (p - 1) * n // p] * p
        assert tr.message_counts() == [2 * lg] * p


def test_power_of_two_is_required():
    with pytest.raises(ValueError, match="power-of-two"):
        dist.launch(_prog, 3, "rabenseifner_all_reduce", 6)


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_broadcasts(p):
    def prog(src):
        x = np.full(3, float(dist.get_rank()))
        C.tree_broadcast(x, src)
        y = torch.full((3,), float(dist.get_rank()))
        C.naive_broadcast(y, src)
        return x, y

    for src in {0, p - 1}:
        res = dist.launch(prog, p, src)
        assert all((x == src).all() and (y == src).all() for x, y in res)
    sends = [c for c in dist.last_trace().op_counts(p - 1).values()]
    assert sum(sends) <= (p - 1) + max(1, math.ceil(math.log2(p)))


def test_hierarchical_and_parameter_server():
    def prog():
        r = dist.get_rank()
        local = [dist.new_group([0, 1, 2, 3]), dist.new_group([4, 5, 6, 7])][r // 4]
        cross = [dist.new_group([j, j + 4]) for j in range(4)][r % 4]
        x = torch.arange(16, dtype=torch.float64) + r
        C.hierarchical_all_reduce(x, local, cross)
        y = torch.arange(16, dtype=torch.float64) + r
        C.parameter_server_all_reduce(y)
        return x, y

    res = dist.launch(prog, 8)
    ref = sum(torch.arange(16, dtype=torch.float64) + r for r in range(8))
    assert all(torch.equal(x, ref) and torch.equal(y, ref) for x, y in res)


def test_large_all_reduce_uses_parallel_parts():
    def prog():
        x = torch.full((300_001,), float(dist.get_rank() + 1))  # > 1 MiB, odd length
        dist.all_reduce(x)
        a = np.full(300_001, 2.0, dtype=np.float32)
        dist.all_reduce(a, op=dist.ReduceOp.AVG)
        return x, a

    for x, a in dist.launch(prog, 3):
        assert torch.all(x == 6.0) and np.all(a == 2.0)


def test_large_all_reduce_with_mixed_async_ranks():
    """Rank 0 starts the large all-reduce asynchronously and waits late; the others block."""

    def prog():
        r = dist.get_rank()
        x = torch.full((400_000,), float(r))
        work = dist.all_reduce(x, async_op=(r == 0))
        if r == 0:
            time.sleep(0.05)
            work.wait()
        return float(x[0]), float(x[-1])

    assert dist.launch(prog, 3) == [(3.0, 3.0)] * 3
