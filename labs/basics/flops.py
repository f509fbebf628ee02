"""Counting and timing matrix multiplications (Chapter 2).

An ``(m x k) @ (k x n)`` product computes ``m * n`` dot products of length ``k``: ``m*n*k``
multiplications and ``m*n*(k-1)`` additions.  Hardware fuses one multiply and one add into a
single *fused multiply-add*, and the convention everyone quotes (vendor peak numbers included) is
``2*m*n*k`` floating-point operations (FLOPs) per product.  Dividing by the measured time gives the
*achieved* FLOP/s, which :func:`measure_matmul` and :func:`sweep` report.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "matmul_flops",
    "exact_matmul_ops",
    "chain_flops",
    "time_once",
    "time_fn",
    "MatmulTiming",
    "measure_matmul",
    "sweep",
]


def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of an ``(m x k) @ (k x n)`` product with the multiply-add convention: ``2*m*k*n``."""
    for name, v in dict(m=m, k=k, n=n).items():
        if int(v) != v or v < 0:
            raise ValueError(f"matmul_flops: {name} must be a non-negative integer, got {v!r}")
    return 2 * int(m) * int(k) * int(n)


def exact_matmul_ops(m: int, k: int, n: int) -> tuple[int, int]:
    """``(multiplications, additions)`` of the textbook algorithm: ``(m*n*k, m*n*(k-1))``."""
    return m * n * k, m * n * max(k - 1, 0)


def chain_flops(shapes: Sequence[tuple[int, int]], order: str = "left") -> int:
    """FLOPs of the product of matrices with the given ``(rows, cols)`` shapes.

    ``order="left"`` multiplies ``((A B) C) ...``; ``order="right"`` multiplies ``A (B (C ...))``.
    The result is the same matrix, the cost is not (exercise 3 of the Chapter 2 lab).
    """
    if len(shapes) < 2:
        raise ValueError(f"chain_flops: need at least two matrices, got {len(shapes)}")
    for (r1, c1), (r2, c2) in zip(shapes, shapes[1:]):
        if c1 != r2:
            raise ValueError(f"chain_flops: inner sizes differ: ({r1}x{c1}) @ ({r2}x{c2})")
    if order not in ("left", "right"):
        raise ValueError(f"chain_flops: order must be 'left' or 'right', got {order!r}")
    seq = list(shapes) if order == "left" else list(reversed(shapes))
    total = 0
    acc = seq[0]
    for nxt in seq[1:]:
        if order == "left":  # acc (r x c) @ nxt (c x n)
            total += matmul_flops(acc[0], acc[1], nxt[1])
            acc = (acc[0], nxt[1])
        else:  # nxt (r x c) @ acc (c x n)
            total += matmul_flops(nxt[0], nxt[1], acc[1])
            acc = (nxt[0], acc[1])
    return total


def time_once(fn: Callable[[], object], device: torch.device | str | None = None) -> float:
    """Seconds of one call of ``fn()`` on ``device``: the project's clock.

    On a CUDA device the call is bracketed by two CUDA events on the current stream and the
    result is the GPU time between them (the kernels ``fn`` queued, however asynchronous), read
    after the second event completes. Elsewhere (``device`` ``None`` or the CPU) it is the wall
    clock, ``time.perf_counter``; on ``mps`` the wall clock after waiting for the queued work.
    """
    kind = torch.device(device).type if device is not None else "cpu"
    if kind == "cuda":
        with torch.cuda.device(device):
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            fn()
            end.record()
            end.synchronize()
        return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds
    if kind == "mps":
        torch.mps.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.mps.synchronize()
        return time.perf_counter() - t0
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_fn(
    fn: Callable[[], object],
    warmup: int = 2,
    repeats: int = 5,
    device: torch.device | str | None = None,
) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs.

    The median resists the outliers a busy laptop produces. Each run is timed by
    :func:`time_once`: the wall clock on the CPU (``device`` ``None`` or ``"cpu"``), CUDA events
    on a GPU (pass the device the work runs on, e.g. :func:`labs.basics.device.device`, or
    ``fn`` must synchronise itself or only the kernel launches are timed).
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"time_fn: need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    for _ in range(warmup):
        fn()
    return statistics.median(time_once(fn, device) for _ in range(repeats))


@dataclass(frozen=True)
class MatmulTiming:
    """One measured square product ``(n x n) @ (n x n)``."""

    n: int
    dtype: str
    device: str
    seconds: float  #: median seconds per product
    flops: int  #: FLOPs per product (2 n^3)

    @property
    def flop_per_s(self) -> float:
        """Achieved FLOP/s."""
        return self.flops / self.seconds


def measure_matmul(
    n: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    repeats: int = 5,
    seed: int = 0,
) -> MatmulTiming:
    """Time an ``(n x n) @ (n x n)`` product of random matrices and report the achieved FLOP/s.

    The matrices are drawn from a generator seeded with ``seed`` on the device itself (a GPU's
    large matrices are slow to draw on the CPU and send); on a GPU the products are timed with
    CUDA events (:func:`time_once`).
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(n, n, generator=gen, device=device).to(dtype=dtype)
    b = torch.randn(n, n, generator=gen, device=device).to(dtype=dtype)

    # Repeat small products inside one timed call so the timer's resolution does not dominate.
    inner = max(1, int(2e7 // max(1, 2 * n**3)))

    def many() -> None:
        for _ in range(inner):
            a @ b

    seconds = time_fn(many, warmup=1, repeats=repeats, device=device) / inner
    name = str(dtype).replace("torch.", "")
    return MatmulTiming(n, name, str(device), seconds, matmul_flops(n, n, n))


def sweep(
    sizes: Sequence[int],
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    repeats: int = 5,
) -> list[MatmulTiming]:
    """:func:`measure_matmul` for each size in ``sizes``."""
    return [measure_matmul(n, dtype, device, repeats) for n in sizes]
