"""PyTorch's own pipeline schedules (``torch.distributed.pipelining``) on emulated ranks (Ch. 14).

The book's schedules (:mod:`labs.parallel.pipeline.schedules`) are data run by its own executor
(:mod:`labs.parallel.pipeline.execute`); PyTorch ships the same ideas as classes.  This module
runs PyTorch's on emulated ranks (:func:`labs.dist.launch`, which gives every rank a real
``torch.distributed`` process group, :mod:`labs.dist.backend`), on the same layers, inputs and
loss as the book's executor, so the two can be compared number for number::

    from labs.parallel.pipeline.torch_schedules import run_torch_schedule
    run = run_torch_schedule("Schedule1F1B", layers, xs, ys, ranks=4)
    run.grads[i]       # the gradients of layer i (its parameters, in order)
    run.loss           # the sum of the micro-batch losses
    run.messages       # point-to-point messages the ranks sent (from the emulator's trace)

Where the stages go, by schedule (``p`` ranks, ``L`` layers cut into equal stages):

* ``ScheduleGPipe``, ``Schedule1F1B``: ``p`` stages, stage ``r`` on rank ``r``;
* ``ScheduleInterleaved1F1B``, ``ScheduleLoopedBFS``, ``ScheduleInterleavedZeroBubble``: ``2p``
  stages, stage ``s`` on rank ``s mod p`` (two chunks per rank, the book's interleaving);
* ``ScheduleZBVZeroBubble``, ``ScheduleDualPipeV``: ``2p`` stages in a V, rank ``r`` holding
  stages ``r`` and ``2p - 1 - r`` (Chapter 18's DualPipeV placement).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from labs import dist

__all__ = ["PLACEMENT", "TorchRun", "run_torch_schedule", "stages_of"]

PLACEMENT = {
    "ScheduleGPipe": "one",
    "Schedule1F1B": "one",
    "ScheduleInterleaved1F1B": "loop",
    "ScheduleLoopedBFS": "loop",
    "ScheduleInterleavedZeroBubble": "loop",
    "ScheduleZBVZeroBubble": "v",
    "ScheduleDualPipeV": "v",
}


@dataclass
class TorchRun:
    """One training step of a PyTorch schedule: ``grads[i]`` are layer ``i``'s parameter
    gradients, ``loss`` the summed micro-batch losses, ``messages`` the point-to-point messages
    sent by all ranks together."""

    grads: list[list[torch.Tensor]]
    loss: float
    messages: int


def stages_of(name: str, rank: int, ranks: int) -> tuple[list[int], int]:
    """(the stage indices rank ``rank`` holds, the number of stages) for schedule ``name``."""
    kind = PLACEMENT[name]
    if kind == "one":
        return [rank], ranks
    if kind == "loop":
        return [rank, rank + ranks], 2 * ranks
    return [rank, 2 * ranks - 1 - rank], 2 * ranks


def _half_squared_error(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((out - y) ** 2).sum()


def _rank_step(name: str, layers: list[nn.Module], xs: list[torch.Tensor],
               ys: list[torch.Tensor], loss_fn: Callable) -> tuple:  # fmt: skip
    from torch.distributed import pipelining

    rank, ranks = dist.get_rank(), dist.get_world_size()
    dist.init_process_group("gloo")
    mine, n_stages = stages_of(name, rank, ranks)
    per = len(layers) // n_stages
    own = copy.deepcopy(layers)  # a process of its own would have its own copy
    parts = {s: nn.Sequential(*own[s * per : (s + 1) * per]) for s in mine}
    stages = [pipelining.PipelineStage(parts[s], s, n_stages, torch.device("cpu")) for s in mine]
    cls = getattr(pipelining, name)
    args = (stages[0],) if PLACEMENT[name] == "one" else (stages,)
    # scale_grads=False: the sum over micro-batches, as the book's executor computes it
    schedule = cls(*args, n_microbatches=len(xs), loss_fn=loss_fn, scale_grads=False)
    last = n_stages - 1 in mine
    losses: list[torch.Tensor] = []
    kwargs = {"target": torch.cat(ys), "losses": losses} if last else {}
    if 0 in mine:
        schedule.step(torch.cat(xs), **kwargs)
    else:
        schedule.step(**kwargs)
    dist.destroy_process_group()
    grads = {s * per + i: [p.grad.clone() for p in layer.parameters()]
             for s in mine for i, layer in enumerate(parts[s])}  # fmt: skip
    return grads, float(sum(v.item() for v in losses))


def run_torch_schedule(name: str, layers: list[nn.Module], xs: list[torch.Tensor],
                       ys: list[torch.Tensor], ranks: int,
                       loss_fn: Callable | None = None) -> TorchRun:  # fmt: skip
    """One step of PyTorch's schedule ``name`` (a class name of ``torch.distributed.pipelining``,
    a key of :data:`PLACEMENT`) on ``ranks`` emulated ranks, with one micro-batch per element of
    ``xs`` / ``ys``; ``layers`` (not modified) are cut into equal stages (see the module doc).
    ``loss_fn(output, target)`` defaults to the book's executor's: half the summed squared error.
    """
    if name not in PLACEMENT:
        raise ValueError(f"run_torch_schedule: unknown schedule {name!r}; one of {list(PLACEMENT)}")
    n_stages = stages_of(name, 0, ranks)[1]
    if len(layers) % n_stages:
        raise ValueError(
            f"run_torch_schedule: {len(layers)} layers do not cut into {n_stages} equal stages "
            f"({name} on {ranks} ranks)"
        )
    fn = loss_fn or _half_squared_error
    results = dist.launch(_rank_step, ranks, name, layers, xs, ys, fn, timeout=300)
    grads = {i: g for per_rank, _ in results for i, g in per_rank.items()}
    messages = sum(1 for rec in dist.last_trace().records for r in rec if r.op in ("send", "isend"))
    return TorchRun([grads[i] for i in range(len(layers))], sum(loss for _, loss in results),
                    messages)  # fmt: skip
