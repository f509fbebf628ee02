"""Kernel fusion on the CPU: eager PyTorch vs torch.compile vs fusing by hand in cache-sized chunks.

Run:  python benchmarks/bench_fusion.py [--threads N]

For ``x.cos().cos()`` and ``relu(x + y)`` on float32 tensors of 2**22 elements (16 MiB each) it
prints the best-of-7 time of each variant, measured in interleaved rounds, relative to the eager
chain, and the time the first ``torch.compile`` call took (compilation; it depends on whether
TorchInductor's on-disk cache is warm).  Chapter 9 explains the expected outcome: fusion helps a
memory-bound chain by about its traffic ratio (2x and 5/3x here) and does little for a chain that
is compute-bound on this processor.
"""

from __future__ import annotations

import argparse
import time

import torch

from labs.systems.roofline import compare_times

N = 2**22
CHUNK = 2**15  # 128 KiB of float32: stays in a core's L2 cache


def cos_cos(x):
    return x.cos().cos()


def add_relu(x, y):
    return torch.relu(x + y)


def cos_cos_chunked(x):
    out = torch.empty_like(x)
    for s in range(0, x.numel(), CHUNK):
        part = out[s : s + CHUNK]
        torch.cos(x[s : s + CHUNK], out=part)
        part.cos_()
    return out


def add_relu_chunked(x, y):
    out = torch.empty_like(x)
    for s in range(0, x.numel(), CHUNK):
        part = out[s : s + CHUNK]
        torch.add(x[s : s + CHUNK], y[s : s + CHUNK], out=part)
        part.relu_()
    return out


def compiled(fn, *args):
    start = time.perf_counter()
    cfn = torch.compile(fn)
    cfn(*args)
    return cfn, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(N, generator=gen), torch.randn(N, generator=gen)
    print(f"float32, {N} elements, {args.threads} thread(s)")
    for name, eager, chunked, inputs in [
        ("x.cos().cos()", cos_cos, cos_cos_chunked, (x,)),
        ("relu(x + y)", add_relu, add_relu_chunked, (x, y)),
    ]:
        cfn, compile_s = compiled(eager, *inputs)
        assert torch.allclose(cfn(*inputs), eager(*inputs), atol=1e-6)
        assert torch.allclose(chunked(*inputs), eager(*inputs), atol=1e-6)
        t = compare_times(
            {
                "eager": lambda e=eager, a=inputs: e(*a),
                "compiled": lambda c=cfn, a=inputs: c(*a),
                "chunked": lambda c=chunked, a=inputs: c(*a),
            },
            repeats=7,
        )
        print(
            f"{name:14s} eager {t['eager'] * 1e3:7.2f} ms | compiled/eager "
            f"{t['compiled'] / t['eager']:.2f} | chunked/eager {t['chunked'] / t['eager']:.2f} | "
            f"first compile {compile_s:.1f} s"
        )


if __name__ == "__main__":
    main()
