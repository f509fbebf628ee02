"""Tests of labs.attention.triton_fwd: on CPU in Triton's interpreter (tiny shapes), on CUDA if present."""

import math
import sys

import pytest
import torch

import labs.attention.triton_fwd as ta  # first: it sets TRITON_INTERPRET=1 on a CPU-only machine

pytest.importorskip("triton", reason="Triton is not installed (pip install 'dlsys-labs[triton]')")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _reference(q, k, v, causal):
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        hidden = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(hidden, float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def _rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize(
    ("n_q", "n_k", "d", "causal"),
    [(37, 37, 16, False), (20, 45, 40, False), (37, 37, 16, True), (50, 33, 32, True)],
)
def test_forward_and_backward_match_reference(n_q, n_k, d, causal):
    torch.manual_seed(n_q + n_k + d)
    q = torch.randn(1, 2, n_q, d, device=DEVICE, requires_grad=True)
    k = torch.randn(1, 2, n_k, d, device=DEVICE, requires_grad=True)
    v = torch.randn(1, 2, n_k, d, device=DEVICE, requires_grad=True)
    o, lse = ta.triton_attention_forward(q, k, v, causal, block_m=16, block_n=16)
    ref, ref_lse = _reference(q, k, v, causal)
    assert o.shape == ref.shape and o.dtype == q.dtype
    assert _rel(o, ref) <= 1e-5
    assert torch.allclose(lse.double(), ref_lse, rtol=1e-5, atol=1e-5)
    grad_o = torch.randn_like(o)
    got = torch.autograd.grad(
        ta.triton_attention(q, k, v, causal, block_m=16, block_n=16), (q, k, v), grad_o
    )
    want = torch.autograd.grad(ref, (q, k, v), grad_o.double())
    for g, w in zip(got, want):
        assert _rel(g, w) <= 1e-5


def test_uses_interpreter_without_gpu():
    ta.load_triton()
    if DEVICE == "cpu":
        import os

        assert ta.uses_interpreter() and os.environ.get("TRITON_INTERPRET") == "1"
        assert type(ta._KERNELS["fwd"]).__name__ == "InterpretedFunction"
    else:
        assert not ta.uses_interpreter()


def test_invalid_inputs_raise_value_error():
    q = torch.randn(1, 1, 16, 16, device=DEVICE)
    with pytest.raises(ValueError, match="power of two"):
        ta.triton_attention(q, q, q, block_m=24)
    with pytest.raises(ValueError, match="power of two"):
        ta.triton_attention(q, q, q, block_n=8)
    with pytest.raises(ValueError, match="dtype"):
        ta.triton_attention(q, q.double(), q)
    with pytest.raises(ValueError, match="dtype"):
        ta.triton_attention(q.double(), q.double(), q.double())
    with pytest.raises(ValueError, match="head_dim"):
        ta.triton_attention(q, q, torch.randn(1, 1, 16, 32, device=DEVICE))
    with pytest.raises(ValueError, match="device"):
        ta.triton_attention(q, q, q.to("meta"))


def test_missing_triton_gives_install_hint(monkeypatch):
    monkeypatch.setattr(ta, "_KERNELS", {})
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(ImportError, match="pip install"):
        ta.load_triton()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU only: fp16 kernel vs SDPA on CUDA")
@pytest.mark.parametrize("causal", [False, True])
def test_fp16_on_gpu_matches_sdpa(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 1000, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    got = ta.triton_attention(q, k, v, causal)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert _rel(got, want) <= 2e-3
