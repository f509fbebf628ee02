"""Tests of labs.parallel.zero: ZeRO-0/1/2/3 on emulated ranks against a single process and the formulas."""

from __future__ import annotations

import pytest
import torch

from labs import dist, gpt
from labs.parallel import fsdp, zero
from labs.training import checkpoint as ckpt

CFG = fsdp.TrainConfig(steps=3, batch_size=12, seq_len=16, n_embd=40, n_head=4)


def _psi() -> int:
    return gpt.GPT(CFG.model_config()).num_params()


def _numels() -> list[int]:
    return [p.numel() for p in gpt.GPT(CFG.model_config()).parameters()]


def test_paper_example_7_5b_on_64_ranks():
    gb = [zero.zero_bytes_per_rank(7.5e9, 64, s)["total"] / 1e9 for s in range(4)]
    assert [round(x, 1) for x in gb] == [120.0, 31.4, 16.6, 1.9]
    assert zero.zero_bytes_per_rank(1e9, 8, 2, 4, 4, 8) == {
        "weights": 4e9, "gradients": 0.5e9, "optimizer": 1e9, "total": 5.5e9
    }  # fmt: skip


def test_comm_formula_and_bad_arguments():
    assert zero.zero_comm_bytes_per_rank(100, 4, 1, 1) == 150
    assert zero.zero_comm_bytes_per_rank(100, 4, 3, 1) == 225
    with pytest.raises(ValueError, match="stage"):
        zero.zero_bytes_per_rank(1, 2, 4)
    with pytest.raises(ValueError, match="stage"):
        zero.ZeroTrainer(torch.nn.Linear(2, 2), 5)
    assert zero.padded_numel(10, 4) == 12 and zero.padded_numel(12, 4) == 12


@pytest.fixture(scope="module")
def reference() -> list[float]:
    return fsdp.run_single(CFG)["losses"]


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("world", [2, 4])
def test_stage_matches_single_process_formula_and_trace(stage, world, reference):
    res = fsdp.run_emulated(CFG, world, stage)
    torch.testing.assert_close(res["losses"], reference, rtol=0, atol=2e-6)
    # every tensor here divides by 2 and 4: no padding, the ledger equals the fp32 formula exactly
    assert all(n % world == 0 for n in _numels())
    expect = zero.zero_bytes_per_rank(_psi(), world, stage, 4, 4, 8)
    assert res["ledger"] == {k: int(v) for k, v in expect.items()}
    assert res["peak"] >= res["ledger"]["total"]
    sent = dist.last_trace().bytes_sent()
    per_step = zero.zero_comm_bytes_per_rank(_psi(), world, stage, 4)
    assert sent == [per_step * CFG.steps] * world


@pytest.mark.parametrize("stage", [1, 3])
def test_uneven_world_size_pads(stage, reference):
    """3 ranks do not divide the tensors: each is padded to a multiple of N (documented)."""
    for world in (3,):
        res = fsdp.run_emulated(CFG, world, stage)
        torch.testing.assert_close(res["losses"], reference, rtol=0, atol=2e-6)
        psi_pad = sum(zero.padded_numel(n, world) for n in _numels())
        assert psi_pad > _psi()
        expect = zero.zero_bytes_per_rank(psi_pad, world, stage, 4, 4, 8)
        assert res["ledger"]["optimizer"] == expect["optimizer"]
        assert res["ledger"]["weights"] == expect["weights"]
        per_step = zero.zero_comm_bytes_per_rank(psi_pad, world, stage, 4)
        assert dist.last_trace().bytes_sent() == [round(per_step * CFG.steps)] * world


@pytest.mark.parametrize("fmt", ["full", "shards"])
def test_emulated_resume_is_exact(tmp_path, fmt, reference):
    cfg5 = fsdp.TrainConfig(**{**vars(CFG), "steps": 2, "save_at": [2],
                                     "ckpt_dir": str(tmp_path), "ckpt_format": fmt})  # fmt: skip
    fsdp.run_emulated(cfg5, 2, 3)
    cont = fsdp.TrainConfig(**{**vars(CFG), "ckpt_dir": str(tmp_path), "resume": True})
    res = fsdp.run_emulated(cont, 2, 3)
    assert res["start"] == 2
    torch.testing.assert_close(res["losses"], reference[2:], rtol=0, atol=2e-6)
    if fmt == "shards":
        with pytest.raises(Exception, match="written by 2 ranks, loaded by 4"):
            fsdp.run_emulated(cont, 4, 3)
        with pytest.raises(Exception, match="written by ZeRO-3, this run is ZeRO-1"):
            fsdp.run_emulated(cont, 2, 1)
    else:  # a full checkpoint may be resumed by another world size and another ZeRO stage
        res = fsdp.run_emulated(cont, 4, 1)
        torch.testing.assert_close(res["losses"], reference[2:], rtol=0, atol=2e-6)


def test_resume_into_a_different_model_is_refused(tmp_path):
    cfg = fsdp.TrainConfig(**{**vars(CFG), "steps": 1, "save_at": [1],
                                    "ckpt_dir": str(tmp_path)})  # fmt: skip
    fsdp.run_single(cfg)
    wider = fsdp.TrainConfig(**{**vars(cfg), "n_layer": 3, "resume": True, "steps": 2})
    with pytest.raises(ckpt.CheckpointError, match=r"step_00000001.*n_layer"):
        fsdp.run_single(wider)
    with pytest.raises(Exception, match=r"step_00000001.*n_layer"):
        fsdp.run_emulated(wider, 2, 3)


def test_shards_resume_with_replicated_weights(tmp_path, reference):
    """ZeRO-2 keeps full weights as views of the slices: loading shards must re-gather them."""
    first = fsdp.TrainConfig(**{**vars(CFG), "steps": 1, "save_at": [1],
                                      "ckpt_dir": str(tmp_path), "ckpt_format": "shards"})  # fmt: skip
    fsdp.run_emulated(first, 4, 2)
    cont = fsdp.TrainConfig(**{**vars(CFG), "ckpt_dir": str(tmp_path), "resume": True})
    res = fsdp.run_emulated(cont, 4, 2)
    torch.testing.assert_close(res["losses"], reference[1:], rtol=0, atol=2e-6)
