"""The roofline model of a machine: peak FLOP/s, memory bandwidth, arithmetic intensity.

A kernel that performs ``F`` floating-point operations and moves ``Q`` bytes between main memory
and the processor has *arithmetic intensity* ``I = F / Q`` (FLOP/byte).  On a machine with peak
compute ``P`` (FLOP/s) and memory bandwidth ``W`` (byte/s) it cannot run faster than
``min(P, W * I)`` FLOP/s (Williams, Waterman and Patterson, 2009).  Below the *ridge point*
``I* = P / W`` the kernel is memory-bound, above it compute-bound.

This module measures ``P`` and ``W`` on the machine it runs on (Chapter 9 and its lab), computes
intensities of common operations, draws the roofline, and measures the peak memory of a function
(Chapter 11).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import torch

from labs.basics import flops
from labs.systems.single_thread import no_new_threads

__all__ = [
    "peak_matmul_flops",
    "stream_bandwidth",
    "arithmetic_intensity",
    "matmul_intensity",
    "elementwise_intensity",
    "attainable_flops",
    "ridge_point",
    "regime",
    "plot_roofline",
    "peak_memory_bytes",
    "compare_times",
]


def peak_matmul_flops(
    sizes=(256, 512, 1024),
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    repeats: int = 5,
    seed: int = 0,
    thread_time: bool = False,
) -> float:
    """Best achieved FLOP/s of square ``n x n`` products over ``sizes``: the compute roof.

    Each size is timed in ``repeats`` rounds (:func:`compare_times`) and its fastest round
    counts: a roof is what the machine can do, and a busy moment only slows a round down (a median
    would put the roof below what an operation timed in a quieter moment reaches). A vendor's peak
    is an upper bound that large, well-shaped products approach; the measured value is what
    *this* machine delivers through PyTorch at these sizes, not its limit. On a GPU pass sizes of
    several thousand (small products cannot fill its SMs) and choose TF32 for float32 products
    with ``torch.backends.cuda.matmul.allow_tf32`` (:func:`labs.systems.gpu_probe.matmul_peaks`).
    ``thread_time``: as for :func:`compare_times` (one CPU thread, timed by its CPU time).
    """
    gen = torch.Generator(device).manual_seed(seed)
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, generator=gen, device=device).to(dtype)
        b = torch.randn(n, n, generator=gen, device=device).to(dtype)
        seconds = compare_times(
            {"mm": lambda a=a, b=b: a @ b}, repeats, device, thread_time=thread_time
        )
        best = max(best, flops.matmul_flops(n, n, n) / seconds["mm"])
    return best


def stream_bandwidth(
    n_bytes: int = 64 * 2**20,
    device: torch.device | str = "cpu",
    repeats: int = 5,
    seed: int = 0,
    thread_time: bool = False,
) -> float:
    """Achieved main-memory bandwidth in byte/s of a large copy, ``dst.copy_(src)``.

    A copy reads ``n_bytes`` and writes ``n_bytes``, so it moves ``2 * n_bytes``.  Pick
    ``n_bytes`` well above the last-level cache (tens of MiB on a laptop CPU, more than the
    L2 size on a GPU: 50 MiB on an H100) or the caches, not memory, are measured.  The fastest of
    ``repeats`` rounds counts, as for :func:`peak_matmul_flops` (:func:`compare_times`: CUDA
    events on a GPU; ``thread_time`` as there).
    """
    if n_bytes < 4:
        raise ValueError(f"stream_bandwidth: n_bytes must be at least 4, got {n_bytes}")
    gen = torch.Generator(device).manual_seed(seed)
    src = torch.rand(n_bytes // 4, generator=gen, device=device)
    dst = torch.empty_like(src)
    copy = {"copy": lambda: dst.copy_(src)}
    seconds = compare_times(copy, repeats, device, thread_time=thread_time)
    return 2 * src.numel() * 4 / seconds["copy"]


def compare_times(
    fns: dict[str, Callable[[], object]],
    repeats: int = 5,
    device: torch.device | str | None = None,
    thread_time: bool = False,
) -> dict[str, float]:
    """Best-of-``repeats`` seconds of each function, measured in interleaved rounds.

    Running the candidates in turn, round after round, exposes them to the same background load;
    the minimum discards rounds a busy machine slowed down.  Use it to compare, not to report
    absolute speeds.  Each call is timed by :func:`labs.basics.flops.time_once` on ``device``
    (CUDA events on a GPU; the wall clock on the CPU or when ``device`` is ``None``).

    ``thread_time=True`` times CPU work by the CPU time of the calling thread
    (:func:`time.thread_time`) instead of the wall clock: time in which the operating system ran
    other programs does not count, so the ratios hold on a machine shared with other work.  It
    counts only this thread, so PyTorch must run on one (``torch.set_num_threads(1)``); on a CUDA
    ``device`` it is ignored (CUDA events time the GPU's work).
    """
    if repeats < 1:
        raise ValueError(f"compare_times: repeats must be >= 1, got {repeats}")
    on_cpu = device is None or torch.device(device).type == "cpu"
    if thread_time and on_cpu and torch.get_num_threads() != 1:
        raise ValueError(
            "compare_times: thread_time=True counts the calling thread only, but PyTorch runs "
            f"on {torch.get_num_threads()} threads; call torch.set_num_threads(1) first"
        )

    def once(fn: Callable[[], object]) -> float:
        if thread_time and on_cpu:
            start = time.thread_time()
            fn()
            return time.thread_time() - start
        return flops.time_once(fn, device)

    for fn in fns.values():  # warm-up
        fn()
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            best[name] = min(best[name], once(fn))
    return best


def arithmetic_intensity(flop_count: float, bytes_moved: float) -> float:
    """FLOP per byte moved to and from main memory."""
    if bytes_moved <= 0:
        raise ValueError(f"arithmetic_intensity: bytes_moved must be positive, got {bytes_moved}")
    return flop_count / bytes_moved


def matmul_intensity(m: int, k: int, n: int, bytes_per_element: int = 4) -> float:
    """Intensity of ``(m x k) @ (k x n)``: ``2mkn`` FLOPs over reading A, B and writing C once."""
    moved = bytes_per_element * (m * k + k * n + m * n)
    return arithmetic_intensity(flops.matmul_flops(m, k, n), moved)


def elementwise_intensity(
    flops_per_element: float, reads: int = 1, writes: int = 1, bytes_per_element: int = 4
) -> float:
    """Intensity of an elementwise op that reads ``reads`` and writes ``writes`` tensors."""
    return arithmetic_intensity(flops_per_element, bytes_per_element * (reads + writes))


def attainable_flops(intensity, peak_flops: float, bandwidth: float):
    """The roofline: ``min(peak_flops, bandwidth * intensity)`` (scalars or arrays)."""
    return np.minimum(peak_flops, bandwidth * np.asarray(intensity, dtype=float))


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """Intensity (FLOP/byte) where the memory roof meets the compute roof: ``peak / bandwidth``."""
    return peak_flops / bandwidth


def regime(intensity: float, peak_flops: float, bandwidth: float) -> str:
    """``"memory-bound"`` below the ridge point, ``"compute-bound"`` at or above it."""
    return "memory-bound" if intensity < ridge_point(peak_flops, bandwidth) else "compute-bound"


def plot_roofline(
    peak_flops: float,
    bandwidth: float,
    points: dict[str, tuple[float, float]] | None = None,
    ax=None,
    label: str = "this machine",
    color: str = "k",
):
    """Draw the roofline on log-log axes, with measured ``points = {name: (intensity, FLOP/s)}``.

    ``color`` is the roof's (several roofs on one ``ax``: give each its own). Each point has its
    own colour and marker and is named in the legend, below the axes so that it hides no point,
    and close points never overprint each other's labels.
    Returns the matplotlib axes.  FLOP/s are shown in GFLOP/s.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    ridge = ridge_point(peak_flops, bandwidth)
    xs = [ridge / 1000, ridge * 1000]
    if points:
        xs += [i for i, _ in points.values()]
    grid = np.logspace(np.log10(min(xs) / 2), np.log10(max(xs) * 2), 200)
    ax.loglog(
        grid,
        attainable_flops(grid, peak_flops, bandwidth) / 1e9,
        "-",
        color=color,
        lw=2,
        label=label,
    )
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(
        f"ridge point {ridge:.3g} FLOP/B",
        (ridge, 0),
        xycoords=("data", "axes fraction"),
        xytext=(4, 6),
        textcoords="offset points",
        fontsize=9,
        color="grey",
    )
    markers = "osD^vP*Xh<>"
    for k, (name, (inten, achieved)) in enumerate((points or {}).items()):
        ax.plot(inten, achieved / 1e9, markers[k % len(markers)], ms=7, color=f"C{k}", label=name)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("performance (GFLOP/s)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=3, fontsize=9, frameon=False)
    return ax


@contextlib.contextmanager
def _silence_native_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null: the profiler's C++ log lines would clutter cells.

    Descriptor 2 itself, not ``sys.stderr.fileno()``: Jupyter kernels replace ``sys.stderr``
    and capture what native code writes to descriptor 2 separately.
    """
    fd = 2
    sys.stderr.flush()
    saved = os.dup(fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(devnull)
        os.close(saved)


def peak_memory_bytes(fn: Callable[[], object], device: str | torch.device = "cpu") -> int:
    """Peak bytes allocated on ``device`` *while* ``fn()`` runs, above what was allocated before.

    ``device="cuda"`` (or ``"cuda:N"``) reads ``torch.cuda.max_memory_allocated``.  On the CPU
    (the default) it replays the allocation and free events of the PyTorch profiler, which sees
    every tensor PyTorch allocates, including scratch buffers inside fused kernels such as
    ``scaled_dot_product_attention``.  Name the device the tensors live on: on a GPU machine a
    CPU computation allocates nothing on the GPU, so measuring the wrong device gives 0.
    The returned tensors count while they are alive, i.e. the output is included.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    if device.type != "cpu":
        raise ValueError(f"peak_memory_bytes: device must be 'cpu' or 'cuda', got {device}")
    from torch.profiler import ProfilerActivity, profile

    with _silence_native_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        pass  # the first profiler start of a process prints and allocates set-up state
    with _silence_native_stderr():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            with no_new_threads("peak_memory_bytes"):  # the profiler sees this thread only
                fn()
    events = [
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    ]
    live = peak = 0
    for _, nbytes in sorted(events):
        live += nbytes
        peak = max(peak, live)
    return peak
