"""Tests of labs.compress.pruning (cross-checked with torch.nn.utils.prune) and labs.compress.measure."""

import copy
import math
import time

import pytest
import torch
from torch.nn.utils import prune

from labs import gpt
from labs.compress import calibrate, measure, sparsegpt, wanda
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


def test_compare_times_thread_time_skips_time_off_the_cpu():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        # a sleep is wall-clock time in which the thread uses no CPU: thread_time does not count it
        got = measure.compare_times({"sleep": lambda: time.sleep(0.05)}, 2, thread_time=True)
        assert got["sleep"] < 0.02
        assert measure.compare_times({"sleep": lambda: time.sleep(0.05)}, 2)["sleep"] >= 0.05
    finally:
        torch.set_num_threads(threads)


# --- Wanda, SparseGPT and head importance -------------------------------------------------


def _layer(out=16, inp=32, tokens=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    mix = torch.eye(inp) + 0.3 * torch.randn(inp, inp, generator=g)  # correlated inputs
    x = torch.randn(tokens, inp, generator=g) @ mix
    x[:, [2, inp // 3]] *= 10.0  # loud inputs, like an LLM outlier features
    return torch.randn(out, inp, generator=g), x


def test_wanda_compares_within_each_output_row():
    w, x = _layer()
    mask = wanda.wanda_mask(w, x, 0.5)
    assert mask.dtype == torch.bool
    assert (mask.sum(dim=1) == 16).all()  # every row keeps exactly half
    score = w.abs() * x.norm(dim=0)
    for r in range(w.shape[0]):  # the kept scores of a row are its largest
        assert score[r][mask[r]].min() >= score[r][~mask[r]].max()
    assert mask[:, [2, 10]].float().mean() > 0.8  # most of the loud inputs' weights survive


def test_wanda_uses_the_l2_norm_not_its_square_or_the_mean():
    w = torch.tensor([[1.0, 3.0]])
    x = torch.tensor([[4.0, 2.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])  # norms 4, 2
    # |w| * norm = 4 vs 6 keeps input 1; |w| * norm^2 (16 vs 12) would keep input 0
    assert wanda.wanda_mask(w, x, 0.5).tolist() == [[False, True]]
    x2 = torch.tensor([[3.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])  # norms 3, 2; means .75, 1
    w2 = torch.tensor([[1.0, 1.3]])  # 3 vs 2.6 keeps input 0; the mean (0.75 vs 1.3) keeps 1
    assert wanda.wanda_mask(w2, x2, 0.5).tolist() == [[True, False]]


def test_wanda_is_invariant_to_rescaling_an_input_and_its_column():
    w, x = _layer()
    s = torch.ones(32)
    s[[4, 7]] = 20.0
    torch.testing.assert_close(wanda.wanda_scores(w / s, x * s), wanda.wanda_scores(w, x))
    assert not torch.equal(
        P.magnitude_masks(_lin(w / s), 0.5)["0"], P.magnitude_masks(_lin(w), 0.5)["0"]
    )


def _lin(w):
    lin = torch.nn.Sequential(torch.nn.Linear(w.shape[1], w.shape[0], bias=False))
    with torch.no_grad():
        lin[0].weight.copy_(w)
    return lin


def test_wanda_nm_and_errors():
    w, x = _layer()
    mask = wanda.wanda_mask(w, x, n=2, m=4)
    assert (mask.view(-1, 4).sum(1) == 2).all()
    with pytest.raises(ValueError, match="m"):
        wanda.wanda_mask(w, x, n=2, m=5)
    with pytest.raises(ValueError, match="sparsity"):
        wanda.wanda_mask(w, x, 1.0)
    with pytest.raises(ValueError, match="wanda_scores"):
        wanda.wanda_scores(w, x[:, :5])


def test_sparsegpt_masks_and_update_beat_plain_pruning():
    w, x = _layer(seed=1)
    h = calibrate.hessian(x)
    pruned, mask = sparsegpt.sparsegpt(w, h, 0.5, block_size=16)
    assert mask.dtype == torch.bool and mask.float().mean() == pytest.approx(0.5)
    assert (pruned[~mask] == 0).all()
    err = float((x @ (pruned - w).T).norm())
    same_mask_no_update = float((x @ (w * mask - w).T).norm())
    wanda_err = float((x @ (w * wanda.wanda_mask(w, x, 0.5) - w).T).norm())
    assert err < 0.9 * same_mask_no_update and err < wanda_err
    p24, m24 = sparsegpt.sparsegpt(w, h, n=2, m=4)
    assert (m24.view(-1, 4).sum(1) == 2).all() and (p24[~m24] == 0).all()


def test_sparsegpt_nm_does_not_depend_on_the_block_size():
    w, x = _layer(seed=2)
    h = calibrate.hessian(x)
    a, ma = sparsegpt.sparsegpt(w.double(), h, n=2, m=4, block_size=4)
    b, mb = sparsegpt.sparsegpt(w.double(), h, n=2, m=4, block_size=32)
    assert torch.equal(ma, mb)
    torch.testing.assert_close(a, b)


def test_sparsegpt_update_is_the_least_squares_fit():
    """Pruning one column, the OBS update gives the other weights their least-squares optimum."""
    w, x = _layer(out=4, inp=8, tokens=50, seed=3)
    w[:, 0] = 1e-3  # column 0 is the cheapest to remove, and the first one processed
    x, w = x.double(), w.double()
    pruned, mask = sparsegpt.sparsegpt(w, calibrate.hessian(x), 1 / 8, damp=0.0)
    assert mask[:, 0].sum() == 0 and mask[:, 1:].all()
    best = torch.linalg.lstsq(x[:, 1:], x @ w.T).solution.T  # min ||X[:, 1:] p - X w||
    torch.testing.assert_close(pruned[:, 1:], best)


def test_sparsegpt_errors():
    w, x = _layer()
    h = calibrate.hessian(x)
    with pytest.raises(ValueError, match="multiples of m"):
        sparsegpt.sparsegpt(w, h, n=2, m=5)
    with pytest.raises(ValueError, match="sparsity"):
        sparsegpt.sparsegpt(w, h, 1.5)
    with pytest.raises(ValueError, match="Hessian"):
        sparsegpt.sparsegpt(w, h[:3, :3])


def test_model_level_pruners_give_masks_that_fine_tuning_keeps(small_gpt):
    ids = torch.randint(0, 96, (4, 16), generator=torch.Generator().manual_seed(0))
    for fn in (wanda.wanda_model, sparsegpt.sparsegpt_model):
        pruned, masks = fn(small_gpt, ids, 0.5)
        assert set(masks) == set(measure.linear_names(small_gpt))
        assert P.sparsity(pruned) == pytest.approx(0.5, abs=0.01)
        P.apply_masks(pruned, masks)
        assert P.sparsity(pruned) == pytest.approx(0.5, abs=0.01)


def test_head_importance_and_heads_to_keep(small_gpt):
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 96, (2, 16), generator=g),) * 2 for _ in range(2)]
    imp = P.head_importance(small_gpt, batches)
    assert imp.shape == (2, 4) and (imp >= 0).all() and imp.sum() > 0
    x = batches[0][0]
    torch.testing.assert_close(small_gpt(x), small_gpt(x))  # the gates' hooks are gone
    keep = P.heads_to_keep(torch.tensor([[0.1, 0.5, 0.2, 0.9], [0.3, 0.05, 0.8, 0.7]]), 3)
    assert keep == {0: [1, 3], 1: [0, 2, 3]}
    keep = P.heads_to_keep(torch.tensor([[0.1, 0.2], [5.0, 6.0]]), 2)
    assert keep == {0: [1], 1: [1]}  # each block keeps its best head
    with pytest.raises(ValueError, match="n_prune"):
        P.heads_to_keep(imp, 7)
