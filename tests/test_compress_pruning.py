"""Tests of labs.compress.pruning (cross-checked with torch.nn.utils.prune) and labs.compress.measure."""

import copy
import math

import pytest
import torch
from torch.nn.utils import prune

from labs import gpt
from labs.compress import measure
from labs.compress import pruning as P


@pytest.fixture(scope="module")
def small_gpt():
    return gpt.GPT(gpt.GPTConfig(n_layer=2, n_head=4, n_embd=32, block_size=16, seed=3)).eval()


@pytest.mark.parametrize("s", [0.0, 0.25, 0.5, 0.9])
def test_layer_masks_match_torch(small_gpt, s):
    names = measure.linear_names(small_gpt)
    masks = P.magnitude_masks(small_gpt, s)
    ref = copy.deepcopy(small_gpt)
    for n in names:
        prune.l1_unstructured(ref.get_submodule(n), "weight", amount=s)
        assert torch.equal(masks[n], ref.get_submodule(n).weight_mask.bool())


@pytest.mark.parametrize("s", [0.3, 0.7])
def test_global_masks_match_torch(small_gpt, s):
    names = measure.linear_names(small_gpt)
    masks = P.magnitude_masks(small_gpt, s, scope="global")
    ref = copy.deepcopy(small_gpt)
    prune.global_unstructured(
        [(ref.get_submodule(n), "weight") for n in names],
        pruning_method=prune.L1Unstructured,
        amount=s,
    )
    for n in names:
        assert torch.equal(masks[n], ref.get_submodule(n).weight_mask.bool())


@pytest.mark.parametrize("bad", [1.0, -0.1, 2, "half"])
def test_bad_sparsity(small_gpt, bad):
    with pytest.raises(ValueError, match="sparsity"):
        P.magnitude_masks(small_gpt, bad)
    with pytest.raises(ValueError, match="sparsity"):
        P.prune_mlp_channels(small_gpt, bad)


def test_bad_scope(small_gpt):
    with pytest.raises(ValueError, match="scope"):
        P.magnitude_masks(small_gpt, 0.5, scope="block")


def test_apply_masks_keeps_zeros_through_training(small_gpt):
    m = copy.deepcopy(small_gpt)
    P.apply_masks(m, P.magnitude_masks(m, 0.5))
    x = torch.randint(0, 96, (4, 16))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        m.loss(x, x).backward()
        opt.step()
    assert P.sparsity(m) == pytest.approx(0.5, abs=1e-3)
    P.apply_masks(m, P.magnitude_masks(m, 0.6), permanent=True)
    assert not prune.is_pruned(m)
    assert P.sparsity(m) == pytest.approx(0.6, abs=1e-3)
    with pytest.raises(ValueError, match="shape"):
        P.apply_masks(m, {"blocks.0.mlp.up_proj": torch.ones(3, 3, dtype=torch.bool)})


def test_nm_mask():
    w = torch.randn(8, 32, generator=torch.Generator().manual_seed(0))
    mask = P.nm_mask(w)
    assert (mask.view(-1, 4).sum(1) == 2).all()
    kept = (w.abs() * mask).view(-1, 4)
    dropped = (w.abs() * ~mask).view(-1, 4)
    assert (kept.max(1).values >= dropped.max(1).values).all()
    assert (P.nm_mask(w, 1, 8).view(-1, 8).sum(1) == 1).all()
    with pytest.raises(ValueError, match="multiple of m=4"):
        P.nm_mask(torch.ones(4, 6))
    with pytest.raises(ValueError, match="0 < n < m"):
        P.nm_mask(w, 4, 4)


def test_sensitivity_shape(small_gpt):
    out = P.sensitivity(
        small_gpt,
        [0.0, 0.9],
        lambda m: float(m.blocks[0].mlp.up_proj.weight.detach().abs().sum()),
        names=["blocks.0.mlp.up_proj", "blocks.1.attn.q_proj"],
    )
    assert list(out) == ["blocks.0.mlp.up_proj", "blocks.1.attn.q_proj"]
    assert out["blocks.0.mlp.up_proj"][1] < out["blocks.0.mlp.up_proj"][0]
    assert out["blocks.1.attn.q_proj"][0] == out["blocks.1.attn.q_proj"][1]


def test_mlp_channel_pruning_equals_masking_channels(small_gpt):
    pruned = P.prune_mlp_channels(small_gpt, 0.5)
    assert pruned.blocks[0].mlp.up_proj.out_features == 64
    masked = copy.deepcopy(small_gpt)
    with torch.no_grad():
        for blk in masked.blocks:
            up, down = blk.mlp.up_proj, blk.mlp.down_proj
            score = up.weight.norm(dim=1) * down.weight.norm(dim=0)
            drop = score.topk(64, largest=False).indices
            up.weight[drop] = 0
            up.bias[drop] = 0
    x = torch.randint(0, 96, (2, 16))
    torch.testing.assert_close(pruned(x), masked(x), rtol=1e-5, atol=1e-5)
    assert pruned.num_params() < small_gpt.num_params()


def test_head_pruning_equals_zeroed_heads(small_gpt):
    pruned = P.prune_heads(small_gpt, {0: [1, 3]})
    masked = copy.deepcopy(small_gpt)
    with torch.no_grad():
        attn = masked.blocks[0].attn
        for h in (0, 2):
            attn.o_proj.weight[:, h * 8 : (h + 1) * 8] = 0  # head_dim = 32 / 4
    x = torch.randint(0, 96, (2, 16))
    torch.testing.assert_close(pruned(x), masked(x), rtol=1e-5, atol=1e-5)
    full = P.prune_heads(small_gpt, {0: [0, 1, 2, 3], 1: [0, 1, 2, 3]})
    torch.testing.assert_close(full(x), small_gpt(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="heads"):
        P.prune_heads(small_gpt, {0: []})
    with pytest.raises(ValueError, match="heads"):
        P.prune_heads(small_gpt, {0: [4]})


def test_measure_helpers(small_gpt):
    zero = copy.deepcopy(small_gpt)
    with torch.no_grad():
        for p in zero.parameters():
            p.zero_()
    ids64 = torch.arange(100) % 96
    assert measure.perplexity(zero, ids64, window=16) == pytest.approx(96.0, rel=1e-4)  # uniform
    ids = torch.arange(40) % 96
    assert math.isfinite(measure.perplexity(small_gpt, ids, window=16))
    with pytest.raises(ValueError, match="window"):
        measure.perplexity(small_gpt, ids[:5], window=16)
    n = small_gpt.num_params()  # the tied embedding and head are saved once
    assert 4 * n < measure.file_bytes(small_gpt) < 4 * n + 20_000
    assert measure.latency_ms(small_gpt, 1, 8, repeats=1) > 0
    assert "lm_head" not in measure.linear_names(small_gpt)
    assert "lm_head" in measure.linear_names(small_gpt, include_head=True)


def test_compare_times_runs_round_robin():
    calls = []
    out = measure.compare_times({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3)
    assert calls == ["a", "b"] * 4  # one warm-up call each, then 3 rounds
    assert set(out) == {"a", "b"} and all(v >= 0 for v in out.values())
