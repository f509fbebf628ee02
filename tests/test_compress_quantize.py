"""Tests of labs.compress.quantize and labs.compress.outliers, cross-checked against torch."""

import warnings

import pytest
import torch
import torch.nn as nn

from labs import gpt
from labs.compress import int8, measure, outliers
from labs.compress import quantize as Q


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def small_gpt():
    return gpt.GPT(gpt.GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16)).eval()


@pytest.mark.parametrize("bits", [8, 4, 3, 2])
def test_qrange(bits):
    assert Q.qrange(bits, "symmetric") == (-(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1)
    assert Q.qrange(bits, "affine") == (0, 2**bits - 1)


def test_symmetric_per_channel_matches_torch():
    w = _rand(16, 24)
    qt = Q.quantize(w, 8, granularity="channel")
    scale = qt.scale.flatten().double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = torch.quantize_per_channel(
            w, scale, torch.zeros(16, dtype=torch.long), 0, torch.qint8
        )
    assert torch.equal(qt.q, ref.int_repr())
    fq = torch.fake_quantize_per_channel_affine(
        w, scale.float(), torch.zeros(16, dtype=torch.int32), 0, -127, 127
    )
    torch.testing.assert_close(qt.dequantize(), fq, rtol=0, atol=1e-6)


def test_affine_per_tensor_matches_torch():
    x = torch.nn.functional.gelu(_rand(1000, seed=1) * 2)
    qt = Q.quantize(x, 8, scheme="affine")
    s, z = float(qt.scale), int(qt.zero_point)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = torch.quantize_per_tensor(x, s, z, torch.quint8)
    assert torch.equal(qt.q.flatten(), ref.int_repr())
    fq = torch.fake_quantize_per_tensor_affine(x, s, z, 0, 255)
    torch.testing.assert_close(qt.dequantize(), fq, rtol=0, atol=1e-6)


def test_granularity_and_calibration_reduce_error():
    w = _rand(64, 128, seed=2)
    w[3, 5] = 12.0
    err = {
        g: float((Q.fake_quantize(w, 4, granularity=g, group_size=32) - w).norm())
        for g in ("tensor", "channel", "group")
    }
    assert err["group"] < err["channel"] < err["tensor"]
    x = _rand(5000, seed=3)
    x[0] = 50.0
    mse = {
        c: float((Q.fake_quantize(x, 4, calibration=c) - x).pow(2).mean())
        for c in ("minmax", "percentile", "mse")
    }
    assert mse["mse"] <= mse["minmax"] and mse["percentile"] < mse["minmax"]


def test_group_equals_channel_when_group_is_a_row():
    w = _rand(6, 40, seed=4)
    a = Q.fake_quantize(w, 4, granularity="group", group_size=40)
    b = Q.fake_quantize(w, 4, granularity="channel")
    torch.testing.assert_close(a, b)


def test_nbytes_counts_packed_codes_and_scales():
    w = _rand(8, 64)
    assert Q.quantize(w, 4, granularity="group", group_size=32).nbytes == 8 * 64 // 2 + 16 * 4
    assert Q.quantize(w, 8).nbytes == 8 * 64 + 4


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(bits=1), ValueError, "bits"),
        (dict(bits=9), ValueError, "bits"),
        (dict(scheme="asym"), ValueError, "scheme"),
        (dict(granularity="row"), ValueError, "granularity"),
        (dict(granularity="group", group_size=7), ValueError, "group_size"),
        (dict(granularity="group"), ValueError, "group_size"),
        (dict(calibration="kl"), ValueError, "calibration"),
    ],
)
def test_bad_arguments(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        Q.quantize(_rand(4, 32), **kwargs)


def test_non_float_tensor_rejected():
    with pytest.raises(TypeError, match="floating-point"):
        Q.quantize(torch.arange(10))


def test_ste_gradient_is_identity():
    x = _rand(5, 7).requires_grad_()
    y = Q.fake_quantize(x, 3, ste=True)
    torch.testing.assert_close(y.detach(), Q.fake_quantize(x.detach(), 3))
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones_like(x))


@pytest.mark.parametrize(
    "bits, gran", [(8, "channel"), (4, "group"), (3, "channel"), (4, "tensor")]
)
def test_quant_linear_packs_and_matches_fake_quant(bits, gran):
    lin = nn.Linear(64, 10)
    ql = Q.QuantLinear(lin, bits, granularity=gran, group_size=16)
    ref = Q.fake_quantize(lin.weight.detach(), bits, granularity=gran, group_size=16)
    torch.testing.assert_close(ql.weight_float(), ref)
    if bits <= 4:
        assert ql.codes.numel() == 64 * 10 // 2 and ql.codes.dtype == torch.uint8
    x = _rand(3, 64)
    torch.testing.assert_close(ql(x), x @ ref.T + lin.bias.detach())


def test_affine_quant_linear():
    lin = nn.Linear(32, 8)
    ql = Q.QuantLinear(lin, 4, scheme="affine", granularity="channel")
    ref = Q.fake_quantize(lin.weight.detach(), 4, scheme="affine", granularity="channel")
    torch.testing.assert_close(ql.weight_float(), ref)


def test_quantize_weights_and_fake_quant_model(small_gpt):
    qm = Q.quantize_weights(small_gpt, 8, granularity="channel")
    assert isinstance(qm.blocks[0].mlp.up_proj, Q.QuantLinear)
    assert isinstance(small_gpt.blocks[0].mlp.up_proj, nn.Linear)  # the original is untouched
    x = torch.randint(0, 96, (2, 16))
    torch.testing.assert_close(qm(x), small_gpt(x), rtol=0.05, atol=0.05)
    assert measure.file_bytes(qm) < measure.file_bytes(small_gpt)
    qat = Q.add_fake_quant(Q.quantize_weights(small_gpt, 8, names=[]), 4, granularity="channel")
    w = qat.blocks[0].mlp.up_proj.weight
    torch.testing.assert_close(
        w,
        Q.fake_quantize(small_gpt.blocks[0].mlp.up_proj.weight.detach(), 4, granularity="channel"),
    )


@pytest.mark.parametrize("n", [1, 5, 17, 64])
def test_int8_linear_close_to_fp32_and_torch_ao(n):
    lin = nn.Linear(48, 20)
    x = _rand(n, 48, seed=n)
    ref = lin(x).detach()
    ours = int8.int8_linear(x, lin.weight.detach(), lin.bias.detach())
    assert ours.shape == (n, 20)
    assert float((ours - ref).norm() / ref.norm()) < 0.02
    dyn = int8.dynamic_int8(nn.Sequential(lin))(x)
    assert float((ours - dyn).norm() / ref.norm()) < 0.04


def test_int8_linear_shape_error():
    with pytest.raises(ValueError, match="int8_linear"):
        int8.int8_linear(_rand(3, 4), _rand(5, 6))


def test_plant_outliers_preserves_function(small_gpt):
    big = outliers.plant_outliers(small_gpt, channels=[1, 7], factor=25.0)
    x = torch.randint(0, 96, (2, 16))
    torch.testing.assert_close(big(x), small_gpt(x), rtol=1e-4, atol=1e-4)
    stats = outliers.input_absmax(big, x, ["blocks.0.mlp.up_proj"])
    assert set(stats["blocks.0.mlp.up_proj"].topk(2).indices.tolist()) == {1, 7}


def test_llm_int8_decomposition():
    x, w = _rand(20, 32, seed=5), _rand(12, 32, seed=6) * 0.1
    y0, cols = outliers.llm_int8_linear(x, w, threshold=100.0)
    assert cols.numel() == 0
    torch.testing.assert_close(y0, int8.int8_linear(x, w), rtol=1e-5, atol=1e-6)
    x[:, 9] = 30.0 + x[:, 9]  # an outlier feature: large in every token
    y, cols = outliers.llm_int8_linear(x, w, threshold=6.0)
    assert cols.tolist() == [9]
    exact = x @ w.T
    assert (y - exact).norm() < 0.5 * (int8.int8_linear(x, w) - exact).norm()


def test_smooth_scales_preserve_product_and_flatten():
    x, w = _rand(50, 16, seed=7), _rand(8, 16, seed=8)
    x[:, 3] *= 40
    s = outliers.smooth_scales(x.abs().amax(0), w, alpha=0.5)
    torch.testing.assert_close((x / s) @ (w * s).T, x @ w.T, rtol=1e-4, atol=1e-3)
    spread = (x / s).abs().amax(0)
    assert spread.max() / spread.median() < x.abs().amax(0).max() / x.abs().amax(0).median()
    with pytest.raises(ValueError, match="alpha"):
        outliers.smooth_scales(x.abs().amax(0), w, alpha=1.5)


def test_awq_keep_all_is_lossless_and_choices(small_gpt):
    x = torch.randint(0, 96, (2, 16))
    names = measure.linear_names(small_gpt)
    stats = outliers.input_absmax(small_gpt, x, names)
    full = outliers.awq_quantize(small_gpt, stats, 3, fraction=1.0, granularity="channel")
    torch.testing.assert_close(full(x), small_gpt(x))
    for choose in ("activation", "weight", "random"):
        outliers.awq_quantize(small_gpt, stats, 4, choose=choose, granularity="channel")
    scaled = outliers.awq_quantize(small_gpt, stats, 8, mode="scale", granularity="channel")
    torch.testing.assert_close(scaled(x), small_gpt(x), rtol=0.05, atol=0.05)
    with pytest.raises(ValueError, match="mode"):
        outliers.awq_quantize(small_gpt, stats, 4, mode="drop")
    with pytest.raises(ValueError, match="choose"):
        outliers.awq_quantize(small_gpt, stats, 4, choose="biggest")


@pytest.mark.parametrize("shape", [(3, 40), (2, 5, 40), (33, 40)])
def test_int8_layer_equals_functional_int8(shape):
    lin = nn.Linear(40, 13)
    x = _rand(*shape, seed=9)
    layer = int8.Int8Linear(lin)
    flat = x.reshape(-1, 40)
    ref = int8.int8_linear(flat, lin.weight.detach(), lin.bias.detach()).reshape(*shape[:-1], 13)
    torch.testing.assert_close(layer(x), ref)
    assert layer.weight_t.dtype == torch.int8
