"""Tests of labs.peft.nf4: NF4 and double quantization from scratch, checked against bitsandbytes."""

import pytest
import torch
import torch.nn.functional as F

from labs import gpt
from labs.peft import codes, nf4
from labs.training.activations import SavedTensorLedger

bnbf = pytest.importorskip("bitsandbytes.functional")


def _bnb_roundtrip(w, double_quant):
    q, state = bnbf.quantize_4bit(
        w, blocksize=64, quant_type="nf4", compress_statistics=double_quant
    )
    return q, bnbf.dequantize_4bit(q, state)


def _weights():
    g = torch.Generator().manual_seed(0)
    normal = torch.randn(256, 512, generator=g) * 0.02
    heavy = torch.distributions.StudentT(torch.tensor(3.0)).sample((256, 512)) * 0.02
    model, _ = gpt.pretrain(gpt.GPTConfig(n_layer=1, n_embd=64), steps=25, batch_size=8, lr=1e-2)
    trained = model.blocks[0].mlp.up_proj.weight.detach()
    return {"normal": normal, "student-t": heavy, "trained": trained}


WEIGHTS = _weights()


def test_code_tables_equal_bitsandbytes():
    assert torch.equal(codes.NF4_CODE, bnbf.get_4bit_type("nf4", device="cpu").float().cpu())
    torch.testing.assert_close(codes.normal_float_code(), codes.NF4_CODE, rtol=0, atol=1e-6)
    assert torch.equal(codes.dynamic_code(), bnbf.create_dynamic_map(signed=True).float())
    assert codes.NF4_CODE[7] == 0 and len(codes.NF4_CODE) == 16


@pytest.mark.parametrize("double_quant", [False, True])
@pytest.mark.parametrize("kind", list(WEIGHTS))
def test_roundtrip_error_within_one_percent_of_bitsandbytes(kind, double_quant):
    w = WEIGHTS[kind]
    q = nf4.nf4_quantize(w, blocksize=64, double_quant=double_quant)
    packed, ref = _bnb_roundtrip(w, double_quant)
    ours = (q.dequantize() - w).pow(2).mean().sqrt()
    theirs = (ref - w).pow(2).mean().sqrt()
    assert abs(float(ours / theirs) - 1) < 0.01, (float(ours), float(theirs))
    assert torch.equal(q.packed, packed.view(-1))  # the very same 4-bit codes, same packing


def test_storage_bits_per_param():
    w = torch.randn(1024, 1024)
    assert nf4.nf4_quantize(w, double_quant=False).bits_per_param == 4.5
    dq = nf4.nf4_quantize(w).bits_per_param
    assert dq == pytest.approx(4 + 8 / 64 + 32 / (64 * 256), abs=1e-4)  # 4.127
    q = nf4.nf4_quantize(w)
    assert q.packed.dtype == torch.uint8 and q.packed.numel() == w.numel() // 2
    small = nf4.nf4_quantize(torch.randn(64, 64))  # 64 blocks: one partial block of scales
    assert small.absmax_q.numel() == 64 and small.absmax_scale.numel() == 1
    assert small.bits_per_param == 4 + 8 / 64 + 2 * 32 / 4096


def test_packing_two_codes_per_byte():
    w = torch.tensor([[-1.0, 1.0, 0.0, 0.5]])
    q = nf4.nf4_quantize(w, blocksize=4, double_quant=False)
    assert q.packed.tolist() == [0x0F, 0x7C]  # codes 0, 15, 7, 12 (0.5 -> 0.5626)
    torch.testing.assert_close(q.dequantize(), codes.NF4_CODE[[0, 15, 7, 12]].view(1, 4))


def test_linear_int8_absmax_code_is_worse_on_heavy_tails():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(1024, 1024, generator=g) / torch.rand(1024, 1024, generator=g).sqrt()  # t-like
    errs = {
        c: float((nf4.nf4_quantize(w, absmax_code=c).dequantize() - w).pow(2).mean())
        for c in codes.CODES8
    }
    assert errs["linear"] > 1.05 * errs["dynamic"]
    assert errs["fp8"] < errs["linear"]


def test_padding_dtype_and_shape_are_kept():
    w = torch.randn(10, 13, dtype=torch.bfloat16)
    q = nf4.nf4_quantize(w, double_quant=True)
    assert q.padding == 64 * 3 - 130
    out = q.dequantize()
    assert out.shape == w.shape and out.dtype == torch.bfloat16
    assert float((out.float() - w.float()).abs().max()) <= float(w.abs().max()) * 0.2
    zeros = nf4.nf4_quantize(torch.zeros(128))
    assert torch.equal(zeros.dequantize(), torch.zeros(128))


def test_bad_input_raises_value_error():
    with pytest.raises(ValueError, match="floating-point"):
        nf4.nf4_quantize(torch.arange(64))
    with pytest.raises(ValueError, match="blocksize"):
        nf4.nf4_quantize(torch.randn(64), blocksize=63)
    with pytest.raises(ValueError, match="blocksize"):
        nf4.nf4_quantize(torch.randn(64), blocksize=0)
    with pytest.raises(ValueError, match="empty"):
        nf4.nf4_quantize(torch.randn(0))
    with pytest.raises(ValueError, match="absmax_code"):
        nf4.nf4_quantize(torch.randn(64), absmax_code="int4")


def test_nf4_linear_and_quantize_linears():
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 48)
    layer = nf4.NF4Linear.from_linear(lin)
    x = torch.randn(3, 64)
    expected = x @ nf4.nf4_quantize(lin.weight).dequantize().T + lin.bias
    torch.testing.assert_close(layer(x), expected)
    assert list(layer.parameters()) == []
    assert "bits_per_param" in repr(layer)
    model = nf4.quantize_linears(gpt.GPT(gpt.GPTConfig(n_layer=1, n_embd=64)))
    names = [n for n, m in model.named_modules() if isinstance(m, nf4.NF4Linear)]
    assert len(names) == 6 and "lm_head" not in names
    assert model(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, 96)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_nf4_linear_recomputes_the_weight_in_backward(dtype, bias):
    """Outputs and input gradients are those of F.linear on the dequantized weight, bit for bit,
    but autograd keeps no float copy of the weight: only the 4-bit codes (as bitsandbytes)."""
    torch.manual_seed(1)
    lin = torch.nn.Linear(128, 64, bias=bias)
    layer = nf4.NF4Linear.from_linear(lin, compute_dtype=dtype)
    b = None if lin.bias is None else lin.bias.detach().to(dtype)
    for shape in [(5, 128), (2, 3, 128)]:
        x = torch.randn(*shape, requires_grad=True)
        ledger = SavedTensorLedger()
        with ledger:
            y = layer(x)
        assert ledger.records == []  # the naive F.linear would save the (64, 128) weight
        x_ref = x.detach().clone().requires_grad_()
        with SavedTensorLedger() as naive:
            y_ref = F.linear(x_ref.to(dtype), layer.qweight.dequantize(dtype), b).float()
        assert [r[2] for r in naive.records] == [64 * 128 * dtype.itemsize]  # the weight
        assert y.dtype == torch.float32 and torch.equal(y, y_ref)
        grad = torch.randn_like(y)
        (gx,) = torch.autograd.grad(y, x, grad)
        (gx_ref,) = torch.autograd.grad(y_ref, x_ref, grad)
        assert torch.equal(gx, gx_ref)
    with torch.no_grad():
        assert torch.equal(layer(x), y_ref.detach())
    assert layer(x.detach()).grad_fn is None  # nothing to differentiate: no graph


def test_code_table_helpers():
    """labs.peft.codes: nearest code index and padding to whole blocks."""
    x = torch.tensor([-1.0, -0.01, 0.3, 0.99])
    assert codes.nearest_code(x, codes.NF4_CODE).tolist() == [0, 7, 11, 15]
    blocks, pad = codes.pad_to_blocks(torch.ones(5), 4)
    assert blocks.shape == (2, 4) and pad == 3 and blocks.sum() == 5
