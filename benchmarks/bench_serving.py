"""The tiny GPT as a live service: batching off vs on, and eager vs torch.compile vs ONNX Runtime.

Run:  python benchmarks/bench_serving.py [--requests 200] [--rate 80] [--skip-compile]

Part 1 starts four copies of ``python -m labs.serving`` on free loopback ports: batch size 1, and
adaptive batching up to 4, 16 and 32 requests (5, 10, 20 ms wait), and sends each in turn the
*same* open-loop Poisson traffic (``--rate`` requests/s, 16 tokens each). It prints requests/s
and p50/p99 latency of each and the ratios of the largest setting to no batching. Target (Chapter 6): at an offered load above what one
request at a time can serve, batching gives >= 3x the throughput at a p99 no worse than without.

Part 2 times one forward pass of the tiny GPT on a (8, 64) batch, interleaved, in eager PyTorch,
``torch.compile`` (the first call, which compiles, is reported separately) and ONNX Runtime,
after checking that all three give the same logits. All servers are stopped at the end, also on
error or Ctrl-C. The load generator runs on the same machine as the servers: on a small machine
it takes CPU from them, so run it where the cores outnumber the processes.
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
from labs.serving import engine, export, loadgen
from labs.serving.server import ServiceProcess
from labs.systems.roofline import compare_times

KEY = "bench-key"


SETTINGS = {  # name -> (max batch size, max wait in ms)
    "batch size 1": (1, 0),
    "adaptive <= 4": (4, 5),
    "adaptive <= 16": (16, 10),
    "adaptive <= 32": (32, 20),
}


def serving(n_requests: int, rate: float, ckpt: Path) -> None:
    common = ("--max-queue", str(n_requests), "--max-tokens-limit", "64")
    servers = {}
    try:
        for name, (size, wait_ms) in SETTINGS.items():
            args = ("--max-batch-size", str(size), "--max-wait-ms", str(wait_ms), *common)
            servers[name] = ServiceProcess([KEY], *args, checkpoint=ckpt, wait=False)
        for svc in servers.values():
            svc.wait_ready()
        body = {"prompt": "The GPU ", "max_tokens": 16}
        out = {}
        for name, svc in servers.items():  # one at a time: the others sit idle
            loadgen.run_load(svc.url, KEY, 16, rate=rate, concurrency=16, body=body)  # warm-up
            t0 = time.perf_counter()
            res = loadgen.run_load(
                svc.url, KEY, n_requests, rate=rate, concurrency=256, body=body, seed=1
            )
            out[name] = loadgen.summarize(res, time.perf_counter() - t0)
    finally:
        for svc in servers.values():
            svc.stop()
    assert not any(svc.running for svc in servers.values())
    print(f"offered load: {n_requests} requests at {rate:g} requests/s, 16 tokens each")
    for name, s in out.items():
        print(
            f"  {name:>15}: {s['throughput']:7.1f} requests/s  p50 {s['p50']:.3f} s  "
            f"p99 {s['p99']:.3f} s  statuses {s['statuses']}"
        )
    a, b = out["batch size 1"], out["adaptive <= 32"]
    print(
        f"  adaptive <= 32 vs batch size 1: throughput x{b['throughput'] / a['throughput']:.2f}, "
        f"p99 x{b['p99'] / a['p99']:.2f} (target: throughput >= 3x, p99 <= 1x)"
    )


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
    print(f"forward pass, batch (8, 64), {torch.get_num_threads()} thread(s), best of 20:")
    for name, sec in t.items():
        print(f"  {name:>14}: {sec * 1e3:7.2f} ms  ({t['eager'] / sec:.2f}x eager's speed)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--rate", type=float, default=80.0)
    p.add_argument("--skip-compile", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    model = gpt.GPT(gpt.GPTConfig(block_size=64)).eval()  # weights do not change the timings
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = engine.save_checkpoint(model, Path(tmp) / "tiny.safetensors")
        serving(args.requests, args.rate, ckpt)
    forward(model, args.skip_compile)


if __name__ == "__main__":
    main()
