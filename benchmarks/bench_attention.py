"""Naive attention vs PyTorch-level FlashAttention-2 vs SDPA; the Triton kernel vs SDPA on a GPU.

Run:  python benchmarks/bench_attention.py [--quick]

CPU part (issue 5), batch 1, 2 heads, head_dim 64, float32, sequence lengths 512 ... 8192:

* peak extra memory of ``labs.attention.flash.flash_attention`` vs ``naive_attention`` (measured with
  ``labs.systems.roofline.peak_memory_bytes``: every tensor PyTorch allocates during the call, output
  included).  Target: flash grows linearly, naive quadratically; at 8192 flash needs at most 1/8
  of naive's memory.
* median seconds of flash, naive and ``torch.nn.functional.scaled_dot_product_attention``
  (methods interleaved, so load on the machine hits all of them alike).  Target: flash within 2x
  of SDPA's CPU time from 2048 up.

GPU part (only with CUDA): TFLOP/s of ``labs.attention.triton_fwd.triton_attention`` vs SDPA in
fp16, batch 4, 16 heads, head_dim 64, forward, non-causal and causal (FLOPs 4 N^2 d per head,
half with causal).  Goal: at least 70% of SDPA.  Without CUDA it checks the kernel in Triton's
interpreter on a tiny input instead and says so.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import labs.attention.triton_fwd as ta  # before any triton import: sets TRITON_INTERPRET on CPU
from labs.attention.flash import flash_attention, naive_attention
from labs.systems.roofline import peak_memory_bytes


def _interleaved_medians(fns: dict, repeats: int, sync=lambda: None) -> dict:
    """Median seconds per function, the functions run in turn in each round."""
    times = {name: [] for name in fns}
    for fn in fns.values():  # warm-up
        fn()
    sync()
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def cpu_part(lengths, repeats):
    print(f"CPU: batch 1, heads 2, head_dim 64, float32, {torch.get_num_threads()} thread(s)")
    print(
        f"{'N':>6} {'naive MiB':>10} {'flash MiB':>10} {'flash/naive':>12} "
        f"{'naive s':>8} {'flash s':>8} {'sdpa s':>8} {'flash/sdpa':>11} {'naive/sdpa':>11}"
    )
    gen = torch.Generator().manual_seed(0)
    for n in lengths:
        q, k, v = (torch.randn(1, 2, n, 64, generator=gen) for _ in range(3))
        _cpu_row(n, q, k, v, repeats)


@torch.no_grad()
def _cpu_row(n, q, k, v, repeats):
    mem_naive = peak_memory_bytes(lambda: naive_attention(q, k, v))
    mem_flash = peak_memory_bytes(lambda: flash_attention(q, k, v))
    t = _interleaved_medians(
        {
            "naive": lambda: naive_attention(q, k, v),
            "flash": lambda: flash_attention(q, k, v),
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
        },
        repeats,
    )
    print(
        f"{n:>6} {mem_naive / 2**20:>10.1f} {mem_flash / 2**20:>10.1f} "
        f"{mem_flash / mem_naive:>12.4f} {t['naive']:>8.3f} {t['flash']:>8.3f} "
        f"{t['sdpa']:>8.3f} {t['flash'] / t['sdpa']:>11.2f} {t['naive'] / t['sdpa']:>11.2f}"
    )


def gpu_part(lengths, repeats):
    name = torch.cuda.get_device_name()
    print(f"GPU ({name}): Triton FlashAttention-2 vs SDPA, fp16, batch 4, heads 16, d 64, forward")
    print(f"{'N':>6} {'causal':>7} {'triton TF/s':>12} {'sdpa TF/s':>10} {'triton/sdpa':>12}")
    for causal in (False, True):
        for n in lengths:
            q, k, v = (
                torch.randn(4, 16, n, 64, device="cuda", dtype=torch.float16) for _ in range(3)
            )
            _gpu_row(n, causal, q, k, v, repeats)


@torch.no_grad()
def _gpu_row(n, causal, q, k, v, repeats):
    flop = 4 * n * n * 64 * 4 * 16 * (0.5 if causal else 1.0)
    t = _interleaved_medians(
        {
            "triton": lambda: ta.triton_attention(q, k, v, causal, None, 128, 64),
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        },
        repeats,
        torch.cuda.synchronize,
    )
    tri, sd = flop / t["triton"] / 1e12, flop / t["sdpa"] / 1e12
    print(f"{n:>6} {causal!s:>7} {tri:>12.1f} {sd:>10.1f} {tri / sd:>12.2f}")


def interpreter_check():
    print("GPU part skipped: no CUDA device. Triton interpreter correctness check on the CPU:")
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 40, 32, generator=gen) for _ in range(3))
    for causal in (False, True):
        got = ta.triton_attention(q, k, v, causal, block_m=16, block_n=16)
        want = naive_attention(q.double(), k.double(), v.double(), causal)
        err = ((got.double() - want).norm() / want.norm()).item()
        print(f"  causal={causal!s:<5} relative error vs float64 reference: {err:.2e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter sweep, fewer repeats")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lengths = [512, 1024, 2048] if args.quick else [512, 1024, 2048, 4096, 8192]
    cpu_part(lengths, repeats=2 if args.quick else 3)
    if torch.cuda.is_available():
        gpu_part([1024, 2048, 4096, 8192], repeats=10)
    else:
        interpreter_check()


if __name__ == "__main__":
    main()
