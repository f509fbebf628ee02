"""Probe the GPU in front of you: its limits, its copy bandwidth and L2 step, matmul peaks, occupancy.

Chapters 8 and 9 cite data-sheet numbers; on a CUDA machine these functions measure the same
quantities on the real device, next to the citations:

* :func:`sm_limits` -- the per-SM limits of :class:`labs.systems.gpu_memory.SMLimits`, read from
  ``torch.cuda.get_device_properties`` instead of a table;
* :func:`copy_sweep` -- copy bandwidth (byte/s) for a range of sizes, amortised over bursts of
  copies and timed with CUDA events: below the L2 size copies run from L2, above it from HBM;
* :func:`l2_step` -- the ratio of the two plateaus of such a sweep;
* :func:`matmul_peaks` -- the compute roofs of Chapter 9 for float32 (CUDA cores), TF32 and
  bf16 (tensor cores), each measured, or the reason it cannot be on this device;
* :func:`copy_kernel_occupancy` -- a Triton grid-stride copy kernel: the registers and shared
  memory its compiler chose, the occupancy that allows (:func:`labs.systems.gpu_memory.occupancy`
  with this device's limits), and its bandwidth as the grid grows from one block to many per SM.

Everything runs on the device given (:func:`labs.basics.device.device` in the book); the sweep
and the peaks also run on a CPU (the book's CPU pages use :mod:`labs.systems.roofline` for that),
the occupancy probe needs a CUDA GPU and Triton.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch

from labs.basics import device as labs_device
from labs.basics import flops
from labs.systems.gpu_memory import SMLimits, occupancy

__all__ = [
    "DATASHEET_HBM",
    "datasheet_bandwidth",
    "sm_limits",
    "copy_sweep",
    "l2_step",
    "matmul_peaks",
    "copy_kernel_occupancy",
]

#: HBM bandwidth (byte/s) from NVIDIA's A100 and H100 data sheets (Chapter 8's table), by the
#: name ``torch.cuda.get_device_name`` reports
DATASHEET_HBM = {
    "A100-SXM4-40GB": 1.555e12,
    "A100-SXM4-80GB": 2.039e12,
    "H100 80GB HBM3": 3.35e12,  # the SXM card
}


def datasheet_bandwidth(name: str) -> float | None:
    """The data-sheet HBM bandwidth of the GPU called ``name``; ``None`` if not in the table."""
    return next((bw for key, bw in DATASHEET_HBM.items() if key in name), None)


def sm_limits(device: torch.device | str, props=None) -> SMLimits:
    """Per-SM limits of the CUDA ``device`` (``props``: its properties, for tests).

    Threads, registers and shared memory per SM come from the driver; the register allocation
    unit (256) and the limit on resident blocks per SM (16 on sm75 and sm86, 24 on sm89, 32 on
    sm80 and sm90) are those of NVIDIA's occupancy calculator.
    """
    p = torch.cuda.get_device_properties(device) if props is None else props
    blocks = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24}.get((p.major, p.minor), 32)
    warp = getattr(p, "warp_size", 32)
    return SMLimits(
        name=f"{p.name} (compute capability {p.major}.{p.minor})",
        max_warps=p.max_threads_per_multi_processor // warp,
        max_blocks=blocks,
        registers=getattr(p, "regs_per_multiprocessor", 65536),
        shared_bytes=getattr(p, "shared_memory_per_multiprocessor", 0)
        or getattr(p, "shared_memory_per_block_optin", 48 * 1024),
        warp_size=warp,
    )


def _random(n: int, dev: torch.device | str) -> torch.Tensor:
    """``n`` seeded uniform float32 numbers made on ``dev`` itself (GiBs are slow to send)."""
    return torch.rand(n, device=dev, generator=torch.Generator(dev).manual_seed(0))


def copy_sweep(
    sizes: Sequence[int], device: torch.device | str, repeats: int = 5, burst_bytes: int = 2**28
) -> list[float]:
    """Copy bandwidth in byte/s of ``dst.copy_(src)`` for each size (bytes per tensor).

    Each timed call is a burst of copies that together move about ``burst_bytes``, so a copy of
    a few KiB is not lost in the launch overhead; the best of ``repeats`` bursts counts (timed by
    :func:`labs.basics.flops.time_once` on ``device``: CUDA events on a GPU). A copy moves twice its
    size (read + write).
    """
    out = []
    for nbytes in sizes:
        src = _random(max(1, nbytes // 4), device)
        dst = torch.empty_like(src)
        calls = max(1, burst_bytes // (2 * src.nbytes))

        def burst(calls=calls, src=src, dst=dst) -> None:
            for _ in range(calls):
                dst.copy_(src)

        burst()  # warm-up
        best = min(flops.time_once(burst, device) for _ in range(repeats))
        out.append(2 * src.nbytes * calls / best)
    return out


def l2_step(sizes: Sequence[int], bandwidths: Sequence[float], l2_bytes: int) -> float:
    """Best bandwidth of copies that fit in L2 over the median of those far above it.

    A copy of ``n`` bytes keeps ``2 n`` bytes live; it fits when ``2 n <= l2_bytes / 2`` (half
    the L2, leaving room for the rest), it is far above when ``2 n >= 4 * l2_bytes``. Raises
    when the sweep has no size on one side.
    """
    inside = [b for s, b in zip(sizes, bandwidths) if 2 * s <= l2_bytes / 2]
    above = sorted(b for s, b in zip(sizes, bandwidths) if 2 * s >= 4 * l2_bytes)
    if not inside or not above:
        raise ValueError(
            f"l2_step: need sizes below {l2_bytes // 4:,} and above {2 * l2_bytes:,} bytes"
        )
    return max(inside) / above[len(above) // 2]


@contextlib.contextmanager
def _tf32(allow: bool) -> Iterator[None]:
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def matmul_peaks(
    device: torch.device | str, sizes: Sequence[int] = (2048, 4096, 8192), repeats: int = 5
) -> dict[str, float | str]:
    """Best achieved FLOP/s of square products per format: ``{format: FLOP/s or reason}``.

    Formats: ``"float32"`` (TF32 off: the CUDA cores), ``"tf32"`` (float32 inputs on the tensor
    cores, sm80+), ``"bfloat16"`` and ``"float16"`` (tensor cores). A format the device lacks
    maps to the reason (:mod:`labs.basics.device`), never to a number.
    """
    dev = torch.device(device)
    plan = {
        "float32": (torch.float32, False, None),
        "tf32": (torch.float32, True, labs_device.tf32(dev)),
        "bfloat16": (torch.bfloat16, False, labs_device.bf16(dev)),
        "float16": (torch.float16, False, None),
    }
    out: dict[str, float | str] = {}
    for name, (dtype, allow, reason) in plan.items():
        if reason:
            out[name] = reason
            continue
        with _tf32(allow):
            runs = flops.sweep(list(sizes), dtype=dtype, device=dev, repeats=repeats)
        out[name] = max(t.flop_per_s for t in runs)
    return out


_KERNEL: dict = {}


def _copy_kernel():
    """The grid-stride Triton copy kernel, decorated on first use (Triton is imported lazily)."""
    if "copy" not in _KERNEL:
        import triton
        import triton.language as tl

        @triton.jit
        def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
            start = tl.program_id(0) * BLOCK
            step = tl.num_programs(0) * BLOCK
            for base in range(start, n, step):
                offs = base + tl.arange(0, BLOCK)
                mask = offs < n
                tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)

        _KERNEL["copy"] = copy_kernel
    return _KERNEL["copy"]


def grid_copy(src: torch.Tensor, dst: torch.Tensor, blocks: int, block: int = 1024,
              num_warps: int = 4):  # fmt: skip
    """Copy ``src`` into ``dst`` (same shape, contiguous) with ``blocks`` programs of the Triton
    kernel; returns Triton's compiled kernel (``.n_regs``, ``.metadata.shared``) or ``None`` in
    Triton's interpreter."""
    if src.shape != dst.shape or not (src.is_contiguous() and dst.is_contiguous()):
        raise ValueError(f"grid_copy: need contiguous tensors of one shape, got "
                         f"{tuple(src.shape)} and {tuple(dst.shape)}")  # fmt: skip
    return _copy_kernel()[(blocks,)](src, dst, src.numel(), BLOCK=block, num_warps=num_warps)


def copy_kernel_occupancy(
    device: torch.device | str,
    nbytes: int = 2**30,
    block: int = 1024,
    num_warps: int = 4,
    blocks_per_sm: Sequence[float] = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8, 16),
) -> dict:
    """Occupancy and bandwidth of the grid-stride Triton copy on the CUDA ``device``.

    Returns ``{"registers", "shared_bytes", "warps_per_block", "occupancy", "resident_blocks",
    "sms", "blocks": [...], "bandwidth": [...]}``: the compiler's registers per thread and shared
    bytes per block, the occupancy they allow on this device, the resident blocks per SM, and the
    copy bandwidth (byte/s, CUDA events) for each grid size ``round(f * SMs)``. The bandwidth
    rises with the grid until every SM holds enough warps to hide the memory latency.
    """
    if reason := labs_device.triton_gpu(device):
        raise RuntimeError(f"copy_kernel_occupancy: {reason}")
    dev = torch.device(device)
    limits = sm_limits(dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    src = _random(nbytes // 4, dev)
    dst = torch.empty_like(src)
    compiled = grid_copy(src, dst, sms, block, num_warps)
    regs, shared = compiled.n_regs, compiled.metadata.shared
    occ = occupancy(32 * num_warps, max(1, regs), shared, limits)
    grids = sorted({max(1, round(f * sms)) for f in blocks_per_sm})
    bandwidth = []
    for g in grids:
        seconds = flops.time_fn(lambda g=g: grid_copy(src, dst, g, block, num_warps),
                                warmup=1, repeats=3, device=dev)  # fmt: skip
        bandwidth.append(2 * src.nbytes / seconds)
    assert torch.equal(dst, src), "the Triton copy kernel copied wrongly"
    return {
        "registers": regs,
        "shared_bytes": shared,
        "warps_per_block": num_warps,
        "occupancy": occ,
        "resident_blocks": round(occ * limits.max_warps / num_warps),
        "sms": sms,
        "blocks": grids,
        "bandwidth": bandwidth,
    }
