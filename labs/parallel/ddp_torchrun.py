"""One data-parallel training step, three ways, under torchrun (Chapter 13).

Run it with two processes (CPU, gloo; NCCL on GPUs)::

    torchrun --standalone --nproc_per_node=2 -m labs.parallel.ddp_torchrun [--out grads.pt]

Every process builds the same small MLP (same seed) and takes its half of a batch of 8 examples.
It then computes the gradient of the batch-mean loss

1. with ``torch.nn.parallel.DistributedDataParallel`` (DDP averages the ranks' gradients),
2. with :func:`ddp_step`, the hand-written version: backward on the shard, then one
   ``labs.dist.all_reduce`` per gradient and a division by the world size.  Under torchrun the
   ``labs.dist`` calls go to ``torch.distributed``; in a notebook the same function runs on
   emulated ranks with ``labs.dist.launch``.

Rank 0 compares both with a single-process run on the whole batch, prints the result and, with
``--out``, saves the DDP gradients for comparison with the emulated run.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as tdist
from torch import nn

from labs import dist
from labs.parallel.data_parallel import shard

BATCH, D = 8, 6


def build() -> nn.Module:
    """The model, identical on every rank.  Its weights come from a private generator: emulated
    ranks are threads of one process and share torch's global random state."""
    model = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, 1))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) / p.shape[-1] ** 0.5)
    return model


def data() -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch, identical on every rank."""
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, D, generator=g), torch.randn(BATCH, 1, generator=g)


def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((out - y) ** 2).mean()


def ddp_step() -> list[torch.Tensor]:
    """Hand-written data parallelism: gradient of this rank's shard, averaged over the ranks."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build()
    x, y = data()
    loss_fn(model(shard(x, rank, world)), shard(y, rank, world)).backward()
    grads = [p.grad for p in model.parameters()]
    for g in grads:
        dist.all_reduce(g)
        g /= world
    return grads


def single_process() -> list[torch.Tensor]:
    """The reference: the whole batch on one process."""
    model = build()
    loss_fn(model(data()[0]), data()[1]).backward()
    return [p.grad for p in model.parameters()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None, help="save the DDP gradients here (rank 0)")
    args = parser.parse_args()
    # NCCL needs one GPU per process on each node; with fewer GPUs (or none) gloo on the CPU.
    backend = dist.torchrun_backend()
    tdist.init_process_group(backend)
    rank, world = tdist.get_rank(), tdist.get_world_size()
    device = torch.device(
        f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if backend == "nccl" else "cpu"
    )

    model = nn.parallel.DistributedDataParallel(build().to(device))
    x, y = data()
    loss_fn(model(shard(x, rank, world).to(device)), shard(y, rank, world).to(device)).backward()
    ddp = [p.grad.cpu() for p in model.parameters()]
    manual = [g.cpu() for g in dist.launch(ddp_step, world)[rank]]
    if rank == 0:
        ref = single_process()
        err_ddp = max((a - b).abs().max().item() for a, b in zip(ddp, ref))
        err_manual = max((a - b).abs().max().item() for a, b in zip(manual, ref))
        print(
            f"{world} processes, {backend}: DDP matches one process: {err_ddp < 1e-6}; "
            f"hand-written all-reduce matches one process: {err_manual < 1e-6}"
        )
        if args.out:
            torch.save(ddp, args.out)
    tdist.barrier()
    tdist.destroy_process_group()


if __name__ == "__main__":
    if "RANK" not in os.environ:
        raise SystemExit(
            "run me with: torchrun --standalone --nproc_per_node=2 -m labs.parallel.ddp_torchrun"
        )
    main()
