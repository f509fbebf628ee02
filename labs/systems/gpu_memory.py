"""The GPU memory hierarchy in numbers: occupancy, measured copy bandwidth, tiled-matmul traffic.

Reference implementations for Chapter 8 and Lab 8:

* :func:`occupancy` -- the fraction of an SM's warp slots a kernel can fill, limited by warps,
  blocks, registers and shared memory per SM (the arithmetic of NVIDIA's occupancy calculator);
* :func:`copy_bandwidth` -- bytes per second of a ``dst.copy_(src)`` of a given size, the best of
  several timed runs; swept over sizes it traces the cache levels of the machine it runs on;
* :func:`tiled_matmul_traffic` -- bytes a tiled matrix product reads from and writes to main
  memory when each output tile is computed from tiles staged in on-chip memory.

The per-SM limits in :data:`A100` and :data:`H100` are those of compute capabilities 8.0 and 9.0
in NVIDIA's CUDA C++ Programming Guide (table "Technical Specifications per Compute Capability").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from labs.basics import flops

__all__ = [
    "SMLimits",
    "A100",
    "H100",
    "occupancy",
    "time_call",
    "copy_bandwidth",
    "tiled_matmul_traffic",
]


@dataclass(frozen=True)
class SMLimits:
    """Per-SM resource limits of one GPU generation (shared memory in bytes)."""

    name: str
    max_warps: int = 64
    max_blocks: int = 32
    max_threads_per_block: int = 1024
    registers: int = 65536
    register_unit: int = 256  # registers are allocated per warp in multiples of this
    max_registers_per_thread: int = 255
    shared_bytes: int = 164 * 1024
    warp_size: int = 32


A100 = SMLimits("A100 (compute capability 8.0)", shared_bytes=164 * 1024)
H100 = SMLimits("H100 (compute capability 9.0)", shared_bytes=228 * 1024)


def occupancy(
    threads_per_block: int,
    registers_per_thread: int,
    shared_bytes_per_block: int = 0,
    gpu: SMLimits = A100,
) -> float:
    """Fraction of ``gpu.max_warps`` warp slots that resident blocks of this kernel fill, in [0, 1].

    A block of ``threads_per_block`` threads occupies ``ceil(threads / 32)`` warps. The number of
    resident blocks is the smallest of the warp-slot, block-slot, register and shared-memory
    limits; registers are allocated per warp, rounded up to ``gpu.register_unit``.
    """
    if not 1 <= threads_per_block <= gpu.max_threads_per_block:
        raise ValueError(
            f"occupancy: threads_per_block must be in 1..{gpu.max_threads_per_block}, "
            f"got {threads_per_block}"
        )
    if not 1 <= registers_per_thread <= gpu.max_registers_per_thread:
        raise ValueError(
            f"occupancy: registers_per_thread must be in "
            f"1..{gpu.max_registers_per_thread}, got {registers_per_thread}"
        )
    if not 0 <= shared_bytes_per_block <= gpu.shared_bytes:
        raise ValueError(
            f"occupancy: shared_bytes_per_block must be in 0..{gpu.shared_bytes} "
            f"for {gpu.name}, got {shared_bytes_per_block}"
        )
    warps = math.ceil(threads_per_block / gpu.warp_size)
    per_warp = math.ceil(registers_per_thread * gpu.warp_size / gpu.register_unit)
    per_warp *= gpu.register_unit
    limits = [gpu.max_warps // warps, gpu.max_blocks, gpu.registers // per_warp // warps]
    if shared_bytes_per_block:
        limits.append(gpu.shared_bytes // shared_bytes_per_block)
    return min(limits) * warps / gpu.max_warps


def time_call(fn: Callable[[], object]) -> float:
    """Wall-clock seconds of one call of ``fn`` (the default timer of :func:`copy_bandwidth`):
    :func:`labs.basics.flops.time_once` on the CPU."""
    return flops.time_once(fn)


def copy_bandwidth(
    nbytes: int,
    repeats: int = 5,
    timer: Callable | None = None,
    device: torch.device | str = "cpu",
) -> float:
    """Bytes per second of ``dst.copy_(src)`` for float32 tensors of ``nbytes // 4`` elements.

    A copy reads and writes every byte, so it moves ``2 * src.nbytes`` (which is ``nbytes``
    rounded down to a multiple of 4). Returns that over the *fastest* of ``repeats`` calls of
    ``timer(copy)``, after one untimed warm-up copy: the minimum is the run least disturbed by
    other work. ``timer`` takes a callable and returns seconds; by default
    :func:`labs.basics.flops.time_once` on ``device`` (CUDA events on a GPU, where the tensors
    are made from the same CPU numbers).
    """
    if nbytes < 4 or repeats < 1:
        raise ValueError(
            f"copy_bandwidth: need nbytes >= 4 and repeats >= 1, got {nbytes}, {repeats}"
        )
    if timer is None:
        timer = (
            time_call
            if torch.device(device).type == "cpu"
            else partial(flops.time_once, device=device)
        )
    src = torch.rand(nbytes // 4, generator=torch.Generator().manual_seed(0)).to(device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up: page in both tensors
    best = min(timer(lambda: dst.copy_(src)) for _ in range(repeats))
    return 2 * src.nbytes / best


def tiled_matmul_traffic(m: int, n: int, k: int, tile: int, bytes_per_element: int = 4) -> int:
    """Main-memory bytes of ``C = A @ B`` (A: m x k, B: k x n) computed in ``tile x tile`` blocks.

    Every output tile reads its rows of A (``rows x k``) and its columns of B (``k x cols``) once
    and writes itself once; edge tiles are smaller when ``tile`` does not divide m or n. So A is
    read ``ceil(n / tile)`` times, B ``ceil(m / tile)`` times, and C written once.
    """
    if min(m, n, k, tile, bytes_per_element) < 1:
        raise ValueError(
            f"tiled_matmul_traffic: sizes must be positive, got m={m}, n={n}, k={k}, "
            f"tile={tile}, bytes_per_element={bytes_per_element}"
        )
    reads = m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile)
    return (reads + m * n) * bytes_per_element
