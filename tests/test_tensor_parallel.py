"""Tensor parallelism: column/row splits, f and g, Megatron MLP and attention on emulated ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labs import dist
from labs.parallel import tensor_parallel as tp


def test_the_seed_example():
    w = np.array([[1, 2, 5, 6], [3, 4, 7, 8], [2, 0, 3, 1], [-1, 4, 8, 2]])
    x = np.array([[1, 2, 0, 1]])
    cols = tp.column_parallel_matmul(x, w, 2)
    assert np.concatenate(cols, axis=1).tolist() == [[6, 14, 27, 24]]
    assert cols[0].tolist() == [[6, 14]] and cols[1].tolist() == [[27, 24]]
    assert sum(tp.row_parallel_matmul(x, w, 2)).tolist() == [[6, 14, 27, 24]]


@settings(max_examples=30, deadline=None)
@given(parts=st.sampled_from([1, 2, 3, 6]), rows=st.integers(1, 5), seed=st.integers(0, 100))
def test_numpy_splits(parts, rows, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((rows, 6)), rng.standard_normal((6, 12))
    np.testing.assert_allclose(np.concatenate(tp.column_parallel_matmul(x, w, parts), 1), x @ w)
    np.testing.assert_allclose(sum(tp.row_parallel_matmul(x, w, parts)), x @ w, atol=1e-12)


def test_uneven_split_is_an_error():
    with pytest.raises(ValueError, match="does not split evenly over 4 ranks"):
        tp.column_parallel_matmul(np.ones((1, 6)), np.ones((6, 6)), 4)
    with pytest.raises(ValueError, match="divides 6"):
        tp.ColumnParallelLinear(torch.nn.Linear(3, 6), 0, 4)


def _layer(x, attn, mlp):
    h = x + attn(x)
    return h + mlp(h)


@pytest.mark.parametrize("t", [1, 2, 4])
def test_megatron_layer_matches_unsplit(t):
    torch.manual_seed(0)
    d, heads = 8, 4
    attn, mlp = tp.SelfAttention(d, heads), tp.MLP(d, 4 * d)
    x = torch.randn(2, 5, d)
    xr = x.clone().requires_grad_()
    ref = _layer(xr, attn, mlp)
    ref.square().sum().backward()

    def program(backward):
        rank = dist.get_rank()
        pa, pm = tp.ParallelSelfAttention(attn, rank, t), tp.ParallelMLP(mlp, rank, t)
        xx = x.clone().requires_grad_()
        out = _layer(xx, pa, pm)
        if not backward:
            return out.detach()
        out.square().sum().backward()
        return out.detach(), xx.grad, pa, pm

    forward = dist.launch(program, t, False)
    n_fwd = dist.last_trace().op_counts(0)["all_reduce"]
    results = dist.launch(program, t, True)
    n_all = dist.last_trace().op_counts(0)["all_reduce"]
    if t > 1:
        assert (n_fwd, n_all - n_fwd) == (2, 2)  # 2 all-reduces forward, 2 backward per layer
    for rank, (out, grad, pa, pm) in enumerate(results):
        torch.testing.assert_close(forward[rank], ref.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out, ref.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad, xr.grad, rtol=1e-5, atol=1e-5)
        k = 4 * d // t
        torch.testing.assert_close(
            pm.fc1.weight.grad, mlp.fc1.weight.grad[rank * k : (rank + 1) * k]
        )
        torch.testing.assert_close(
            pm.fc2.weight.grad, mlp.fc2.weight.grad[:, rank * k : (rank + 1) * k]
        )
        torch.testing.assert_close(pm.fc2.bias.grad, mlp.fc2.bias.grad)
        k = d // t
        torch.testing.assert_close(
            pa.q.weight.grad, attn.q.weight.grad[rank * k : (rank + 1) * k], rtol=1e-5, atol=1e-6
        )
        torch.testing.assert_close(
            pa.proj.weight.grad,
            attn.proj.weight.grad[:, rank * k : (rank + 1) * k],
            rtol=1e-5,
            atol=1e-6,
        )


def test_f_and_g_on_a_subgroup():
    """f/g with group=: two independent tensor-parallel pairs in a world of 4."""
    torch.manual_seed(1)
    mlps = [tp.MLP(4, 8), tp.MLP(4, 8)]
    x = torch.randn(3, 4)

    def program():
        rank = dist.get_rank()
        groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        pair = rank // 2
        m = tp.ParallelMLP(mlps[pair], rank % 2, 2, groups[pair])
        return m(x).detach()

    outs = dist.launch(program, 4)
    for rank, out in enumerate(outs):
        torch.testing.assert_close(out, mlps[rank // 2](x).detach(), rtol=1e-5, atol=1e-6)
