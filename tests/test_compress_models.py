"""Tests of labs.compress.lowrank, distill, sharing and export (ONNX Runtime cross-checks)."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from labs import data, gpt
from labs.compress import distill, export, int8, lowrank, measure, sharing
from labs.compress import quantize as Q


@pytest.fixture(scope="module")
def small_gpt():
    return gpt.GPT(gpt.GPTConfig(n_layer=2, n_head=4, n_embd=32, block_size=16, seed=5)).eval()


def test_lowrank_error_is_eckart_young():
    w = torch.randn(40, 24, generator=torch.Generator().manual_seed(0))
    for r in (1, 5, 24):
        lin = nn.Linear(24, 40)
        with torch.no_grad():
            lin.weight.copy_(w)
        f = lowrank.factorize_linear(lin, r)
        approx = (f[1].weight @ f[0].weight).detach()
        measured = float((w - approx).norm() / w.norm())
        assert lowrank.lowrank_error(w, r) == pytest.approx(measured, abs=1e-5)
        x = torch.randn(3, 24)
        torch.testing.assert_close(f(x), x @ approx.T + lin.bias, rtol=1e-5, atol=1e-5)
        # no rank-r matrix does better: compare with torch.svd_lowrank's rank-r approximation
        u, s, v = torch.svd_lowrank(w, q=r, niter=4)
        assert measured <= float((w - u @ torch.diag(s) @ v.T).norm() / w.norm()) + 1e-5
    assert lowrank.lowrank_error(w, 24) == pytest.approx(0.0, abs=1e-6)


def test_full_rank_model_is_exact(small_gpt):
    full = lowrank.factorize_model(small_gpt, ratio=1.0)
    x = torch.randint(0, 96, (2, 16))
    torch.testing.assert_close(full(x), small_gpt(x), rtol=1e-4, atol=1e-4)
    assert lowrank.break_even_rank(96, 96) == 48
    smaller = lowrank.factorize_model(small_gpt, rank=4)
    assert smaller.num_params() < small_gpt.num_params()


@pytest.mark.parametrize("bad", [0, 33, 2.5])
def test_bad_rank(bad):
    with pytest.raises(ValueError, match="rank"):
        lowrank.factorize_linear(nn.Linear(32, 40), bad)


def test_factorize_model_arguments(small_gpt):
    with pytest.raises(ValueError, match="exactly one"):
        lowrank.factorize_model(small_gpt)
    with pytest.raises(ValueError, match="ratio"):
        lowrank.factorize_model(small_gpt, ratio=1.5)


def test_distillation_loss_matches_formula():
    g = torch.Generator().manual_seed(1)
    s, t = torch.randn(2, 5, 11, generator=g), torch.randn(2, 5, 11, generator=g)
    y = torch.randint(0, 11, (2, 5), generator=g)
    T, a = 3.0, 0.7
    ps, pt = F.softmax(s / T, -1).reshape(-1, 11), F.softmax(t / T, -1).reshape(-1, 11)
    kl = (pt * (pt.log() - ps.log())).sum(-1).mean()
    ce = F.cross_entropy(s.reshape(-1, 11), y.reshape(-1))
    expected = a * T * T * kl + (1 - a) * ce
    got = distill.distillation_loss(s, t, y, T, a)
    assert float(got) == pytest.approx(float(expected), rel=1e-5)
    assert float(distill.distillation_loss(s, s, y, 2.0, 1.0)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        distill.distillation_loss(s, t, y, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        distill.distillation_loss(s, t, y, 1.0, 1.5)


def test_distill_trains_student_without_touching_teacher(small_gpt):
    teacher = copy.deepcopy(small_gpt)
    before = [p.clone() for p in teacher.parameters()]
    student = gpt.GPT(gpt.GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=16, seed=2))
    ids = data.CharTokenizer().encode(data.load_corpus()[:2000])
    losses = distill.distill(student, teacher, data.batches(ids, 4, 16), steps=5)
    assert len(losses) == 5 and all(l == l for l in losses)  # noqa: E741 - finite
    assert all(torch.equal(a, b) for a, b in zip(before, teacher.parameters()))


def test_share_blocks(small_gpt):
    shared = sharing.share_blocks(small_gpt)
    assert shared.blocks[0] is shared.blocks[1]
    assert sharing.unique_bytes(shared) < sharing.unique_bytes(small_gpt)
    block = sum(p.numel() for p in small_gpt.blocks[1].parameters())
    assert sharing.unique_bytes(small_gpt) - sharing.unique_bytes(shared) == 4 * block
    assert measure.linear_flops(shared) == measure.linear_flops(small_gpt)
    with pytest.raises(ValueError, match="two blocks"):
        sharing.share_blocks(gpt.GPT(gpt.GPTConfig(n_layer=1, n_embd=16, n_head=2, block_size=8)))


def test_onnx_export_matches_torch(small_gpt, tmp_path):
    path = export.to_onnx(small_gpt, tmp_path / "m.onnx", seq_len=16)
    ort_model = export.OrtModel(path)
    for shape in [(1, 16), (3, 7)]:
        x = torch.randint(0, 96, shape, generator=torch.Generator().manual_seed(shape[1]))
        torch.testing.assert_close(ort_model(x), small_gpt(x).detach(), rtol=1e-4, atol=1e-4)
    assert ort_model.nbytes == path.stat().st_size
    q = export.OrtModel(export.ort_int8(path, tmp_path / "q.onnx"))
    assert q.nbytes < 0.7 * ort_model.nbytes  # linear weights int8; embeddings stay fp32
    x = torch.randint(0, 96, (2, 16))
    ref = small_gpt(x).detach()
    assert float((q(x) - ref).norm() / ref.norm()) < 0.05


def test_onnx_dynamo_exporter_agrees(small_gpt, tmp_path):
    path = export.to_onnx(small_gpt, tmp_path / "d.onnx", seq_len=16, dynamo=True)
    x = torch.randint(0, 96, (2, 9))
    torch.testing.assert_close(
        export.OrtModel(path)(x), small_gpt(x).detach(), rtol=1e-4, atol=1e-4
    )


def test_export_refuses_quantized_layers(small_gpt, tmp_path):
    with pytest.raises(ValueError, match="ONNX export does not support"):
        export.to_onnx(int8.dynamic_int8(small_gpt), tmp_path / "x.onnx")
    with pytest.raises(ValueError, match="QuantLinear"):
        export.to_onnx(Q.quantize_weights(small_gpt, 4), tmp_path / "y.onnx")
