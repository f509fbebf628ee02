"""Chapter 19-20 modules: on-device limits, the int4 path, request memory, delegation,
clustering, activation-aware low rank and LLM distillation variants."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from labs import gpt
from labs.compress import asvd, cluster, delegate, distill, distill_llm, int4, lowrank, ondevice
from labs.compress import request_memory as rmem

TINY = gpt.GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=32, seed=0)


def test_weight_bytes_and_ceiling():
    assert ondevice.weight_bytes(7_000_000_000, 4, 64) == 3_500_000_000 + 218_750_000
    assert ondevice.weight_bytes(100, 4, 64) == 50 + 4
    assert ondevice.weight_bytes(0, 4, 64) == 0
    assert ondevice.decode_ceiling(100e9, 4e9) == pytest.approx(25.0)
    with pytest.raises(ValueError, match="bytes_per_token"):
        ondevice.decode_ceiling(100e9, 0)
    pi = ondevice.DEVICES[0]
    assert pi.bandwidth == pytest.approx(4267e6 * 4)  # LPDDR4X-4267 on a 32-bit bus
    bws = [d.bandwidth for d in ondevice.DEVICES]
    assert bws == sorted(bws)
    e = ondevice.energy_per_token(1e9, 1e9, 160.0, 0.23)
    assert e["memory"] == pytest.approx(0.16) and e["total"] == pytest.approx(0.16 + 0.23e-3)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int64])
@pytest.mark.parametrize("n", [1, 6, 7])
def test_int4_pack_round_trip(dtype, n):
    q = torch.randint(-8, 8, (3, n), generator=torch.Generator().manual_seed(n)).to(dtype)
    p = int4.pack_int4(q)
    assert p.dtype == torch.uint8 and p.shape == (3, (n + 1) // 2)
    assert torch.equal(int4.unpack_int4(p, n), q.to(torch.int8))
    assert int4.pack_int4(torch.tensor([-8, 7, 1, -1])).tolist() == [0x78, 0xF1]
    with pytest.raises(ValueError, match="-8..7"):
        int4.pack_int4(torch.tensor([8]))


def test_int4_save_load_is_exact(tmp_path):
    model = gpt.GPT(TINY).eval()
    nbytes = int4.save_int4(model, tmp_path / "m.pt", group_size=16)
    loaded = int4.load_int4(tmp_path / "m.pt")
    x = torch.randint(0, 96, (2, 9))
    with torch.no_grad():
        assert torch.equal(loaded(x), int4.to_int4(model, 16)(x))
        assert (loaded(x) - model(x)).abs().max() < 0.1
    assert loaded.lm_head.weight is loaded.tok_emb.weight  # tying survives the round trip
    assert nbytes < 0.5 * sum(p.numel() * 4 for p in model.parameters())
    layer = loaded.blocks[0].mlp.up_proj
    assert isinstance(layer, int4.Int4Linear) and layer.scales.dtype == torch.float16


def test_request_memory_counts_the_kv_cache():
    model = gpt.GPT(TINY).eval()
    r = rmem.request_memory(model, torch.zeros(1, 8, dtype=torch.long), 8)
    assert r["kv_cache"] == 2 * TINY.n_layer * TINY.n_embd * 4 * 16
    assert r["peak_request"] >= r["kv_cache"] and r["activations"] > 0
    assert r["peak_total"] == r["weights"] + r["peak_request"]


def test_partition_and_coverage():
    ops = ["MatMul", "Gelu", "MatMul", "Add", "Gelu"]
    assert delegate.partition(ops, {"MatMul", "Add"}) == [
        ("accelerator", 1),
        ("cpu", 1),
        ("accelerator", 2),
        ("cpu", 1),
    ]
    c = delegate.coverage(ops, {"MatMul", "Add"})
    assert c["partitions"] == 2 and c["transitions"] == 3 and c["unsupported"] == ["Gelu"]
    assert delegate.coverage([], {"MatMul"})["fraction"] == 0.0


def test_huffman_lengths_and_index_bits():
    assert cluster.huffman_lengths([5, 0, 0]) == [1, 0, 0]
    assert cluster.huffman_lengths([1, 1, 2, 4]) == [3, 3, 2, 1]
    assert cluster.huffman_lengths([1, 1, 1, 1]) == [2, 2, 2, 2]
    c = cluster.cluster_model(gpt.GPT(TINY), 4)
    sizes = cluster.index_bits(c)
    assert sizes["entropy"] <= sizes["huffman"] <= sizes["fixed"] == 2 * sizes["weights"]
    trainable = [n for n, p in c.named_parameters() if p.requires_grad]
    assert trainable and all(n.endswith("centroids") for n in trainable)


def test_kmeans_and_centroid_gradient():
    w = torch.tensor([-1.0, -0.9, 0.0, 0.1, 1.0, 1.1])
    c, idx = cluster.kmeans_1d(w, 3)
    assert torch.allclose(c, torch.tensor([-0.95, 0.05, 1.05]))
    lin = nn.Linear(6, 2)
    layer = cluster.ClusteredLinear(lin, 4)
    x = torch.randn(5, 6)
    layer(x).sum().backward()
    w_ref = layer.weight().detach().requires_grad_()
    F.linear(x, w_ref, layer.bias).sum().backward()
    want = torch.zeros(4).index_add_(0, layer.index.reshape(-1).long(), w_ref.grad.reshape(-1))
    assert torch.allclose(layer.centroids.grad, want, atol=1e-6)


def test_whitened_svd_minimises_output_error():
    g = torch.Generator().manual_seed(0)
    lin = nn.Linear(24, 16)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(16, 24, generator=g))
    mix = torch.randn(24, 24, generator=g)
    x = torch.randn(500, 24, generator=g) @ mix * torch.linspace(0.1, 5, 24)  # correlated, skewed
    gram = (x.double().T @ x.double()) / len(x)
    for r in (2, 6, 12):
        plain = lowrank.factorize_linear(lin, r)
        white = asvd.factorize_linear_aware(lin, r, gram)
        diag = asvd.factorize_linear_aware(lin, r, gram.diagonal().sqrt())
        with torch.no_grad():
            ref = lin(x)
            errs = [float((m(x) - ref).norm()) for m in (plain, white, diag)]
        assert errs[1] <= errs[0] + 1e-4 and errs[1] <= errs[2] + 1e-4
        assert sum(p.numel() for p in white.parameters()) == sum(
            p.numel() for p in plain.parameters()
        )
    with pytest.raises(ValueError, match="shape"):
        asvd.factorize_linear_aware(lin, 2, torch.ones(5))


def test_kd_divergence_directions():
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(4, 7, 11, generator=g), torch.randn(4, 7, 11, generator=g)
    fwd = distill_llm.kd_divergence(s, t, "forward")
    ref = distill.distillation_loss(s, t, torch.zeros(4, 7, dtype=torch.long), 1.0, 1.0)
    assert float(fwd) == pytest.approx(float(ref), rel=1e-5)
    rev = distill_llm.kd_divergence(s, t, "reverse")
    ref_rev = F.kl_div(
        F.log_softmax(t.reshape(-1, 11), -1),
        F.log_softmax(s.reshape(-1, 11), -1),
        log_target=True,
        reduction="batchmean",
    )
    assert float(rev) == pytest.approx(float(ref_rev), rel=1e-5)
    assert not math.isclose(float(fwd), float(rev))
    with pytest.raises(ValueError, match="direction"):
        distill_llm.kd_divergence(s, t, "sideways")


def test_teacher_corpus_shape():
    model = gpt.GPT(TINY).eval()
    out = distill_llm.teacher_corpus(model, torch.zeros(3, 4, dtype=torch.long), 5)
    assert out.shape == (3, 9) and out.dtype == torch.long
