"""Mixture of experts: gating, capacity, auxiliary loss, expert parallelism; the device mesh."""

import pytest
import torch

from labs import dist
from labs.parallel import moe
from labs.parallel.mesh import Mesh


def test_gating_capacity_and_plan():
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.0, 5.0]])
    probs, experts, gates = moe.top_k_gating(logits, 2)
    assert experts.tolist() == [[0, 1], [2, 0]]
    torch.testing.assert_close(gates.sum(-1), torch.ones(2))
    _, _, g1 = moe.top_k_gating(logits, 1)
    torch.testing.assert_close(g1[:, 0], probs.max(-1).values)
    with pytest.raises(ValueError, match="k must be"):
        moe.top_k_gating(logits, 4)
    assert moe.expert_capacity(10, 4, 2, 1.25) == 7
    ex = torch.tensor([[0, 1], [1, 0]])
    keep, slot, wanted = moe.dispatch_plan(ex, 2, 1)
    assert keep.tolist() == [[True, False], [True, False]]  # first choices first
    assert wanted.tolist() == [2, 2] and slot.tolist() == [[0, 1], [0, 1]]


def test_load_balancing_loss_range():
    n = 4
    even = moe.load_balancing_loss(torch.full((8, n), 0.25), torch.arange(8).remainder(n)[:, None])
    one = moe.load_balancing_loss(torch.eye(n)[[0] * 8], torch.zeros(8, 1, dtype=torch.long))
    assert even.item() == pytest.approx(0.01) and one.item() == pytest.approx(0.01 * n)


@pytest.mark.parametrize("p, k", [(4, 2), (2, 1)])
def test_expert_parallel_equals_single_device(p, k):
    torch.manual_seed(1)
    full = moe.MoE(6, 12, 8, k=k, capacity_factor=1.0, seed=3).double()
    xs = [torch.randn(9 + 2 * r, 6, dtype=torch.float64) for r in range(p)]
    total = 0
    drops = []
    for x in xs:
        y, st = full(x)
        total = total + (y**2).sum()
        drops.append(st["dropped"])
    total.backward()

    def program():
        r = dist.get_rank()
        layer = moe.ExpertParallelMoE(full, r, p)
        y, st = layer(xs[r])
        (y**2).sum().backward()
        g = layer.router.weight.grad.clone()
        dist.all_reduce(g)
        return y.detach(), g, [e.fc2.weight.grad for e in layer.experts], st["dropped"]

    res = dist.launch(program, p)
    for (y, *_), x in zip(res, xs):
        torch.testing.assert_close(y, full(x)[0].detach())
    torch.testing.assert_close(res[0][1], full.router.weight.grad)
    mine = [g for r in res for g in r[2]]
    for g, e in zip(mine, full.experts):  # an expert no token reached: None there, zeros here
        want = e.fc2.weight.grad
        torch.testing.assert_close(g, torch.zeros_like(g) if want is None else want)
    assert [r[3] for r in res] == drops and sum(drops) > 0
    # counts, dispatch, combine; backward: combine only (these tokens need no gradient)
    assert dist.last_trace().op_counts(0)["all_to_all_single"] == 4
    with pytest.raises(ValueError, match="do not split"):
        moe.ExpertParallelMoE(full, 0, 3)


def test_aux_loss_spreads_the_load():
    off, on = moe.train_load(0.0), moe.train_load(0.1)
    assert off.shape == (60, 4)
    assert off[-1, 0] == off[-1].max() and off[-1, 1:].sum() < off[-1, 0]
    assert on[-1].max() < off[-1].max() and (on[-1] > 0).all()


def test_mesh_groups_tile_the_world():
    mesh = Mesh({"tp": 2, "cp": 2, "pp": 2, "dp": 2})
    assert mesh.coords(5) == {"tp": 1, "cp": 0, "pp": 1, "dp": 0}
    assert mesh.groups("cp")[:2] == [[0, 2], [1, 3]]
    assert mesh.groups(["dp", "cp"])[0] == [0, 2, 8, 10]
    for kind in ("tp", "cp", "pp", "dp"):
        assert sorted(r for g in mesh.groups(kind) for r in g) == list(range(16))
    with pytest.raises(ValueError, match="unknown"):
        mesh.groups("ep")

    def program():
        g = mesh.new_groups(["tp", ["dp", "cp"]])
        x = torch.ones(1)
        dist.all_reduce(x, group=g["tp"])
        dist.all_reduce(x, group=g["dp+cp"])
        return x.item()

    assert dist.launch(program, 16) == [8.0] * 16
