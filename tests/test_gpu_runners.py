"""On a CUDA GPU: the inference runners, the serving engine and service, the compression code and
the torchrun programs give what they give on the CPU.

The CPU twin of these tests is tests/test_device_placement*.py (a meta default device catches a
tensor made without ``device=``); here the model really lives on the GPU. Models are float64, so
a greedy token or a compressed weight is the same on both devices up to rounding far below the
tolerances. Every test is marked ``gpu`` (skipped with one line on a CPU machine).
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import httpx
import procgroup
import pytest
import torch

import labs
from labs import gpt
from labs.basics import device as D

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
PROMPT = [[5, 17, 42, 8, 3], [9, 9, 1, 60, 2]]


@pytest.fixture(scope="module")
def dev():
    return labs.device()


def tiny(device, seed=0, block_size=48, n_embd=32):
    cfg = gpt.GPTConfig(block_size=block_size, n_layer=2, n_head=2, n_embd=n_embd, seed=seed)
    return gpt.GPT(cfg).to(device, torch.float64).eval()


def both(run, dev):
    """``run(device)`` on the CPU and on ``dev``: the two results."""
    return run(torch.device("cpu")), run(dev)


def test_generate_caches_and_engines(dev):
    from labs.inference.batching import Request, Scheduler, make_trace, run_trace
    from labs.inference.chunked_prefill import ChunkedModelRunner, ChunkedScheduler, run_chunked
    from labs.inference.engine import ModelRunner
    from labs.inference.kv_cache import generate
    from labs.inference.speculative import speculative_generate
    from labs.serving.engine import GenRequest, LLMEngine
    from labs.serving.static import StaticEngine

    def run(device):
        model = tiny(device)
        ids = torch.tensor(PROMPT, device=device)
        out = {"generate": generate(model, ids, 8).tolist()}
        out["no cache"] = generate(model, ids, 8, use_cache=False).tolist()
        reqs = make_trace(5, rate=1.0, prompt_len=(3, 9), mean_output=5, max_output=8, seed=3)
        for r in reqs:
            r.arrival = 0.0
        runner = ModelRunner(model, num_blocks=12, block_size=4)
        run_trace(reqs, Scheduler("continuous", 3, runner.manager), runner)
        out["paged"] = [r.generated for r in reqs]
        chunked = ChunkedModelRunner(model, num_blocks=24, block_size=4, prefix_caching=True)
        reqs = [Request(i, 0.0, list(range(20, 31)) + [i], 4) for i in range(3)]
        run_chunked(reqs, ChunkedScheduler(3, chunked.manager, token_budget=6), chunked)
        out["chunked"] = [r.generated for r in reqs]
        spec, _ = speculative_generate(model, tiny(device, seed=1), ids[:1], 8, gamma=3)
        out["speculative"] = spec.tolist()
        done = LLMEngine(model, max_batch=2).generate([GenRequest(p, 6) for p in PROMPT])
        out["engine"] = [r.output for r in done]
        out["static"] = [
            r.output for r in StaticEngine(model).run([GenRequest(p, 6) for p in PROMPT])
        ]
        return out

    cpu, gpu = both(run, dev)
    assert gpu == cpu


def test_compression_runs_on_the_gpu(dev):
    from labs.compress import asvd, cluster, gptq, lowrank, outliers, pruning, sparsegpt
    from labs.compress import quantize as Q
    from labs.peft import lora

    ids = torch.tensor([[5, 17, 42, 8, 3, 60, 2, 9], [9, 9, 1, 60, 2, 33, 4, 71]])
    compressors = {
        "gptq": lambda m, x: gptq.quantize_model(m, x, 4, 8, block_size=8),
        "sparsegpt": lambda m, x: sparsegpt.sparsegpt_model(m, x, 0.5, 2, 4, block_size=16)[0],
        "cluster": lambda m, x: cluster.cluster_model(m, 8, iters=5),
        "quantize": lambda m, x: Q.quantize_weights(m, 4),
        "awq": lambda m, x: outliers.awq_quantize(m, outliers.input_absmean(m, x, ["blocks.0.mlp.up_proj"])),
        "lowrank": lambda m, x: lowrank.factorize_model(m, rank=4),
        "asvd": lambda m, x: asvd.factorize_model_aware(m, 4, x, "whiten"),
        "prune": lambda m, x: pruning.prune_heads(pruning.prune_mlp_channels(m, 0.5), {0: [1]}),
        "qlora": lambda m, x: lora.apply_lora(copy.deepcopy(m), ["q_proj"], r=4, quantize=True),
    }  # fmt: skip

    for name, compress in compressors.items():

        def run(device, compress=compress, name=name):
            model = compress(
                tiny(device), ids
            )  # calibration ids on the CPU: the library moves them
            away = [n for n, t in [*model.named_parameters(), *model.named_buffers()]
                    if t.device.type != device.type]  # fmt: skip
            assert not away, f"{name}: {away} not on {device}"
            with torch.no_grad():
                return model(ids.to(device)).cpu()

        cpu, gpu = both(run, dev)
        torch.testing.assert_close(gpu.double(), cpu.double(), rtol=1e-4, atol=1e-4, msg=name)


def test_service_with_device_cuda():
    from labs.serving.server import ServiceProcess

    svc = ServiceProcess(["gpu-key"], "--device", "cuda", "--limiter", "none", train_steps=0)
    try:
        reply = httpx.post(svc.url + "/v1/completions", timeout=60,
                           headers={"Authorization": "Bearer gpu-key"},
                           json={"model": "tiny-gpt", "prompt": "The GPU", "max_tokens": 8,
                                 "temperature": 0})  # fmt: skip
        assert reply.status_code == 200, reply.text
        assert reply.json()["usage"]["completion_tokens"] == 8
    finally:
        svc.stop()
    assert not svc.running


def _torchrun(nproc: int, *module_args: str, timeout=300) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LABS_DEVICE")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", "-m", *module_args]  # fmt: skip
    out = procgroup.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


@pytest.mark.parametrize("nproc", [1, 2])
def test_ddp_under_torchrun_with_nccl(nproc):
    if reason := D.nccl(nproc):
        pytest.skip(reason)
    out = _torchrun(nproc, "labs.parallel.ddp_torchrun")
    assert f"{nproc} processes, nccl" in out and "False" not in out, out


def test_pipeline_under_torchrun_with_nccl():
    if reason := D.nccl(2):
        pytest.skip(reason)
    out = _torchrun(2, "labs.parallel.pipeline.torchrun")
    assert "False" not in out, out


def test_fsdp2_under_torchrun_with_nccl(tmp_path):
    from labs.parallel import fsdp

    n = min(2, torch.cuda.device_count())
    out = tmp_path / "fsdp.json"
    steps = ["--steps", "4", "--batch-size", "4", "--seq-len", "16", "--n-embd", "32"]
    _torchrun(n, "labs.parallel.fsdp.train", *steps, "--out", str(out))
    import json

    got = json.loads(out.read_text())
    ref = fsdp.run_single(fsdp.TrainConfig(steps=4, batch_size=4, seq_len=16, n_embd=32))
    torch.testing.assert_close(got["losses"], ref["losses"], rtol=1e-4, atol=1e-4)


def test_torchrun_backend_with_fewer_gpus_than_processes(monkeypatch):
    from labs import dist

    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(torch.cuda.device_count() + 1))
    assert dist.torchrun_backend() == "gloo"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert dist.torchrun_backend() == "nccl"


def test_more_processes_than_gpus_run_on_gloo():
    """torchrun_backend: with one process more than there are GPUs, every rank takes gloo."""
    n = torch.cuda.device_count() + 1
    out = _torchrun(n, "labs.parallel.ddp_torchrun")
    assert f"{n} processes, gloo" in out and "False" not in out, out
