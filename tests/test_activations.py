"""Tests of labs.training.activations: saved-tensor accounting, checkpointing, the formulas, loss scaling."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from labs import gpt
from labs.training import activations as A


def test_ledger_counts_saved_storages_and_skips_parameters():
    torch.manual_seed(0)
    lin = nn.Linear(8, 16)
    x = torch.randn(5, 8, requires_grad=True)
    ledger = A.SavedTensorLedger(exclude=lin.parameters())
    with ledger:
        y = torch.nn.functional.gelu(lin(x))
    # linear saves its input (5x8), gelu saves its input (5x16); the weight is not an activation
    assert ledger.total_bytes == 4 * (5 * 8 + 5 * 16)
    assert [r[0] for r in ledger.records] == [(5, 8), (5, 16)]
    y.sum().backward()  # the hooks left the graph intact
    assert x.grad is not None


def test_block_activations_match_the_fp32_no_dropout_flash_formula():
    """Per block: 16 sbh values (Korthikanti's 34 sbh fp16 bytes without the 2 sbh of dropout masks,
    halved to values) + layer-norm statistics 2 x 2bs + the attention log-sum-exp (abs)."""
    cfg = gpt.GPTConfig()
    model = gpt.GPT(cfg)
    b, s, h, a = 3, 20, cfg.n_embd, cfg.n_head
    x = torch.randn(b, s, h, requires_grad=True)
    ledger = A.SavedTensorLedger(exclude=model.parameters())
    with ledger:
        model.blocks[0](x)
    assert ledger.total_bytes == 4 * (16 * s * b * h + 4 * b * s + a * b * s)


def test_korthikanti_formulas():
    s, b, h, a = 2048, 1, 12288, 96
    sbh = s * b * h
    assert A.korthikanti_layer_bytes(s, b, h, a) == sbh * (34 + 5 * a * s / h)
    assert A.korthikanti_layer_bytes(s, b, h, a, t=8) == sbh * (10 + 24 / 8 + 5 * a * s / (h * 8))
    sp = A.korthikanti_layer_bytes(s, b, h, a, t=8, sequence_parallel=True)
    assert sp == sbh * (34 / 8 + 5 * a * s / (h * 8))
    assert A.korthikanti_layer_bytes(s, b, h, a, recompute="selective") == 34 * sbh
    assert A.korthikanti_layer_bytes(s, b, h, a, recompute="full") == 2 * sbh
    with pytest.raises(ValueError, match="recompute"):
        A.korthikanti_layer_bytes(s, b, h, a, recompute="half")
    with pytest.raises(ValueError, match="positive"):
        A.korthikanti_layer_bytes(0, b, h, a)


def test_checkpoint_blocks_same_gradients_fewer_saved_bytes():
    cfg = gpt.GPTConfig(n_layer=2)
    idx = torch.randint(0, cfg.vocab_size, (2, 32), generator=torch.Generator().manual_seed(1))
    grads, saved = [], []
    for use_ckpt in (False, True):
        model = gpt.GPT(cfg)
        ledger = A.SavedTensorLedger(exclude=model.parameters())
        if use_ckpt:
            with A.checkpoint_blocks(model.blocks), ledger:
                loss = model.loss(idx, idx)
        else:
            with ledger:
                loss = model.loss(idx, idx)
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        saved.append(ledger.total_bytes)
        assert "forward" not in vars(model.blocks[0])  # the original forward is back
    for g0, g1 in zip(*grads):
        torch.testing.assert_close(g0, g1, rtol=0, atol=1e-6)
    assert saved[1] < saved[0] / 2


def test_state_bytes_adamw():
    model = nn.Linear(10, 4)
    opt = torch.optim.AdamW(model.parameters())
    before = A.state_bytes(model, opt)
    assert before == {"weights": 4 * 44, "gradients": 0, "optimizer": 0}
    model(torch.randn(3, 10)).sum().backward()
    opt.step()
    after = A.state_bytes(model, opt)
    # exp_avg + exp_avg_sq in fp32, plus one 4-byte step counter per parameter tensor
    assert after == {"weights": 176, "gradients": 176, "optimizer": 2 * 176 + 2 * 4}


def test_fp16_cast_report():
    x = torch.tensor([1e-9, 1e-6, 1.0, 1e5, 0.0])
    rep = A.fp16_cast_report(x)
    assert rep["underflow"] == pytest.approx(1 / 4)
    assert rep["overflow"] == pytest.approx(1 / 4)
    assert rep["subnormal"] == pytest.approx(1 / 4)


def test_loss_scaler_follows_torch_grad_scaler():
    """Same scale sequence and skipped steps as torch.amp.GradScaler for scripted inf steps."""
    pattern = [False, False, True, False, False, False, True, True, False, False]
    w_ours = nn.Parameter(torch.ones(3))
    w_ref = nn.Parameter(torch.ones(3))
    opt_ours = torch.optim.SGD([w_ours], lr=0.1)
    opt_ref = torch.optim.SGD([w_ref], lr=0.1)
    ours = A.LossScaler(init_scale=1024.0, growth_interval=2)
    ref = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    for bad in pattern:
        for w, opt, scaler in ((w_ours, opt_ours, ours), (w_ref, opt_ref, ref)):
            opt.zero_grad()
            loss = (w * (float("inf") if bad else 1.0)).sum()
            scaler.scale(loss).backward()
            if scaler is ours:
                if ours.unscale_([w]):
                    opt.step()
                ours.update()
            else:
                ref.step(opt)
                ref.update()
        assert ours.scale_value == ref.get_scale()
        torch.testing.assert_close(w_ours.detach(), w_ref.detach())
    assert ours.skipped_steps == sum(pattern)


def test_loss_scaler_rescues_small_fp16_gradients():
    g = torch.full((100,), 1e-8)  # below fp16's smallest subnormal
    assert A.fp16_cast_report(g)["underflow"] == 1.0
    assert A.fp16_cast_report(g * 2.0**16)["underflow"] == 0.0


def test_loss_scaler_rejects_bad_arguments():
    with pytest.raises(ValueError, match="growth_factor"):
        A.LossScaler(growth_factor=1.0)
    with pytest.raises(RuntimeError, match="unscale_"):
        A.LossScaler().update()
