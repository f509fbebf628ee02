"""Tests of labs.peft.lora: LoRA from scratch against Hugging Face peft, merging, QLoRA layers."""

import copy
import os

import pytest
import torch

from labs import gpt
from labs.peft import lora, nf4
from labs.training.activations import SavedTensorLedger

os.environ.setdefault("HF_HUB_OFFLINE", "1")
peft = pytest.importorskip("peft")

CFG = gpt.GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=32)
TARGETS = ["q_proj", "v_proj", "up_proj"]


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 96, (2, 16), generator=g), torch.randint(0, 96, (2, 16), generator=g)


def _lora_layers(model):
    return {n: m for n, m in model.named_modules() if isinstance(m, lora.LoRALinear)}


def test_adapted_model_starts_equal_to_base_and_counts_parameters():
    base = gpt.GPT(CFG)
    model = lora.apply_lora(copy.deepcopy(base), TARGETS, r=4, alpha=8)
    x, _ = _batch()
    torch.testing.assert_close(model(x), base(x), rtol=0, atol=0)
    trainable, total = lora.count_parameters(model)
    c = CFG.n_embd
    expected = CFG.n_layer * (
        2 * lora.lora_param_count(c, c, 4) + lora.lora_param_count(4 * c, c, 4)
    )
    assert trainable == expected == CFG.n_layer * 4 * (2 * 2 * c + 5 * c)
    assert total == base.num_params() + expected
    assert {n for n, p in model.named_parameters() if p.requires_grad} == {
        f"{n}.{ab}" for n in _lora_layers(model) for ab in ("lora_A", "lora_B")
    }
    layer = model.blocks[0].attn.q_proj
    assert torch.count_nonzero(layer.lora_B) == 0 and torch.count_nonzero(layer.lora_A) > 0
    bound = 1 / c**0.5  # kaiming_uniform(a=sqrt 5) on fan_in = c
    assert float(layer.lora_A.detach().abs().max()) <= bound


@pytest.mark.parametrize("rslora", [False, True])
def test_matches_peft_outputs_and_gradients(rslora):
    base = gpt.GPT(CFG)
    ours = lora.apply_lora(copy.deepcopy(base), TARGETS, r=4, alpha=12, rslora=rslora)
    config = peft.LoraConfig(
        r=4, lora_alpha=12, target_modules=TARGETS, lora_dropout=0.0, use_rslora=rslora
    )
    theirs = peft.get_peft_model(copy.deepcopy(base), config)
    inner = theirs.base_model.model
    g = torch.Generator().manual_seed(1)
    for name, layer in _lora_layers(ours).items():
        ref = inner.get_submodule(name)
        assert ref.scaling["default"] == pytest.approx(layer.scaling)
        # a non-zero B, identical on both sides, so the adapters actually contribute
        with torch.no_grad():
            layer.lora_B.copy_(torch.randn(layer.lora_B.shape, generator=g) * 0.1)
            ref.lora_A["default"].weight.copy_(layer.lora_A)
            ref.lora_B["default"].weight.copy_(layer.lora_B)
    x, y = _batch()
    out_ours, out_theirs = ours(x), theirs(x)
    assert not torch.allclose(out_ours, base(x), atol=1e-4)
    torch.testing.assert_close(out_ours, out_theirs)
    ours.loss(x, y).backward()
    inner.loss(x, y).backward()
    n_trainable = sum(p.requires_grad for p in theirs.parameters())
    assert n_trainable == 2 * len(_lora_layers(ours))
    for name, layer in _lora_layers(ours).items():
        ref = inner.get_submodule(name)
        torch.testing.assert_close(layer.lora_A.grad, ref.lora_A["default"].weight.grad)
        torch.testing.assert_close(layer.lora_B.grad, ref.lora_B["default"].weight.grad)


def test_regex_targets_select_like_peft():
    pattern = r"blocks\.1\..*_proj"
    ours = lora.apply_lora(gpt.GPT(CFG), pattern, r=2)
    theirs = peft.get_peft_model(gpt.GPT(CFG), peft.LoraConfig(r=2, target_modules=pattern))
    peft_names = {
        n.removeprefix("base_model.model.").removesuffix(".lora_A")
        for n, _ in theirs.named_modules()
        if n.endswith(".lora_A")
    }
    assert set(_lora_layers(ours)) == peft_names
    assert len(peft_names) == 6


def test_merge_and_unmerge():
    model = lora.apply_lora(gpt.GPT(CFG), TARGETS, r=4, alpha=8)
    with torch.no_grad():
        for layer in _lora_layers(model).values():
            layer.lora_B.normal_(0, 0.1)
    x, _ = _batch()
    before = model(x)
    w0 = model.blocks[0].attn.q_proj.base.weight.clone()
    lora.merge_lora(model)
    assert all(m.merged for m in _lora_layers(model).values())
    torch.testing.assert_close(model(x), before, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(model.blocks[0].attn.q_proj.base.weight, w0)
    lora.merge_lora(model)  # idempotent
    torch.testing.assert_close(model(x), before, rtol=1e-5, atol=1e-5)
    lora.unmerge_lora(model)
    torch.testing.assert_close(model.blocks[0].attn.q_proj.base.weight, w0, rtol=0, atol=1e-6)
    torch.testing.assert_close(model(x), before, rtol=1e-5, atol=1e-5)


def test_bad_arguments_raise_value_error():
    lin = torch.nn.Linear(8, 8)
    for kwargs, msg in [({"r": 0}, "rank"), ({"alpha": 0}, "alpha"), ({"dropout": 1.0}, "drop")]:
        with pytest.raises(ValueError, match=msg):
            lora.LoRALinear(lin, **kwargs)
    with pytest.raises(ValueError, match="match no module"):
        lora.apply_lora(gpt.GPT(CFG), ["q_proj", "query"], r=2)
    with pytest.raises(ValueError, match="matches no module"):
        lora.apply_lora(gpt.GPT(CFG), r"nothing\..*", r=2)
    with pytest.raises(ValueError, match="not linear"):
        lora.apply_lora(gpt.GPT(CFG), ["ln_1"], r=2)
    with pytest.raises(ValueError, match="r > 0"):
        lora.apply_lora(gpt.GPT(CFG), ["q_proj"], r=-1)


def test_qlora_layer_is_nf4_base_plus_adapter():
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    layer = lora.LoRALinear.qlora(lin, r=4, alpha=8)
    assert isinstance(layer.base, nf4.NF4Linear)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(5, 64, requires_grad=True)
    w = nf4.nf4_quantize(lin.weight).dequantize()
    expected = x @ w.T + lin.bias + layer.scaling * (x @ layer.lora_A.T @ layer.lora_B.T)
    out = layer(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert layer.lora_A.grad is not None and layer.lora_B.grad is not None
    assert [n for n, p in layer.named_parameters() if p.requires_grad] == ["lora_A", "lora_B"]
    with pytest.raises(ValueError, match="re-quantize"):
        layer.merge()
    bf16 = lora.LoRALinear.qlora(lin, r=4, compute_dtype=torch.bfloat16)
    torch.testing.assert_close(bf16(x.detach()), layer.base(x.detach()), rtol=0.05, atol=0.05)


def test_qlora_model_quantizes_every_linear_and_trains():
    model = lora.apply_lora(gpt.GPT(CFG), TARGETS, r=4, alpha=8, quantize=True)
    quantized = [n for n, m in model.named_modules() if isinstance(m, nf4.NF4Linear)]
    assert len(quantized) == 6 * CFG.n_layer  # every block linear; the tied head stays float
    assert all(p.requires_grad == ("lora_" in n) for n, p in model.named_parameters())
    x, y = _batch()
    batches = iter([(x, y)] * 10)
    losses = gpt.train(model, batches, 10, lr=1e-2)
    assert losses[-1] < losses[0] - 0.1


def test_qlora_saves_the_same_activations_as_lora():
    """NF4 layers dequantize again in backward, so a QLoRA model keeps exactly LoRA's activations
    (a layer that let autograd keep its dequantized weight would add a float copy per layer)."""
    saved = {}
    for quantize in (False, True):
        torch.manual_seed(0)
        model = lora.apply_lora(gpt.GPT(CFG), TARGETS, r=4, alpha=8, quantize=quantize)
        ledger = SavedTensorLedger(exclude=model.parameters())
        with ledger:
            loss = model.loss(*_batch())
        loss.backward()
        saved[quantize] = ledger.total_bytes
    assert saved[True] == saved[False] > 0


def test_memory_footprint_counts_actual_tensors():
    model = lora.apply_lora(gpt.GPT(CFG), TARGETS, r=4, alpha=8)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3)
    x, y = _batch()
    model.loss(x, y).backward()
    opt.step()
    mem = lora.memory_footprint(model, opt)
    n_trainable = sum(p.numel() for p in params)
    assert mem["gradients"] == 4 * n_trainable
    assert mem["optimizer"] == 8 * n_trainable + 4 * len(params)  # m, v and a step counter
    assert mem["weights"] == 4 * sum(p.numel() for p in model.parameters())  # tied head once
    assert mem["total"] == mem["weights"] + mem["gradients"] + mem["optimizer"]
    qmodel = lora.apply_lora(gpt.GPT(CFG), TARGETS, r=4, alpha=8, quantize=True)
    assert lora.memory_footprint(qmodel)["weights"] < 0.6 * mem["weights"]
    assert lora.count_parameters(qmodel)[1] == lora.count_parameters(model)[1]
