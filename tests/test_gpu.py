"""On a CUDA GPU: the device helper, the probes, Triton against SDPA, the quantized kernels.

Every test here is marked ``gpu``: on a machine without CUDA each is skipped with one line
(tests/conftest.py). ``bash tools/gpu-check.sh`` runs them on a GPU and reports each one.
Values are compared, never times: a measured time only has to be a positive number.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import labs
from labs.basics import device as D
from labs.basics import flops
from labs.systems import gpu_probe, roofline

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def dev(request):
    torch.manual_seed(0)
    return labs.device()


def test_the_helper_picks_cuda(dev, monkeypatch):
    monkeypatch.delenv("LABS_DEVICE", raising=False)
    assert labs.device().type == "cuda" and dev.type == "cuda"
    assert torch.cuda.get_device_name(dev) in D.describe(dev)
    cc = torch.cuda.get_device_capability(dev)
    ampere = cc >= (8, 0)
    assert (D.bf16(dev) is None) == ampere and (D.tf32(dev) is None) == ampere
    assert D.int_mm(dev) is None, D.int_mm(dev)
    if ampere:
        assert D.semi_structured_sparsity(dev) is None, D.semi_structured_sparsity(dev)
        assert D.int4_weight_only(dev) is None, D.int4_weight_only(dev)
    assert D.triton_gpu(dev) is None, D.triton_gpu(dev)
    assert D.nccl(1) is None, D.nccl(1)


def test_timer_waits_for_the_gpu(dev):
    """CUDA events measure the kernel, not its launch: a sleep of ~10M cycles takes > 1 ms."""
    seconds = flops.time_fn(lambda: torch.cuda._sleep(10_000_000), warmup=1, repeats=3, device=dev)
    assert seconds > 1e-3
    best = roofline.compare_times({"sleep": lambda: torch.cuda._sleep(10_000_000)}, 2, dev)
    assert best["sleep"] > 1e-3


def test_peak_memory_of_the_named_device(dev):
    peak = roofline.peak_memory_bytes(lambda: torch.empty(2**20, device=dev), dev)
    assert peak >= 4 * 2**20


def test_probes(dev):
    props = torch.cuda.get_device_properties(dev)
    limits = gpu_probe.sm_limits(dev)
    assert limits.max_warps * limits.warp_size == props.max_threads_per_multi_processor
    bw = gpu_probe.copy_sweep([2**16, 2**26], dev, repeats=2)
    assert all(b > 0 for b in bw)
    peaks = gpu_probe.matmul_peaks(dev, sizes=(1024,), repeats=2)
    assert isinstance(peaks["float32"], float) and isinstance(peaks["float16"], float)
    occ = gpu_probe.copy_kernel_occupancy(dev, nbytes=2**24, blocks_per_sm=(1, 4))
    assert 0 < occ["occupancy"] <= 1 and occ["registers"] > 0
    assert len(occ["bandwidth"]) == len(occ["blocks"]) and min(occ["bandwidth"]) > 0


def _reference(q, k, v, causal):
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device).triu(1),
                          float("-inf"))  # fmt: skip
    return torch.softmax(s, -1) @ v


def _rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_triton_attention_against_sdpa(dev, dtype, causal):
    """Forward and backward of the Triton kernels are as close to float64 as SDPA's (x2)."""
    from labs.attention.triton_fwd import triton_attention

    if dtype == torch.bfloat16 and (reason := D.bf16(dev)):
        pytest.skip(reason)
    gen = torch.Generator(device=dev).manual_seed(0)
    q, k, v = (torch.randn(2, 4, 256, 64, device=dev, generator=gen, dtype=dtype).requires_grad_()
               for _ in range(3))  # fmt: skip
    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, v)]  # exact reference
    ref = _reference(*leaves64, causal)
    grad = torch.randn(ref.shape, device=dev, generator=gen, dtype=torch.float64)
    want = torch.autograd.grad(ref, leaves64, grad)
    ours = triton_attention(q, k, v, causal=causal)
    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert ours.dtype == dtype
    assert _rel(ours, ref) <= 2 * _rel(sdpa, ref) + 1e-3
    g_ours = torch.autograd.grad(ours, (q, k, v), grad.to(dtype))
    g_sdpa = torch.autograd.grad(sdpa, (q, k, v), grad.to(dtype))
    for a, b, w in zip(g_ours, g_sdpa, want):
        assert _rel(a, w) <= 2 * _rel(b, w) + 1e-3


def test_int8_matmul(dev):
    from labs.compress import int8

    x = torch.randn(64, 512, device=dev)
    lin = torch.nn.Linear(512, 256).to(dev)
    got = int8.Int8Linear(lin)(x)
    assert got.device == x.device
    assert _rel(got, lin(x)) < 2e-2


def test_int4_weight_only(dev):
    from labs.compress import int4_gpu

    if reason := D.int4_weight_only(dev):
        pytest.skip(reason)
    lin = torch.nn.Linear(512, 256).to(dev)
    q = int4_gpu.Int4WeightOnlyLinear(lin, group_size=64)
    x = torch.randn(8, 512, device=dev)
    codes, scales, zeros = int4_gpu.quantize_groups(lin.weight, 64)
    w = int4_gpu.dequantize_groups(codes, scales, zeros, 64)
    want = x @ w.T + lin.bias
    assert _rel(q(x), want) < 1e-2  # bf16 arithmetic on the kernel's own grid
    assert _rel(q(x), lin(x)) < 0.1


def test_semi_structured_sparsity(dev):
    from torch.sparse import to_sparse_semi_structured

    from labs.compress import pruning

    if reason := D.semi_structured_sparsity(dev):
        pytest.skip(reason)
    a = torch.randn(256, 256, device=dev, dtype=torch.float16)
    a = a * pruning.nm_mask(a).to(a.dtype)
    b = torch.randn(256, 128, device=dev, dtype=torch.float16)
    assert _rel(to_sparse_semi_structured(a) @ b, a @ b) < 1e-2


def test_mixed_precision_step(dev):
    from labs.training import mixed

    for dtype in (torch.float16, torch.bfloat16):
        if dtype == torch.bfloat16 and D.bf16(dev):
            continue
        r = mixed.amp_step(dtype, dev, n_layer=2)
        assert math.isfinite(r["loss"]) and r["peak_bytes"] > 0
