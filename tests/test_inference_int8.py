"""Int8 weight-only quantization, cross-checked against torch.ao's dynamic int8 linear."""

import warnings

import pytest
import torch

from labs import gpt
from labs.inference.int8 import Int8Linear, quantize_model_int8, quantize_per_channel, weight_bytes


def test_per_channel_error_bound():
    w = torch.randn(16, 40, generator=torch.Generator().manual_seed(0))
    w[3] *= 100  # one large row must not hurt the others
    q, scale = quantize_per_channel(w)
    assert q.dtype == torch.int8 and scale.shape == (16,)
    err = (q.float() * scale[:, None] - w).abs()
    assert bool((err <= scale[:, None] / 2 + 1e-6).all())


def test_matches_torch_ao_dynamic_int8():
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(5, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        ref = quantize_dynamic(
            torch.nn.Sequential(lin), {torch.nn.Linear: per_channel_dynamic_qconfig}
        )
    with torch.no_grad():
        ours, exact, theirs = Int8Linear.from_linear(lin)(x), lin(x), ref(x)
    scale = exact.abs().max()
    assert float((ours - exact).abs().max()) < 0.01 * scale
    assert float((ours - theirs).abs().max()) < 0.02 * scale  # torch.ao also quantizes x


def test_model_bytes_and_outputs():
    model = gpt.GPT(gpt.GPTConfig(n_embd=32)).eval()
    qmodel = quantize_model_int8(model)
    assert isinstance(qmodel.blocks[0].mlp.up_proj, Int8Linear)
    assert isinstance(qmodel.lm_head, torch.nn.Linear)  # tied to the embedding: kept
    assert weight_bytes(qmodel) < 0.6 * weight_bytes(model)
    idx = torch.randint(0, 96, (2, 16))
    torch.testing.assert_close(qmodel(idx), model(idx), atol=2e-2, rtol=0)


def test_rejects_non_finite():
    with pytest.raises(ValueError, match="NaN or inf"):
        quantize_per_channel(torch.tensor([[1.0, float("inf")]]))


def test_matches_aten_weight_int8pack_mm():
    """PyTorch's own weight-only int8 kernel (the one torchao uses) computes the same product."""
    lin = torch.nn.Linear(64, 32, bias=False)
    q, scale = quantize_per_channel(lin.weight)
    x = torch.randn(3, 64)
    ref = torch.ops.aten._weight_int8pack_mm(x, q, scale)
    torch.testing.assert_close(Int8Linear(q, scale, None)(x), ref, atol=1e-4, rtol=1e-4)
