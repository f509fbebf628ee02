"""One pipeline-parallel training step with ``torch.distributed.pipelining`` (Chapter 14).

Run it with two processes (CPU, gloo; NCCL on GPUs)::

    torchrun --standalone --nproc_per_node=2 -m labs.parallel.pipeline.torchrun

Every process builds the same 4-layer MLP from the same seed, keeps its half as a
``PipelineStage`` and runs one step with ``ScheduleGPipe`` and one with ``Schedule1F1B`` (4
micro-batches).  Rank 0 then gathers the stage gradients and compares them with the whole model run
in one process; it prints one line per schedule.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as tdist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from labs import dist

D, BATCH, MICRO = 16, 16, 4


def build() -> nn.Sequential:
    """The full model, identical on every process (same seed)."""
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(D, D), nn.Tanh()) for _ in range(4)])


def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((out - target) ** 2).sum()


def main() -> None:
    # NCCL needs one GPU per process on each node; with fewer GPUs (or none) gloo on the CPU.
    backend = dist.torchrun_backend()
    tdist.init_process_group(backend)
    rank, world = tdist.get_rank(), tdist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device(f"cuda:{local}") if backend == "nccl" else torch.device("cpu")
    torch.manual_seed(1)
    x, y = torch.randn(BATCH, D), torch.randn(BATCH, D)

    full = build()
    ref = build()
    loss_fn(ref(x), y).backward()  # the single-process reference
    ref_grads = torch.cat([p.grad.flatten() for p in ref.parameters()])

    per = len(full) // world
    for name, cls in (("ScheduleGPipe", ScheduleGPipe), ("Schedule1F1B", Schedule1F1B)):
        part = nn.Sequential(*[build()[i] for i in range(rank * per, (rank + 1) * per)]).to(device)
        stage = PipelineStage(part, rank, world, device)
        # scale_grads=False: keep the sum over micro-batches (the default divides by MICRO).
        schedule = cls(stage, n_microbatches=MICRO, loss_fn=loss_fn, scale_grads=False)
        if rank == 0:
            schedule.step(x.to(device))
        elif rank == world - 1:
            schedule.step(target=y.to(device))
        else:
            schedule.step()
        mine = torch.cat([p.grad.flatten() for p in part.parameters()])  # on this rank's device
        pieces = [torch.zeros_like(mine) for _ in range(world)]
        tdist.all_gather(pieces, mine)
        if rank == 0:
            err = (torch.cat(pieces).cpu() - ref_grads).abs().max().item()
            print(
                f"{name:<14} {world} stages, {MICRO} micro-batches: "
                f"gradients match the single-process run: {err < 1e-5} (max diff {err:.0e})"
            )
    tdist.destroy_process_group()


if __name__ == "__main__":
    if "RANK" not in os.environ:
        raise SystemExit(
            "run me with: torchrun --standalone --nproc_per_node=2 -m labs.parallel.pipeline.torchrun"
        )
    main()
