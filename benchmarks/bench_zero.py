"""ZeRO on emulated ranks against the formulas, and emulated ZeRO-3 against FSDP2 under torchrun.

Part 1: per-rank model-state bytes of ZeRO-0/1/2/3 at 2, 4 and 8 emulated ranks (steady state at
the end of a step, and the peak seen during the step), as ratios to the fp32 formulas of
``labs.parallel.zero.zero_bytes_per_rank`` (4 + 4 + 8 bytes per parameter).

Part 2: the tiny GPT trained with 2 ranks by the emulated ZeRO-3 of ``labs.parallel.zero`` (threads) and by
PyTorch FSDP2 (``fully_shard``) under ``torchrun --nproc_per_node=2`` over gloo: median step time
and bytes sent per rank per step (emulated: from the trace; FSDP2: counted by wrapping the
all-gather and reduce-scatter calls FSDP2 makes, with ring accounting ``(N-1) x shard bytes``).

Run: ``python benchmarks/bench_zero.py``.  It prints ratios measured side by side in one run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labs import dist, gpt  # noqa: E402
from labs.parallel import fsdp, zero  # noqa: E402

CFG = fsdp.TrainConfig(steps=8, batch_size=8, seq_len=64, n_embd=128, n_head=4, n_layer=2)
WARMUP = 2


def part1() -> None:
    cfg = fsdp.TrainConfig(steps=2, batch_size=8, seq_len=32, n_embd=64)
    psi = gpt.GPT(cfg.model_config()).num_params()
    print(f"Part 1: tiny GPT, psi = {psi:,} parameters, fp32 Adam (16 B/param unsharded)")
    print(
        f"{'ranks':>5} {'stage':>5} {'ledger B':>11} {'formula B':>11} {'ledger/formula':>15}"
        f" {'peak B':>11} {'peak/formula':>13}"
    )
    for world in (2, 4, 8):
        for stage in range(4):
            res = fsdp.run_emulated(cfg, world, stage)
            f = zero.zero_bytes_per_rank(psi, world, stage, 4, 4, 8)["total"]
            led, peak = res["ledger"]["total"], res["peak"]
            print(
                f"{world:>5} {stage:>5} {led:>11,} {f:>11,.0f} {led / f:>15.3f} {peak:>11,}"
                f" {peak / f:>13.3f}"
            )


def _emulated_zero3() -> tuple[float, float, int]:
    psi = gpt.GPT(CFG.model_config()).num_params()

    def rank_fn():
        rank, world = dist.get_rank(), dist.get_world_size()
        rows = fsdp.local_rows(CFG, rank, world)
        trainer = zero.ZeroTrainer(gpt.GPT(CFG.model_config()), 3, lr=CFG.lr)
        times = []
        for step in range(1, CFG.steps + 1):
            x, y = fsdp.global_batch(CFG, step)
            dist.barrier()
            t0 = time.perf_counter()
            trainer.step(x[rows], y[rows])
            times.append(time.perf_counter() - t0)
        return times

    times = dist.launch(rank_fn, 2)[0][WARMUP:]
    sent = dist.last_trace().bytes_sent()[0] / CFG.steps
    return statistics.median(times), sent, psi


def _fsdp_worker(out: str) -> None:
    """Runs under torchrun: FSDP2 training with counted collective bytes."""
    import torch.distributed as tdist
    from torch.distributed.fsdp import fully_shard

    tdist.init_process_group("gloo")
    world, rank = tdist.get_world_size(), tdist.get_rank()
    sent = [0]
    ag, rs = tdist.all_gather_single, tdist.reduce_scatter_single

    def all_gather_single(output, input, *a, **k):
        sent[0] += (world - 1) * input.numel() * input.element_size()
        return ag(output, input, *a, **k)

    def reduce_scatter_single(output, input, *a, **k):
        sent[0] += (world - 1) * output.numel() * output.element_size()
        return rs(output, input, *a, **k)

    tdist.all_gather_single, tdist.reduce_scatter_single = all_gather_single, reduce_scatter_single
    model = gpt.GPT(CFG.model_config())
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=CFG.lr, betas=(0.9, 0.95), weight_decay=0.0)
    rows = fsdp.local_rows(CFG, rank, world)
    times = []
    for step in range(1, CFG.steps + 1):
        x, y = fsdp.global_batch(CFG, step)
        tdist.barrier()
        t0 = time.perf_counter()
        loss = model.loss(x[rows], y[rows])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"time": statistics.median(times[WARMUP:]), "sent": sent[0] / CFG.steps}, f)
    tdist.destroy_process_group()


def part2() -> None:
    t_emu, b_emu, psi = _emulated_zero3()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fsdp.json")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               __file__, "--fsdp-worker", out]  # fmt: skip
        subprocess.run(cmd, check=True, env=env, timeout=300, capture_output=True)
        with open(out) as f:
            fs = json.load(f)
    formula = zero.zero_comm_bytes_per_rank(psi, 2, 3, 4)
    print(f"\nPart 2: tiny GPT psi = {psi:,}, 2 ranks, batch {CFG.batch_size} x {CFG.seq_len}")
    print(f"{'':28} {'step (ms)':>10} {'sent B/rank/step':>17} {'sent / 3(N-1)/N psi':>20}")
    print(
        f"{'emulated ZeRO-3 (threads)':28} {1e3 * t_emu:>10.1f} {b_emu:>17,.0f}"
        f" {b_emu / formula:>20.3f}"
    )
    print(
        f"{'FSDP2 + torchrun (gloo)':28} {1e3 * fs['time']:>10.1f} {fs['sent']:>17,.0f}"
        f" {fs['sent'] / formula:>20.3f}"
    )
    print(
        f"ratios emulated / FSDP2: step time {t_emu / fs['time']:.2f}, "
        f"bytes {b_emu / fs['sent']:.3f}"
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--fsdp-worker":
        _fsdp_worker(sys.argv[2])
    else:
        part1()
        part2()
