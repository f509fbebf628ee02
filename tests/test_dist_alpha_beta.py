"""The alpha-beta model: closed forms, and the replay of traces of emulated programs."""

from __future__ import annotations

import math

import pytest
import torch

from labs import dist
from labs.dist import alpha_beta as ab

LINK = ab.Link("test", alpha=1e-5, bandwidth=1e9)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_closed_forms(p):
    n, a, b = 1e6, LINK.alpha, LINK.beta
    lg = math.log2(p)
    assert ab.collective_time("all_reduce", n, p, LINK) == pytest.approx(
        2 * (p - 1) * a + 2 * (p - 1) / p * n * b
    )
    assert ab.collective_time("all_reduce", n, p, LINK, "recursive_doubling") == pytest.approx(
        lg * a + n * lg * b
    )
    assert ab.collective_time("all_reduce", n, p, LINK, "rabenseifner") == pytest.approx(
        2 * lg * a + 2 * (p - 1) / p * n * b
    )
    assert ab.collective_time("all_gather", n, p, LINK) == pytest.approx(
        (p - 1) * a + (p - 1) / p * n * b
    )
    assert ab.collective_time("all_reduce", n, 1, LINK) == 0.0
    with pytest.raises(ValueError, match="algorithm"):
        ab.collective_time("all_reduce", n, p, LINK, "bogus")


def test_bus_bandwidth_and_presets():
    assert ab.bus_bandwidth("all_reduce", 1e9, 8, 1.0) == pytest.approx(1e9 * 2 * 7 / 8)
    assert ab.bus_bandwidth("all_gather", 1e9, 8, 1.0) == pytest.approx(1e9 * 7 / 8)
    assert ab.NVLINK.bandwidth > ab.PCIE.bandwidth > ab.INFINIBAND.bandwidth
    assert all(link.source for link in ab.PRESETS.values())


def _ring_all_reduce():
    """Ring all-reduce from isend/irecv on float32 chunks (the chapter's algorithm)."""
    r, p = dist.get_rank(), dist.get_world_size()
    x = torch.arange(8 * p, dtype=torch.float32) + r
    chunks = list(x.chunk(p))
    buf = torch.empty_like(chunks[0])
    for step in range(p - 1):  # reduce-scatter
        s, rcv = (r - step) % p, (r - step - 1) % p
        w = dist.isend(chunks[s], dst=(r + 1) % p)
        dist.recv(buf, src=(r - 1) % p)
        w.wait()
        chunks[rcv] += buf
    for step in range(p - 1):  # all-gather
        s, rcv = (r + 1 - step) % p, (r - step) % p
        w = dist.isend(chunks[s], dst=(r + 1) % p)
        dist.recv(chunks[rcv], src=(r - 1) % p)
        w.wait()
    return x


@pytest.mark.parametrize("p", [2, 4, 5])
def test_replay_of_ring_matches_formula(p):
    res = dist.launch(_ring_all_reduce, p)
    expected = sum(torch.arange(8 * p, dtype=torch.float32) + r for r in range(p))
    for x in res:
        torch.testing.assert_close(x, expected)
    tr = dist.last_trace()
    n = 8 * p * 4
    assert tr.bytes_sent() == [2 * (p - 1) * n // p] * p
    pred = ab.predict(tr, LINK, compute=False)
    assert pred.total == pytest.approx(ab.collective_time("all_reduce", n, p, LINK), rel=1e-9)


def test_replay_of_collectives_and_topology():
    def prog():
        x = torch.zeros(1000)
        dist.all_reduce(x)
        g = dist.new_group([0, 1])
        if dist.get_rank() < 2:
            dist.all_reduce(x, group=g)

    dist.launch(prog, 4)
    topo = ab.two_level(2, intra=ab.NVLINK, inter=ab.INFINIBAND)
    pred = ab.predict(dist.last_trace(), topo, compute=False)
    slow = ab.collective_time("all_reduce", 4000, 4, ab.INFINIBAND)
    fast = ab.collective_time("all_reduce", 4000, 2, ab.NVLINK)
    assert pred.per_rank == pytest.approx([slow + fast, slow + fast, slow, slow])
    assert pred.total == pytest.approx(slow + fast)


def test_naive_broadcast_is_serialised_on_the_root_link():
    def prog():
        r, p = dist.get_rank(), dist.get_world_size()
        x = torch.zeros(250)
        if r == 0:
            for d in range(1, p):
                dist.send(x, dst=d)
        else:
            dist.recv(x, src=0)

    dist.launch(prog, 4)
    pred = ab.predict(dist.last_trace(), LINK)
    assert pred.total == pytest.approx(3 * LINK.time(1000))


@pytest.mark.parametrize(
    ("name", "algo"),
    [("rabenseifner_all_reduce", "rabenseifner"), ("recursive_doubling_all_reduce",
                                                   "recursive_doubling")],
)  # fmt: skip
@pytest.mark.parametrize("p", [2, 8, 16])
def test_replay_of_power_of_two_algorithms_matches_formula(name, algo, p):
    from labs.parallel import collectives

    dist.launch(lambda: getattr(collectives, name)(torch.ones(64 * p)), p)
    pred = ab.predict(dist.last_trace(), LINK, compute=False)
    n = 64 * p * 4
    assert pred.total == pytest.approx(ab.collective_time("all_reduce", n, p, LINK, algo))
