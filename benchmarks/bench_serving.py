"""The service's engine: static padded batches vs continuous batching with the paged KV cache,
a latency-throughput sweep, a live check through HTTP, and eager vs torch.compile vs ONNX Runtime.

Run:  python benchmarks/bench_serving.py [--requests 200] [--rate 300] [--skip-compile]

Part 1 replays one long-tailed trace (Poisson arrivals at ``--rate`` requests/s, prompts of 8-24
tokens, log-normal outputs of mean 24 and at most 96 tokens) through the service's former engine
(static batches of up to 16, every step recomputing every sequence with right padding, no KV
cache) and through the service's engine (:class:`labs.serving.engine.LLMEngine`: Chapter 10's
continuous-batching scheduler over the paged KV cache), on a virtual clock advanced by each
step's measured time (:mod:`labs.serving.replay`), after checking that both produce the same
greedy tokens. It prints throughput, mean TTFT and TPOT, p99 TTFT and p99 latency, and the
ratios. Target (issue 29): continuous >= 2x the throughput at no worse p99 TTFT.

Part 2 sweeps the offered load for both engines (the knee: where throughput stops growing and
TTFT takes off). Part 3 sends the same open-loop traffic through HTTP to a live
``python -m labs.serving`` (client and server share the machine's cores). Part 4 times one
forward pass in eager PyTorch, ``torch.compile`` and ONNX Runtime after checking equal logits.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from labs import gpt
from labs.inference.batching import make_trace
from labs.serving import checkpoint, export, loadgen
from labs.serving.replay import serve_trace
from labs.serving.server import ServiceProcess
from labs.systems.roofline import compare_times

KEY = "bench-key"
TRACE = {"prompt_len": (8, 24), "mean_output": 24.0, "max_output": 96}


def line(name: str, s: dict) -> str:
    return (
        f"  {name:>10}: {s['throughput_tok_s']:6.0f} tokens/s  TTFT mean {s['ttft_mean_s'] * 1e3:6.1f}"
        f" ms  p99 {s['ttft_p99_s'] * 1e3:6.1f} ms  TPOT {s['tpot_mean_s'] * 1e3:5.2f} ms  "
        f"latency p99 {s['latency_p99_s']:.3f} s"
    )


def compare(model, n: int, rate: float) -> None:
    trace = make_trace(n, rate=rate, seed=1, **TRACE)
    out = {k: serve_trace(k, trace, model, max_batch=16) for k in ("static", "continuous")}
    assert out["static"]["outputs"] == out["continuous"]["outputs"], "the engines disagree"
    print(f"Part 1: {n} requests at {rate:g} requests/s (long-tailed outputs), same greedy tokens")
    for k, s in out.items():
        print(line(k, s))
    a, b = out["static"], out["continuous"]
    print(
        f"  continuous vs static: throughput x{b['throughput_tok_s'] / a['throughput_tok_s']:.2f}, "
        f"p99 TTFT x{b['ttft_p99_s'] / a['ttft_p99_s']:.2f} "
        "(target: throughput >= 2x, p99 TTFT <= 1x)"
    )


def sweep(model, n: int, rates: list[float]) -> None:
    print(f"Part 2: offered load sweep, {n} requests per point")
    for rate in rates:
        trace = make_trace(n, rate=rate, seed=1, **TRACE)
        for k in ("static", "continuous"):
            s = serve_trace(k, trace, model, max_batch=16)
            print(f"  {rate:6.0f} req/s offered, {k:>10}: {s['throughput_tok_s']:6.0f} tokens/s, "
                  f"TTFT p99 {s['ttft_p99_s'] * 1e3:7.1f} ms")  # fmt: skip


def live(ckpt: Path, n: int, rate: float) -> None:
    args = ("--max-queue", str(n), "--limiter", "none", "--max-batch-size", "16")
    with ServiceProcess([KEY], *args, checkpoint=ckpt) as svc:
        body = {"prompt": "The GPU ", "max_tokens": 16, "temperature": 0}
        loadgen.run_load(svc.url, KEY, 16, rate=rate, concurrency=16, body=body)  # warm-up
        t0 = time.perf_counter()
        res = loadgen.run_load(svc.url, KEY, n, rate=rate, concurrency=256, body=body, seed=1)
        s = loadgen.summarize(res, time.perf_counter() - t0)
    print(f"Part 3: live HTTP, {n} requests at {rate:g} requests/s, 16 tokens each: "
          f"{s['throughput']:.1f} requests/s, p50 {s['p50']:.3f} s, p99 {s['p99']:.3f} s, "
          f"statuses {s['statuses']}")  # fmt: skip


def forward(model: gpt.GPT, skip_compile: bool) -> None:
    idx = torch.randint(0, 96, (8, 64), generator=torch.Generator().manual_seed(0))
    with tempfile.TemporaryDirectory() as tmp:
        sess = export.ort_session(export.export_onnx(model, Path(tmp) / "m.onnx"))
    fns = {}
    with torch.no_grad():
        ref = model(idx)
        fns["eager"] = lambda: model(idx)
        if not skip_compile:
            start = time.perf_counter()
            cmodel = torch.compile(model)
            out = cmodel(idx)
            print(f"torch.compile first call (compilation): {time.perf_counter() - start:.1f} s")
            assert torch.allclose(out, ref, atol=1e-4), "compiled logits differ"
            fns["torch.compile"] = lambda: cmodel(idx)
        assert np.allclose(export.ort_logits(sess, idx), ref.numpy(), atol=1e-4), "ONNX differs"
        fns["ONNX Runtime"] = lambda: export.ort_logits(sess, idx)
        t = compare_times(fns, repeats=20)
    print(f"Part 4: forward pass, batch (8, 64), {torch.get_num_threads()} thread(s), best of 20:")
    for name, sec in t.items():
        print(f"  {name:>14}: {sec * 1e3:7.2f} ms  ({t['eager'] / sec:.2f}x eager's speed)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--rate", type=float, default=300.0)
    p.add_argument("--skip-compile", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    model = gpt.GPT(gpt.GPTConfig(block_size=128)).eval()  # weights do not change the timings
    compare(model, args.requests, args.rate)
    sweep(model, 80, [25, 50, 100, 200, 400, 800])
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = checkpoint.save_checkpoint(model, Path(tmp) / "tiny.safetensors")
        live(ckpt, args.requests, 80.0)
    forward(model, args.skip_compile)


if __name__ == "__main__":
    main()
