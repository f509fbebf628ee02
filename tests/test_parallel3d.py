"""3D parallelism: the rank grid, its process groups, one training step, placement estimates."""

from __future__ import annotations

import itertools

import pytest
import torch

from labs import dist
from labs.parallel import parallel3d as p3

MODEL = dict(layers=96, hidden=12288, seq=2048, micro_batch=1, micro_batches=16)


@pytest.mark.parametrize("order", ["-".join(o) for o in itertools.permutations(("dp", "tp", "pp"))])
@pytest.mark.parametrize("dims", [(2, 2, 2), (1, 4, 2), (3, 2, 1), (2, 1, 4)])
def test_grid_round_trip_and_groups(order, dims):
    layout = p3.Layout(*dims, order=order)
    n = layout.world_size
    assert sorted(layout.rank(*layout.coords(r)) for r in range(n)) == list(range(n))
    for kind, size in zip(("dp", "tp", "pp"), dims):
        groups = layout.groups(kind)
        assert sorted(r for g in groups for r in g) == list(range(n))  # a partition
        assert all(len(g) == size for g in groups)
        index = ("dp", "tp", "pp").index(kind)
        for g in groups:  # members differ only in that coordinate
            coords = [layout.coords(r) for r in g]
            assert len({c[:index] + c[index + 1 :] for c in coords}) == 1


def test_megatron_order():
    layout = p3.Layout(2, 2, 2)
    assert layout.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert layout.groups("dp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert layout.groups("pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_bad_input():
    with pytest.raises(ValueError, match="tp index 2 is outside 0..1"):
        p3.Layout(2, 2, 2).rank(0, 2, 0)
    with pytest.raises(ValueError, match="order must name"):
        p3.Layout(2, 2, 2, "dp-dp-pp").coords(0)
    with pytest.raises(ValueError, match="pp=2 but 1 stages"):
        p3.train_step(
            p3.Layout(1, 1, 2), p3.make_stages(1, 1, 4), torch.zeros(2, 4), torch.zeros(2, 4)
        )


@pytest.mark.parametrize("dims", [(2, 2, 2), (1, 2, 2), (2, 1, 2), (2, 2, 1), (1, 1, 1)])
def test_3d_step_matches_single_device(dims):
    layout = p3.Layout(*dims)
    stages = p3.make_stages(layout.pp, 2, 8, seed=1)
    torch.manual_seed(2)
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    grads = p3.train_step(layout, stages, x, y, micro_batches=2)
    ref = p3.reference_step(stages, x, y)
    for rank, g in enumerate(grads):
        stage = layout.coords(rank)[2]
        assert set(g) == set(ref[stage])
        for name, value in g.items():
            torch.testing.assert_close(
                value, p3.shard_of(layout, rank, name, ref[stage][name]), rtol=1e-5, atol=1e-5
            )
    trace = dist.last_trace()
    if layout.pp > 1:
        assert trace.message_counts()[0] == 2  # two activations forward from the first stage


def test_placement_estimate():
    good = p3.step_communication(p3.Layout(4, 8, 4, "tp-dp-pp"), 8, **MODEL)
    bad = p3.step_communication(p3.Layout(4, 8, 4, "pp-dp-tp"), 8, **MODEL)
    assert good["tp"]["link"].startswith("NVLink") and bad["tp"]["link"].startswith("InfiniBand")
    assert good["tp"]["calls"] == 4 * 24 * 16
    assert bad["tp"]["seconds"] > 5 * good["tp"]["seconds"]
    assert good["dp"]["bytes"] == 12 * 12288**2 * 96 // 32 * 2
    single = p3.step_communication(p3.Layout(1, 1, 1), 8, **MODEL)
    assert all(c["seconds"] == 0 for c in single.values())


def test_step_communication_links_follow_the_groups():
    """step_communication works out which groups span nodes without Layout.groups (lab 17's
    sealed copy withholds it): a kind's link is the inter-node one exactly when one of its groups,
    as Layout.groups lists them, has ranks on two nodes."""
    model = dict(layers=8, hidden=64, seq=16, micro_batch=1, micro_batches=2)
    for dp, tp, pp in itertools.product((1, 2, 3, 4), (1, 2, 3, 8), (1, 2, 5)):
        for order in itertools.permutations(("dp", "tp", "pp")):
            layout = p3.Layout(dp, tp, pp, "-".join(order))
            for per_node in (1, 2, 3, 4, 8, 16):
                comm = p3.step_communication(layout, per_node, **model)
                for kind in ("dp", "tp", "pp"):
                    spans = any(len({r // per_node for r in g}) > 1 for g in layout.groups(kind))
                    want = p3.alpha_beta.INFINIBAND if spans else p3.alpha_beta.NVLINK
                    assert comm[kind]["link"] == want.name, (dp, tp, pp, order, per_node, kind)
