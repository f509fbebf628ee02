"""labs.core: the workshop's toy model, its gradients, and runners on emulated ranks."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from labs import core, dist


def test_workshop_snippet_runs_as_shown(capsys):
    m = core.Model(4, 2, 6)
    i, o = core.gen_inp(10, 2)
    out = m.forward(i)
    loss = out - o
    m.backward(loss)
    m.print_grads()
    assert out.shape == (10, 2)
    assert "layer 3 grad b" in capsys.readouterr().out
    assert [g["a"].shape for g in m.grads] == [(2, 6)] * 4
    assert [g["b"].shape for g in m.grads] == [(6, 2)] * 4


def test_gradients_match_autograd():
    m = core.Model(3, 4, 5, seed=3)
    x, y = core.gen_inp(7, 4, seed=4)
    out = m.forward(x)
    m.backward(out - y)
    ws = [{k: torch.tensor(v, requires_grad=True) for k, v in b.items()} for b in m.blocks]
    h = torch.tensor(x)
    for b in ws:
        h = h @ b["a"] @ b["b"]
    (0.5 * ((h - torch.tensor(y)) ** 2).sum()).backward()  # dL/dout = out - y
    for mine, ref in zip(m.grads, ws):
        for k in "ab":
            np.testing.assert_allclose(mine[k], ref[k].grad.numpy(), rtol=1e-10)


def test_compare_detects_differences(capsys):
    m = core.Model(2, 2, 3)
    i, o = core.gen_inp(4, 2)
    m.backward(m.forward(i) - o)
    other = m.copy()
    assert m.compare(other)
    other.grads[1]["a"][0, 0] += 1e-3
    assert not m.compare(other)
    assert "layer 1 grad a" in capsys.readouterr().out
    assert not m.compare(core.Model(3, 2, 3))


def test_difference_names_parameter_element_and_size():
    m = core.Model(2, 2, 3)
    i, o = core.gen_inp(4, 2)
    m.backward(m.forward(i) - o)
    assert m.difference(m.copy()) is None
    other = m.copy()
    want = m.grads[0]["b"][2, 1]
    other.grads[0]["b"][2, 1] += 0.5
    diff = m.difference(other)
    assert diff.startswith("layer 0 grad b[2, 1]: expected ")
    assert f"{want:.6g}" in diff and f"{want + 0.5:.6g}" in diff and "max abs diff 0.5" in diff
    other = m.copy()
    other.grads[1] = {}
    assert m.difference(other) == "layer 1 grad a is missing in the other model"
    assert "expected a core.Model" in m.difference("not a model")
    assert "(2, 2, 3)" in m.difference(core.Model(3, 2, 3))


def test_ddp_runner_matches_single_device():
    m = core.Model(4, 2, 6)
    i, o = core.gen_inp(10, 2)
    base = m.copy()
    m.backward(m.forward(i) - o)
    final = {}

    class DDPRunner(core.Runner):
        def run(self):
            local = copy.deepcopy(base)
            shard = slice(self.rank * 5, (self.rank + 1) * 5)
            local.backward(local.forward(i[shard]) - o[shard])
            for g in local.grads:
                for k in g:
                    dist.all_reduce(g[k])
            if self.rank == 0:
                final["m"] = local
            return self.rank

    assert core.run_world(2, DDPRunner) == [0, 1]
    assert m.compare(final["m"])


def test_runner_errors():
    with pytest.raises(NotImplementedError, match="run"):
        core.run_world(2, core.Runner)
    with pytest.raises(TypeError, match="Runner"):
        core.run_world(2, object)
    with pytest.raises(ValueError, match="input of shape"):
        core.Model(1, 3, 2).forward(np.zeros((2, 2)))
