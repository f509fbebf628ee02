"""Tests of labs.compress.quantize and labs.compress.outliers, cross-checked against torch."""

import warnings

import pytest
import torch
import torch.nn as nn

from labs import gpt
from labs.compress import awq, calibrate, gptq, int8, measure, outliers
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


# --- GPTQ, round-to-nearest and AWQ (labs.compress.gptq, labs.compress.awq) ----------------


def _layer_problem(out=24, inp=48, tokens=200, seed=0):
    """A weight and correlated calibration inputs with two loud channels, like a real layer."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, inp, generator=g) @ (
        torch.eye(inp) + 0.3 * torch.randn(inp, inp, generator=g)
    )
    x[:, [3, 17]] *= 8.0
    return torch.randn(out, inp, generator=g), x


def _naive_gptq(w, h, bits, sym, damp):
    """GPTQ written from the paper's equations: one column at a time, explicit inverse Hessian."""
    W = w.double().clone()
    H = h.double().clone()
    H += damp * H.diagonal().mean() * torch.eye(len(H), dtype=H.dtype)
    scale, zero = gptq.minmax_params(W, bits, sym)
    Q = torch.zeros_like(W)
    for i in range(W.shape[1]):
        Hinv = torch.linalg.inv(H[i:, i:])  # inverse Hessian of the columns not yet quantized
        Q[:, i] = gptq.quantize_with(W[:, i : i + 1], scale, zero, bits, sym)[:, 0]
        err = (W[:, i] - Q[:, i]) / Hinv[0, 0]
        W[:, i:] -= err[:, None] * Hinv[0, :][None, :]
    return Q


@pytest.mark.parametrize("bits, sym", [(4, False), (3, True)])
def test_gptq_equals_the_textbook_update(bits, sym):
    w, x = _layer_problem()
    h = calibrate.hessian(x)
    got = gptq.gptq(w.double(), h, bits, sym=sym, block_size=8)
    torch.testing.assert_close(got, _naive_gptq(w, h, bits, sym, 0.01), rtol=0, atol=1e-9)


@pytest.mark.parametrize("group_size", [None, 16, 20, 64])
def test_gptq_lazy_batches_do_not_change_the_result(group_size):
    w, x = _layer_problem()
    h = calibrate.hessian(x)
    a = gptq.gptq(w.double(), h, 4, group_size, block_size=1)
    for bs in (7, 32, 128):
        torch.testing.assert_close(gptq.gptq(w.double(), h, 4, group_size, block_size=bs), a)


@pytest.mark.parametrize("bits, group_size", [(4, None), (3, 16), (2, 16)])
def test_gptq_beats_rtn_on_the_layer_output(bits, group_size):
    w, x = _layer_problem()
    err = {}
    for name, wq in [
        ("rtn", gptq.rtn(w, bits, group_size)),
        ("gptq", gptq.gptq(w, calibrate.hessian(x), bits, group_size)),
    ]:
        err[name] = float((x @ (wq - w).T).norm())
    assert err["gptq"] < 0.8 * err["rtn"], err


@pytest.mark.parametrize("bits, group_size", [(4, None), (3, 8), (4, 32)])
def test_gptq_output_lies_on_each_groups_grid(bits, group_size):
    w, x = _layer_problem()
    q = gptq.gptq(w, calibrate.hessian(x), bits, group_size)
    g = q.shape[1] if group_size is None else group_size
    for j in range(0, q.shape[1], g):
        block = q[:, j : j + g]
        scale, zero = gptq.minmax_params(block, bits)
        levels = torch.round(block / scale) + zero
        assert len(torch.unique(levels[0])) <= 2**bits


def test_rtn_matches_torch_fake_quantize_and_our_quantize():
    w = _rand(16, 64, seed=3)
    for bits, gs in [(4, 16), (3, 32), (8, 64)]:
        ours = gptq.rtn(w, bits, gs)
        g = w.reshape(-1, gs)
        scale, zero = gptq.minmax_params(g, bits)
        ref = torch.fake_quantize_per_channel_affine(
            g, scale[:, 0].float(), zero[:, 0].int(), 0, 0, 2**bits - 1
        ).reshape(w.shape)
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
        ours_q = Q.quantize(w, bits, scheme="affine", granularity="group", group_size=gs)
        torch.testing.assert_close(ours, ours_q.dequantize(), rtol=0, atol=1e-6)
    sym = gptq.rtn(w, 4, None, sym=True)
    torch.testing.assert_close(sym, Q.quantize(w, 4, granularity="channel").dequantize())


def test_zero_rows_and_dead_inputs_give_zeros_not_nan():
    w, x = _layer_problem()
    w[2] = 0.0
    x[:, 5] = 0.0  # an input that never fires: H[5, 5] == 0
    h = calibrate.hessian(x)
    for q in (gptq.rtn(w, 4, 16), gptq.gptq(w, h, 4, 16), gptq.gptq(w, h, 3, None, sym=True)):
        assert torch.isfinite(q).all()
        assert (q[2] == 0).all()
    assert (gptq.gptq(w, h, 4, 16)[:, 5] == 0).all()


def test_gptq_errors():
    w, x = _layer_problem()
    h = calibrate.hessian(x[:10])  # fewer tokens than inputs: singular without dampening
    with pytest.raises(ValueError, match="damp"):
        gptq.gptq(w, h, 4, damp=0.0)
    assert torch.isfinite(gptq.gptq(w, h, 4, damp=0.01)).all()
    with pytest.raises(ValueError, match="Hessian"):
        gptq.gptq(w, h[:5, :5], 4)
    with pytest.raises(ValueError, match="bits"):
        gptq.rtn(w, 9)
    with pytest.raises(ValueError, match="group_size"):
        gptq.rtn(w, 4, 0)
    with pytest.raises(ValueError, match="method"):
        gptq.quantize_model(nn.Linear(2, 2), torch.zeros(1, 1), 4, method="awq")


def test_bits_per_weight_with_fp16_scales():
    assert gptq.bits_per_weight(4, 128, 4096) == pytest.approx(4 + 20 / 128)
    assert gptq.bits_per_weight(3, 32, 4096, zero=False) == pytest.approx(3.5)
    assert gptq.bits_per_weight(4, 128, 96) == pytest.approx(4 + 20 / 96)  # one group per row
    assert gptq.bits_per_weight(4, None, 384) == pytest.approx(4 + 20 / 384)


def test_quantize_model_sequential_and_better_than_rtn():
    model = gpt.GPT(gpt.GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, seed=1)).eval()
    ids = torch.randint(0, 96, (4, 16), generator=torch.Generator().manual_seed(0))
    names = measure.linear_names(model)
    ref = calibrate.capture_inputs(model, ids, names)
    errs = {}
    for method in ("rtn", "gptq"):
        qm = gptq.quantize_model(model, ids, 3, 16, method=method)
        xs = calibrate.capture_inputs(qm, ids, names)
        errs[method] = sum(
            float(
                (
                    xs[n] @ qm.get_submodule(n).weight.detach().T
                    - ref[n] @ model.get_submodule(n).weight.detach().T
                ).norm()
            )
            for n in names
        )
    assert errs["gptq"] < errs["rtn"]


def test_awq_alpha_zero_is_rtn_and_search_never_loses_on_calibration():
    w, x = _layer_problem()
    s0 = awq.awq_scales(x.abs().mean(0), 0.0)
    torch.testing.assert_close(s0, torch.ones(48))
    wq, alpha = awq.awq_search(w, x, 3, 16)
    err = float((x @ (wq - w).T).pow(2).mean())
    err_rtn = float((x @ (gptq.rtn(w, 3, 16) - w).T).pow(2).mean())
    assert err <= err_rtn and 0.0 <= alpha < 1.0
    s = awq.awq_scales(x.abs().mean(0), 0.5)
    assert float(s.max() * s.min()) == pytest.approx(1.0)
    assert int(s.argmax()) in (3, 17)  # the loud channels get the largest scales


def test_input_absmean_is_the_mean_not_the_max(small_gpt):
    x = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(0))
    name = "blocks.0.mlp.up_proj"
    mean = outliers.input_absmean(small_gpt, x, [name])[name]
    mx = outliers.input_absmax(small_gpt, x, [name])[name]
    inp = calibrate.capture_inputs(small_gpt, x, [name])[name]
    torch.testing.assert_close(mean, inp.abs().mean(0))
    assert (mean <= mx + 1e-6).all() and (mean < mx).any()
