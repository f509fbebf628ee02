"""Compression, PEFT and the online softmax create their tensors on the device of their weights.

The trick of ``test_device_placement.py``: the model is built on the CPU explicitly, then each
function runs under ``torch.set_default_device("meta")``, where ``torch.Generator()`` without
``device=`` is refused. A tensor or layer made without ``device=`` (GPTQ's error buffer, a
k-means centroid grid, a pruned head's new ``nn.Linear``) lands on ``meta``: the run fails, or
its result differs from a plain CPU run, or :func:`on_cpu` finds a parameter or buffer of the
returned model away from the CPU. A GPU model needs exactly this: every tensor on its device.

Layers that replace a linear must also keep its dtype: :func:`test_new_layers_keep_the_dtype`
compresses a float64 model, which runs only if every new layer is float64 too.

Calibration ids and batches are built on the CPU, as a data loader does; the library moves them
to the model's device (``ids.to(device)``), the one step a CPU-only machine cannot check.
"""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
from test_device_placement import (
    CPU,
    as_list,
    default_device,
    generators_need_a_device,
    same_on_meta,
)

from labs import gpt
from labs.attention.flash import online_softmax
from labs.compress import (
    asvd,
    cluster,
    distill_llm,
    gptq,
    lowrank,
    measure,
    outliers,
    pruning,
    sparsegpt,
)
from labs.compress import quantize as Q
from labs.peft import lora, nf4

IDS = torch.tensor([[5, 17, 42, 8, 3, 60, 2, 9], [9, 9, 1, 60, 2, 33, 4, 71]], device=CPU)


def tiny(dtype=torch.float32):
    cfg = gpt.GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=32, seed=0)
    return gpt.GPT(cfg).to(CPU, dtype).eval()


@pytest.fixture(scope="module")
def model():
    return tiny()


def on_cpu(model) -> list:
    """The logits of ``model`` on :data:`IDS`, after checking that all its tensors are on the CPU."""
    tensors = itertools.chain(model.named_parameters(), model.named_buffers())
    away = [f"{name} ({t.device})" for name, t in tensors if t.device != CPU]
    assert not away, f"not on the model's device (cpu): {away}"
    with torch.no_grad():
        return as_list(model(IDS))


def test_the_trick_catches_a_layer_made_without_device(model):
    def replace_without_device():
        new = torch.nn.Linear(32, 32)  # the bug the test looks for
        return on_cpu(torch.nn.Sequential(model.tok_emb, new))

    with pytest.raises(AssertionError, match="not on the model's device"):
        same_on_meta(lambda: (torch.manual_seed(0), replace_without_device())[1])


@pytest.mark.parametrize("group_size", [None, 8])
def test_gptq(model, group_size):
    w, x = model.blocks[0].mlp.up_proj.weight.detach(), torch.randn(40, 32, device=CPU)
    same_on_meta(lambda: as_list(gptq.gptq(w, 2 * x.T @ x, 3, group_size, block_size=8)))
    same_on_meta(lambda: on_cpu(gptq.quantize_model(model, IDS, 4, group_size, block_size=8)))


@pytest.mark.parametrize("n, m", [(0, 0), (2, 4)])
def test_sparsegpt(model, n, m):
    def run():
        pruned, masks = sparsegpt.sparsegpt_model(model, IDS, 0.5, n, m, block_size=16)
        return on_cpu(pruned), {k: as_list(v) for k, v in masks.items()}

    same_on_meta(run)


def test_clustering(model):
    w = model.blocks[0].mlp.down_proj.weight
    same_on_meta(lambda: [as_list(t) for t in cluster.kmeans_1d(w, 8, iters=5)])
    same_on_meta(lambda: on_cpu(cluster.cluster_model(model, 8, iters=5)))


@pytest.mark.parametrize("calibration", ["percentile", "mse"])
def test_quantize(model, calibration):
    w = model.blocks[0].attn.q_proj.weight.detach()

    def run():
        qt = Q.quantize(w, 4, "affine", "group", 8, calibration)
        return as_list(qt.dequantize()), as_list(qt.zero_point)

    same_on_meta(run)
    same_on_meta(lambda: on_cpu(Q.quantize_weights(model, 4, calibration=calibration)))


def test_llm_int8_and_awq(model):
    x = torch.randn(6, 32, generator=torch.Generator(CPU).manual_seed(0), device=CPU)
    x[:, [3, 17]] *= 20  # two outlier channels
    w = model.blocks[0].attn.q_proj.weight.detach()
    same_on_meta(lambda: [as_list(t) for t in outliers.llm_int8_linear(x, w)])
    stats = outliers.input_absmean(model, IDS, measure.linear_names(model))
    for args in [("keep", "random"), ("scale", "activation")]:
        same_on_meta(lambda args=args: on_cpu(outliers.awq_quantize(model, stats, 4, 0.1, *args)))


@pytest.mark.parametrize("method", ["rms", "whiten"])
def test_low_rank(model, method):
    same_on_meta(lambda: on_cpu(lowrank.factorize_model(model, rank=4)))
    same_on_meta(lambda: on_cpu(asvd.factorize_model_aware(model, 4, IDS, method)))


def test_structured_pruning(model):
    same_on_meta(lambda: on_cpu(pruning.prune_mlp_channels(model, 0.5)))
    same_on_meta(lambda: on_cpu(pruning.prune_heads(model, {0: [1]})))
    batches = [(IDS[:, :-1], IDS[:, 1:])]
    same_on_meta(lambda: as_list(pruning.head_importance(model, batches)))


def test_latency_and_teacher_corpus(model):
    with default_device("meta"), generators_need_a_device():
        assert measure.latency_ms(model, batch=1, tokens=8, repeats=1) > 0
    same_on_meta(lambda: as_list(distill_llm.teacher_corpus(model, IDS[:, :3], 5, seed=1)))


@pytest.mark.parametrize("absmax_code", ["dynamic", "linear", "fp8"])
def test_nf4_and_qlora(model, absmax_code):
    w = model.blocks[0].mlp.up_proj.weight.detach()
    same_on_meta(lambda: as_list(nf4.nf4_quantize(w, absmax_code=absmax_code).dequantize()))

    def qlora():
        m = lora.apply_lora(copy.deepcopy(model), ["q_proj", "v_proj"], r=4, quantize=True)
        gen = torch.Generator(CPU).manual_seed(1)
        for p in m.parameters():
            if p.requires_grad:
                p.data.normal_(generator=gen)  # lora_B starts at 0: make the adapters count
        return on_cpu(m)

    same_on_meta(qlora)


def test_online_softmax():
    x = torch.randn(11, generator=torch.Generator(CPU).manual_seed(0), device=CPU)
    same_on_meta(lambda: as_list(online_softmax(x, 4)))


@pytest.mark.parametrize(
    "compress",
    [
        lambda m: lowrank.factorize_model(m, rank=4),
        lambda m: asvd.factorize_model_aware(m, 4, IDS, "whiten"),
        lambda m: pruning.prune_mlp_channels(m, 0.5),
        lambda m: pruning.prune_heads(m, {0: [0]}),
        lambda m: outliers.awq_quantize(
            m, outliers.input_absmean(m, IDS, ["blocks.0.mlp.up_proj"])
        ),
    ],
    ids=["lowrank", "asvd", "mlp_channels", "heads", "awq"],
)
def test_new_layers_keep_the_dtype(compress):
    out = compress(tiny(torch.float64))
    dtypes = {p.dtype for p in out.parameters()}
    assert dtypes == {torch.float64}, f"the compressed float64 model holds {dtypes}"
    assert out(IDS).dtype == torch.float64


def test_wanda_awq_int4_int8_sharing_and_distillation(model):
    """The rest of the compression code: Wanda, AWQ's search, int4 and int8 layers, shared
    blocks, perplexity and a distillation step all build their tensors where the weights are."""
    import itertools

    from labs.compress import awq, distill, int4, int8, sharing, wanda

    two = gpt.GPT(gpt.GPTConfig(block_size=16, n_layer=2, n_head=2, n_embd=32, seed=0)).to(CPU)
    up = model.blocks[0].mlp.up_proj
    x = torch.randn(5, 32, generator=torch.Generator(CPU).manual_seed(0), device=CPU)
    same_on_meta(lambda: on_cpu(wanda.wanda_model(model, IDS, 0.5, 2, 4)[0]))
    same_on_meta(lambda: on_cpu(awq.awq_model(model, IDS, 4, 8, grid=4)[0]))
    same_on_meta(lambda: on_cpu(int4.to_int4(model, 8)))
    same_on_meta(lambda: as_list(int8.Int8Linear(up)(x)))
    same_on_meta(lambda: as_list(int8.int8_linear(x, up.weight.detach())))
    same_on_meta(lambda: on_cpu(sharing.share_blocks(two.eval())))
    same_on_meta(lambda: measure.perplexity(model, IDS.reshape(-1), window=8))

    def distill_one_step():
        torch.manual_seed(0)
        batches = itertools.repeat((IDS[:, :-1], IDS[:, 1:]))
        return distill.distill(copy.deepcopy(model), model, batches, 1)

    same_on_meta(distill_one_step)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward_and_backward(causal):
    from labs.attention import flash

    gen = torch.Generator(CPU).manual_seed(0)
    q, k, v = (torch.randn(1, 2, 37, 16, generator=gen, device=CPU) for _ in range(3))
    same_on_meta(
        lambda: as_list(flash.flash_attention(q, k, v, causal=causal, block_q=8, block_k=16))
    )
    same_on_meta(lambda: as_list(flash.naive_attention(q, k, v, causal=causal)))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]

    def backward():
        o = flash.flash_attention(*leaves, causal=causal, block_q=8, block_k=16)
        return [as_list(g) for g in torch.autograd.grad(o.sum(), leaves)]

    same_on_meta(backward)
