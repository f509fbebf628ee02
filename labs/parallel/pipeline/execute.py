"""Run a pipeline schedule on emulated ranks for a real model (Chapters 14 and 18).

:func:`run_schedule` gives every rank of a :class:`labs.parallel.pipeline.Schedule` its model chunks and
executes the rank's action list with real tensors: ``F`` receives an activation (``labs.dist``
``recv``), runs the chunk and sends the output on; ``B`` receives the output gradient, computes the
input gradient and sends it back; ``W`` computes the weight gradients that a split ``B`` left for
later.  Every message carries a tag naming (kind, micro-batch, stage), so any order of actions that
the schedule allows is matched correctly.

Each rank also keeps a *logical clock*: an action starts when the rank is free and its input has
arrived (the sender's clock travels with the message) and lasts ``costs[kind]``.  The resulting
:class:`labs.parallel.pipeline.Timeline` is therefore the timeline of what the ranks really did, in cost
units, reproducible run to run (wall-clock time on threads that share a CPU would say little about
a GPU cluster).  The rank also counts the micro-batches whose activations it holds.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from labs import dist
from labs.parallel.pipeline.schedules import Schedule
from labs.parallel.pipeline.sim import Event, Timeline, _split_set, action_cost

__all__ = ["PipelineResult", "run_schedule", "reference_grads"]


@dataclass
class PipelineResult:
    """What :func:`run_schedule` returns.

    Attributes:
        grads: per model stage, the list of parameter gradients (summed over micro-batches and,
            for schedules that hold two copies of a stage, over both copies).
        loss: the sum of the micro-batch losses.
        timeline: the executed timeline (logical clock, cost units).
        peak_stash: per rank, the most micro-batch chunks whose activations were held at once.
    """

    grads: list[list[torch.Tensor]]
    loss: float
    timeline: Timeline
    peak_stash: list[int]


def _tag(kind: str, mb: int, pos: int, s: Schedule) -> int:
    return (("FB".index(kind) * s.m + mb) * s.num_stages + pos) * 2


def _rank_program(s, stages, xs, ys, loss_fn, costs, comm):
    rank = dist.get_rank()
    split = _split_set(s)
    chunks = {}  # chunk -> its own copy of the stage module
    for route in s.routes:
        for pos, (r, c) in enumerate(route):
            if r == rank and c not in chunks:
                chunks[c] = (pos, copy.deepcopy(stages[pos]))
    saved, pending_w = {}, {}  # (mb, chunk) -> tensors kept for backward / for W
    local = {}  # messages a rank passes to itself (the turn of a V-shaped route)
    clock, events, live, peak, loss_sum = 0.0, [], 0, 0, 0.0
    acts = s.actions[rank]
    i = 0
    while i < len(acts):
        group = acts[i : i + (2 if acts[i].overlap else 1)]
        i += len(group)
        inputs, ready = [], [clock]
        for a in group:  # receive everything the group needs first
            pos = s.position(a.mb, rank, a.chunk)
            src = None
            if a.kind == "F" and pos > 0:
                src, kind, shape = s.routes[a.mb][pos - 1][0], "F", xs[a.mb].shape
            if a.kind == "B" and pos < s.num_stages - 1:
                src, kind, shape = s.routes[a.mb][pos + 1][0], "B", xs[a.mb].shape
            if src is None:
                inputs.append(None)
                continue
            tag = _tag(kind, a.mb, pos - 1 if kind == "F" else pos + 1, s)
            if src == rank:
                buf, ts = local.pop(tag)
            else:
                buf, ts = torch.empty(shape), torch.zeros(1, dtype=torch.float64)
                dist.recv(buf, src, tag=tag)
                dist.recv(ts, src, tag=tag + 1)
            inputs.append(buf)
            ready.append(float(ts) + (comm if src != rank else 0.0))
        start = max(ready)
        total = sum(action_cost(s, rank, a, costs) for a in group)
        if len(group) == 2 and "F&B" in costs:
            total = costs["F&B"] * s.p / s.num_stages
        outgoing, t = [], start
        for a, received in zip(group, inputs):
            pos, module = chunks[a.chunk]
            c = (
                action_cost(s, rank, a, costs)
                * total
                / sum(action_cost(s, rank, b, costs) for b in group)
            )
            events.append(Event(rank, a, t, t + c))
            t += c
            if a.kind == "F":
                x = xs[a.mb] if pos == 0 else received.requires_grad_()
                y = module(x)
                if pos == s.num_stages - 1:
                    y = loss_fn(y, ys[a.mb])
                    loss_sum += float(y.detach())
                else:
                    outgoing.append(("F", a.mb, pos, y.detach()))
                saved[(a.mb, a.chunk)] = (x, y)
                live += 1
                peak = max(peak, live)
            elif a.kind == "B":
                x, y = saved.pop((a.mb, a.chunk))
                grad_y = None if pos == s.num_stages - 1 else received
                params, is_split = list(module.parameters()), (rank, a.mb, a.chunk) in split
                want = ([x] if pos > 0 else []) + ([] if is_split else params)
                got = torch.autograd.grad(y, want, grad_y, retain_graph=is_split) if want else ()
                if pos > 0:
                    outgoing.append(("B", a.mb, pos, got[0]))
                    got = got[1:]
                if is_split:
                    pending_w[(a.mb, a.chunk)] = (y, grad_y)
                else:
                    _accumulate(params, got)
                    live -= 1
            else:  # W: the weight gradients a split B left behind
                y, grad_y = pending_w.pop((a.mb, a.chunk))
                params = list(module.parameters())
                _accumulate(params, torch.autograd.grad(y, params, grad_y))
                live -= 1
        clock = start + total
        for kind, mb, pos, tensor in outgoing:  # results leave when the group ends
            dst, tag = s.routes[mb][pos + 1 if kind == "F" else pos - 1][0], _tag(kind, mb, pos, s)
            stamp = torch.tensor([clock], dtype=torch.float64)
            if dst == rank:
                local[tag] = (tensor.clone(), stamp)
            else:
                dist.send(tensor.contiguous(), dst, tag=tag)
                dist.send(stamp, dst, tag=tag + 1)
    grads = {
        pos: [p.grad if p.grad is not None else torch.zeros_like(p) for p in module.parameters()]
        for pos, module in chunks.values()
    }
    return grads, loss_sum, events, peak


def _accumulate(params, grads):
    for p, g in zip(params, grads):
        p.grad = g.clone() if p.grad is None else p.grad + g


def run_schedule(
    s: Schedule,
    stages: list[nn.Module],
    xs: list[torch.Tensor],
    ys: list[torch.Tensor],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    costs: dict[str, float] | None = None,
    comm: float = 0.0,
) -> PipelineResult:
    """Execute schedule ``s`` on ``s.p`` emulated ranks.

    Args:
        stages: the model cut into ``s.num_stages`` modules; each keeps the shape of its input
            (the activations sent between stages have the shape of ``xs[mb]``).
        xs, ys: per micro-batch, the input (mb, d) and the target given to ``loss_fn``.
        loss_fn: scalar loss of the last stage's output; default: half the summed squared error.
        costs, comm: the logical cost of each action kind and of a message, as in
            :func:`labs.parallel.pipeline.simulate`.

    Returns:
        A :class:`PipelineResult`; its gradients equal those of running the stages one after the
        other on the whole batch (see :func:`reference_grads`).
    """
    if len(stages) != s.num_stages or len(xs) != s.m or len(ys) != s.m:
        raise ValueError(
            f"run_schedule: {s.name} needs {s.num_stages} stages and {s.m} micro-batches, got "
            f"{len(stages)} stages, {len(xs)} inputs and {len(ys)} targets"
        )
    s.check()
    costs = {"F": 1.0, "B": 1.0, "W": 1.0} | (costs or {})
    loss_fn = loss_fn or (lambda out, y: 0.5 * ((out - y) ** 2).sum())
    outs = dist.launch(_rank_program, s.p, s, stages, xs, ys, loss_fn, costs, comm)
    grads: list[list[torch.Tensor] | None] = [None] * s.num_stages
    for stage_grads, _, _, _ in outs:  # a stage held twice (DualPipe): the copies' grads add up
        for pos, g in stage_grads.items():
            grads[pos] = g if grads[pos] is None else [a + b for a, b in zip(grads[pos], g)]
    loss = sum(o[1] for o in outs)
    timeline = Timeline(s, [o[2] for o in outs])
    return PipelineResult(grads, loss, timeline, [o[3] for o in outs])


def reference_grads(stages, xs, ys, loss_fn=None):
    """Gradients and loss of the unsplit model on all micro-batches, on one device."""
    loss_fn = loss_fn or (lambda out, y: 0.5 * ((out - y) ** 2).sum())
    model = nn.Sequential(*[copy.deepcopy(m) for m in stages])
    loss = sum(loss_fn(model(x), y) for x, y in zip(xs, ys))
    loss.backward()
    return [[p.grad for p in m.parameters()] for m in model], float(loss.detach())
