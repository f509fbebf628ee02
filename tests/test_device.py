"""The one device convention (labs.basics.device) and its timer, checked on a CPU.

What needs a GPU is checked by mocking PyTorch's CUDA queries: a machine that reports a T4 (sm75)
or an H100 (sm90) must get the device, the skip reasons and the CUDA-event timing path a real one
would. The real thing runs in tests/test_gpu.py under tools/gpu-check.sh.
"""

from __future__ import annotations

import contextlib
import types

import pytest
import torch

import labs
from labs.basics import device as D
from labs.basics import flops
from labs.compress import int4_gpu
from labs.systems import gpu_probe, roofline


@pytest.fixture
def no_labs_device(monkeypatch):
    monkeypatch.delenv("LABS_DEVICE", raising=False)


def test_cpu_machine_gets_the_cpu(no_labs_device):
    if torch.cuda.is_available():
        pytest.skip("this test is about a machine without CUDA")
    assert labs.device() == D.device() == torch.device("cpu")
    assert D.describe().startswith("cpu (")
    assert D.capability() is None
    D.synchronize()  # nothing to wait for


@pytest.mark.parametrize("name, want", [("cpu", "cpu"), (" cpu ", "cpu")])
def test_labs_device_wins(monkeypatch, name, want):
    monkeypatch.setenv("LABS_DEVICE", name)
    assert D.device() == torch.device(want)


@pytest.mark.parametrize(
    "name, match",
    [("tpu", "LABS_DEVICE='tpu'"), ("cuda:3", "CUDA device"), ("meta", "use cpu, cuda")],
)
def test_a_device_this_machine_lacks_is_an_error(monkeypatch, name, match):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("LABS_DEVICE", name)
    with pytest.raises(ValueError, match=match):
        D.device()


def fake_gpu(monkeypatch, capability, name):
    """Make torch report one CUDA device of ``capability``."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: name)
    D._probe.cache_clear()


def test_cuda_is_the_default_when_present(monkeypatch, no_labs_device):
    fake_gpu(monkeypatch, (9, 0), "NVIDIA H100 80GB HBM3")
    assert D.device() == torch.device("cuda", 0)
    monkeypatch.setenv("LABS_DEVICE", "cpu")
    assert D.device() == torch.device("cpu")  # the reader's choice wins
    monkeypatch.setenv("LABS_DEVICE", "cuda:1")
    with pytest.raises(ValueError, match="has 1 CUDA device"):
        D.device()


def test_a_t4_gets_skip_reasons_naming_the_capability(monkeypatch, no_labs_device):
    fake_gpu(monkeypatch, (7, 5), "Tesla T4")
    dev = D.device()
    for query, what in [(D.bf16, "bfloat16"), (D.tf32, "TF32"),
                        (D.semi_structured_sparsity, "2:4 semi-structured"),
                        (D.int4_weight_only, "int4")]:  # fmt: skip
        reason = query(dev)
        assert reason and what in reason and "Tesla T4 (compute capability 7.5)" in reason, reason
    assert D.skip_line(D.bf16(dev)).startswith("Skipped: bfloat16 needs compute capability 8.0")
    assert D.skip_line("x.").count(".") == 1


def test_an_h100_passes_the_static_queries(monkeypatch, no_labs_device):
    fake_gpu(monkeypatch, (9, 0), "NVIDIA H100 80GB HBM3")
    assert D.bf16() is None and D.tf32() is None
    assert D.capability() == (9, 0)


def test_cpu_reasons():
    cpu = torch.device("cpu")
    assert D.bf16(cpu) is None  # the CPU pages compute in bf16
    assert "NVIDIA GPU" in D.tf32(cpu)
    assert "NVIDIA GPU" in D.semi_structured_sparsity(cpu)
    assert "interpreter" in D.triton_gpu(cpu)
    assert "int4" in D.int4_weight_only(cpu)
    assert D.int_mm(cpu) is None  # torch._int_mm has a CPU kernel
    if not torch.cuda.is_available():
        assert "NCCL needs CUDA" in D.nccl(2)


def test_a_failing_trial_call_becomes_a_reason(monkeypatch):
    def broken(a, b):
        raise RuntimeError("_int_mm_out_cuda not compiled for this platform\nmore")

    monkeypatch.setattr(torch, "_int_mm", broken)
    D._probe.cache_clear()
    try:
        reason = D.int_mm(torch.device("cpu"))
    finally:
        D._probe.cache_clear()
    assert reason.startswith("torch._int_mm does not run on cpu") and "more" not in reason


class FakeEvent:
    """A CUDA event on a fake clock: record() reads it, elapsed_time() returns milliseconds."""

    clock = [0.0]

    def __init__(self, enable_timing=False):
        assert enable_timing, "timing events need enable_timing=True"
        self.t = None

    def record(self, stream=None):
        self.t = FakeEvent.clock[0]

    def synchronize(self):
        assert self.t is not None, "synchronize() before record()"

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def test_time_fn_uses_cuda_events_on_a_gpu(monkeypatch):
    """On a CUDA device the timer reads events around the call, not the wall clock."""
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "device", lambda dev: contextlib.nullcontext())
    monkeypatch.setattr(flops.time, "perf_counter", lambda: pytest.fail("wall clock read"))
    durations = iter([0.5, 0.5, 0.002, 0.004, 0.003])

    def kernel():  # "runs" on the GPU for the next duration
        FakeEvent.clock[0] += next(durations)

    assert flops.time_fn(kernel, warmup=2, repeats=3, device="cuda") == pytest.approx(0.003)
    durations = iter([1.0, 0.25, 0.5, 0.75, 0.25, 0.5])
    got = roofline.compare_times({"a": kernel, "b": kernel}, repeats=2, device="cuda:0")
    assert got == pytest.approx({"a": 0.25, "b": 0.5})


def test_cpu_timing_is_unchanged(monkeypatch):
    """device=None and device='cpu' read the wall clock exactly as before."""
    for device in (None, "cpu", torch.device("cpu")):
        readings = iter([0.0, 0.0, 10.0, 11.0, 20.0, 23.0])
        monkeypatch.setattr(flops.time, "perf_counter", lambda r=readings: next(r))
        assert flops.time_fn(lambda: None, warmup=1, repeats=3, device=device) == 1.0


def test_sm_limits_from_device_properties():
    h100 = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0,
                                 max_threads_per_multi_processor=2048, warp_size=32,
                                 regs_per_multiprocessor=65536,
                                 shared_memory_per_multiprocessor=233472)  # fmt: skip
    limits = gpu_probe.sm_limits("cuda", props=h100)
    assert (limits.max_warps, limits.max_blocks, limits.registers) == (64, 32, 65536)
    assert limits.shared_bytes == 233472
    t4 = types.SimpleNamespace(name="Tesla T4", major=7, minor=5,
                               max_threads_per_multi_processor=1024, warp_size=32,
                               regs_per_multiprocessor=65536,
                               shared_memory_per_multiprocessor=65536)  # fmt: skip
    assert gpu_probe.sm_limits("cuda", props=t4).max_warps == 32
    assert gpu_probe.sm_limits("cuda", props=t4).max_blocks == 16


def test_probes_run_on_the_cpu():
    sizes = [2**12, 2**20]
    bw = gpu_probe.copy_sweep(sizes, "cpu", repeats=1, burst_bytes=2**21)
    assert len(bw) == 2 and all(b > 0 for b in bw)
    assert gpu_probe.l2_step([2**10, 2**22], [4.0, 2.0], l2_bytes=2**20) == 2.0
    with pytest.raises(ValueError, match="need sizes below"):
        gpu_probe.l2_step([2**22], [1.0], l2_bytes=2**20)
    peaks = gpu_probe.matmul_peaks("cpu", sizes=(64,), repeats=1)
    assert isinstance(peaks["float32"], float) and peaks["float32"] > 0
    assert "TF32 needs an NVIDIA GPU" in peaks["tf32"]
    with pytest.raises(RuntimeError, match="interpreter"):
        gpu_probe.copy_kernel_occupancy("cpu")


def test_int4_groups_match_pytorchs_tinygemm_convention():
    """(q - 8) * scale + zero is what PyTorch's int4 kernel computes: its CPU twin checks it."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(16, 256, generator=gen)
    codes, scales, zeros = int4_gpu.quantize_groups(w, 64)
    assert codes.dtype == torch.uint8 and int(codes.max()) <= 15
    deq = int4_gpu.dequantize_groups(codes, scales, zeros, 64)
    assert ((deq - w).abs() <= scales.repeat_interleave(64, 1) / 2 + 1e-6).all()
    if not hasattr(torch, "_weight_int4pack_mm_for_cpu"):
        pytest.skip("this torch has no CPU tinygemm kernel")
    packed = torch._convert_weight_to_int4pack_for_cpu(codes.int(), 2)
    sz = torch.stack([scales, zeros], -1).transpose(0, 1).contiguous().bfloat16()
    x = torch.randn(4, 256, generator=gen).bfloat16()
    got = torch._weight_int4pack_mm_for_cpu(x, packed, 64, sz).float()
    want = x.float() @ int4_gpu.dequantize_groups(codes, sz[..., 0].T.float(),
                                                  sz[..., 1].T.float(), 64).T  # fmt: skip
    assert ((got - want).norm() / want.norm()) < 1e-2
    with pytest.raises(ValueError, match="runs on CUDA"):
        int4_gpu.Int4WeightOnlyLinear(torch.nn.Linear(256, 16))


def test_torchrun_on_gpus_skips_with_one_line_without_cuda(monkeypatch):
    from labs.parallel import on_gpus

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    line = on_gpus.torchrun_on_gpus("labs.parallel.ddp_torchrun")
    assert line.startswith("Skipped: labs.parallel.ddp_torchrun under torchrun with NCCL: NCCL")
    assert "\n" not in line


@pytest.mark.parametrize("even_in_high", [True, False])
def test_int4_packing_finds_the_kernels_nibble_order(monkeypatch, even_in_high):
    """The packed weight is checked by the kernel itself, in either nibble order (fake kernels
    on the CPU that unpack one way or the other, compute (q - 8) * scale + zero)."""
    from labs.compress.int4_gpu import _pack_checked

    def convert(packed, inner_k_tiles):
        return packed.clone()

    def mm(x, packed, group_size, sz):
        hi, lo = (packed >> 4).int(), (packed & 15).int()
        even, odd = (hi, lo) if even_in_high else (lo, hi)
        codes = torch.stack([even, odd], dim=-1).reshape(packed.shape[0], -1)
        w = int4_gpu.dequantize_groups(
            codes, sz[..., 0].T.float(), sz[..., 1].T.float(), group_size
        )
        return (x.float() @ w.T).to(x.dtype)

    monkeypatch.setattr(torch, "_convert_weight_to_int4pack", convert)
    monkeypatch.setattr(torch, "_weight_int4pack_mm", mm)
    w = torch.randn(8, 64, generator=torch.Generator().manual_seed(1))
    codes, scales, zeros = int4_gpu.quantize_groups(w, 32)
    sz = torch.stack([scales, zeros], -1).transpose(0, 1).contiguous().bfloat16()
    packed = _pack_checked(codes, sz, 32, 2)
    first = packed[:, 0] >> 4 if even_in_high else packed[:, 0] & 15
    assert torch.equal(first, codes[:, 0])
    monkeypatch.setattr(
        torch, "_weight_int4pack_mm", lambda x, p, g, s: x.new_zeros(x.shape[0], p.shape[0])
    )
    with pytest.raises(RuntimeError, match="either nibble order"):
        _pack_checked(codes, sz, 32, 2)
