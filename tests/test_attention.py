"""Tests of labs.attention.flash: exactness, gradients, causal skipping, memory kept for backward."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import labs.attention.flash as att
from labs.attention.flash import flash_attention, naive_attention, online_softmax


def _reference(q, k, v, causal):
    """Float64 attention from first principles (independent of labs.attention.flash)."""
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        hidden = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).triu(1)
        s = s.masked_fill(hidden, float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def _rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 2),
    heads=st.integers(1, 3),
    n_q=st.integers(1, 70),
    n_k=st.integers(1, 70),
    head_dim=st.sampled_from([16, 32, 64, 128]),
    block_q=st.integers(3, 40),
    block_k=st.integers(3, 40),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_flash_matches_float64_reference(
    batch, heads, n_q, n_k, head_dim, block_q, block_k, causal, seed
):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, n_q, head_dim, generator=g)
    k = torch.randn(batch, heads, n_k, head_dim, generator=g)
    v = torch.randn(batch, heads, n_k, head_dim, generator=g)
    ref, ref_lse = _reference(q, k, v, causal)
    o, lse = flash_attention(
        q, k, v, causal=causal, block_q=block_q, block_k=block_k, return_lse=True
    )
    assert o.dtype == torch.float32 and o.shape == ref.shape
    assert _rel(o, ref) <= 1e-5
    assert torch.allclose(lse.double(), ref_lse, rtol=1e-5, atol=1e-5)
    assert _rel(naive_attention(q, k, v, causal=causal), ref) <= 1e-5


def test_naive_and_flash_match_sdpa():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 100, 32, dtype=torch.float64) for _ in range(3))
    for causal in (False, True):
        sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        assert torch.allclose(naive_attention(q, k, v, causal), sdpa, atol=1e-12)
        assert torch.allclose(flash_attention(q, k, v, causal, block_q=32, block_k=24), sdpa)


def test_flash_is_stable_for_large_scores():
    q = torch.full((1, 1, 5, 16), 30.0)
    k = torch.full((1, 1, 9, 16), 30.0)
    k[0, 0, 3] = -30.0
    v = torch.randn(1, 1, 9, 16)
    out = flash_attention(q, k, v, block_q=2, block_k=4)
    assert torch.isfinite(out).all()
    assert _rel(out, _reference(q, k, v, False)[0]) <= 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_float64(causal):
    torch.manual_seed(1)
    shapes = [(1, 2, 11, 16), (1, 2, 11 if causal else 9, 16), (1, 2, 11 if causal else 9, 8)]
    q, k, v = (torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in shapes)
    fn = lambda a, b, c: flash_attention(a, b, c, causal=causal, block_q=4, block_k=3)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_float32_gradients_match_autograd_of_reference():
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 2, 45, 64, requires_grad=True) for _ in range(3))
    grad_o = torch.randn(2, 2, 45, 64)
    for causal in (False, True):
        got = torch.autograd.grad(flash_attention(q, k, v, causal, None, 16, 20), (q, k, v), grad_o)
        qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
        want = torch.autograd.grad(_reference(qd, kd, vd, causal)[0], (qd, kd, vd), grad_o.double())
        for g, w in zip(got, want):
            assert _rel(g, w) <= 1e-5


def test_backward_keeps_no_seq_by_seq_tensor():
    n = 96
    q, k, v = (torch.randn(1, 1, n, 16, requires_grad=True) for _ in range(3))
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        flash_attention(q, k, v, block_q=32, block_k=32).sum().backward()
    assert saved and max(saved) <= n * 16, saved
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        naive_attention(q, k, v).sum().backward()
    assert max(saved) >= n * n  # the reference does keep the probabilities


@pytest.mark.parametrize(
    ("n", "block", "expected"), [(256, 64, 10), (250, 64, 10), (64, 64, 1), (130, 32, 15)]
)
def test_causal_skips_key_blocks_above_the_diagonal(monkeypatch, n, block, expected):
    calls = []
    real = att.online_softmax_update

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(att, "online_softmax_update", counting)
    q, k, v = (torch.randn(1, 1, n, 16) for _ in range(3))
    out = flash_attention(q, k, v, causal=True, block_q=block, block_k=block)
    assert len(calls) == expected
    assert _rel(out, _reference(q, k, v, True)[0]) <= 1e-5
    calls.clear()
    flash_attention(q, k, v, causal=False, block_q=block, block_k=block)
    assert len(calls) == math.ceil(n / block) ** 2


def test_online_softmax():
    torch.manual_seed(3)
    for size, block in [(1, 1), (7, 3), (100, 7), (64, 64), (10, 100)]:
        x = torch.randn(size, dtype=torch.float64) * 50
        assert torch.allclose(online_softmax(x, block), torch.softmax(x, 0))
    big = torch.tensor([1000.0, 999.0, -1000.0])
    assert torch.allclose(online_softmax(big, 1), torch.softmax(big, 0))
    with pytest.raises(ValueError):
        online_softmax(torch.ones(2, 2), 1)
    with pytest.raises(ValueError):
        online_softmax(torch.ones(3), 0)


def test_seed_worked_example():
    """The two-tile example of Chapter 11: o = [0.76573417, 1.55676994]."""
    s = torch.tensor([[1.0, 3.0, 0.0, 2.0]], dtype=torch.float64)
    v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0], [3.0, 1.0]], dtype=torch.float64)
    m = torch.full((1,), float("-inf"), dtype=torch.float64)
    l = torch.zeros(1, dtype=torch.float64)
    acc = torch.zeros(1, 2, dtype=torch.float64)
    for j in (0, 2):
        m, l, acc = att.online_softmax_update(m, l, acc, s[:, j : j + 2].clone(), v[j : j + 2])
    assert torch.allclose(l, torch.tensor([1.55300179], dtype=torch.float64))
    assert torch.allclose(acc / l, torch.tensor([[0.76573417, 1.55676994]], dtype=torch.float64))


def _qkv(**over):
    shapes = dict(q=(1, 2, 8, 16), k=(1, 2, 8, 16), v=(1, 2, 8, 16))
    shapes.update(over)
    return [torch.randn(*shapes[n]) for n in "qkv"]


@pytest.mark.parametrize(
    "inputs",
    [
        _qkv(q=(1, 2, 8, 32)),  # head_dim mismatch
        _qkv(k=(1, 3, 8, 16)),  # heads mismatch
        _qkv(v=(1, 2, 7, 16)),  # k/v length mismatch
        _qkv(q=(2, 8, 16)),  # 3-D
        _qkv(q=(1, 2, 0, 16)),  # empty
    ],
)
def test_bad_shapes_raise(inputs):
    with pytest.raises(ValueError):
        flash_attention(*inputs)
    with pytest.raises(ValueError):
        naive_attention(*inputs)


def test_bad_dtype_device_and_blocks_raise():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="dtype"):
        flash_attention(q, k.double(), v)
    with pytest.raises(ValueError, match="floating"):
        flash_attention(q.long(), k.long(), v.long())
    with pytest.raises(ValueError, match="device"):
        flash_attention(q, k.to("meta"), v)
    for bad in (0, -4, 2.5, True):
        with pytest.raises(ValueError, match="block"):
            flash_attention(q, k, v, block_q=bad)
        with pytest.raises(ValueError, match="block"):
            flash_attention(q, k, v, block_k=bad)
