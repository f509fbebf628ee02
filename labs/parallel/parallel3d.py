"""3D parallelism: data x tensor x pipeline process groups and one training step (Chapter 17).

A job of ``dp * tp * pp`` ranks is a 3D grid.  As in Megatron-LM, the tensor-parallel index varies
fastest, then data parallel, then pipeline::

    rank = tp_rank + tp * (dp_rank + dp * pp_rank)

so the ``tp`` ranks of a tensor-parallel group are neighbours (on one node, on NVLink), and the
pipeline stages are farthest apart.  Each rank belongs to one group per dimension:

* its **tensor-parallel group** (same dp and pp index): all-reduces inside every layer;
* its **data-parallel group** (same tp and pp index): all-reduces the gradients once per step;
* its **pipeline group** (same dp and tp index): sends activations and gradients to neighbours.

:func:`train_step` runs one training step of a model made of ``pp`` stages of Megatron MLP blocks
on emulated ranks, and :func:`reference_step` the same step on one device.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from labs import dist
from labs.dist import alpha_beta
from labs.parallel.tensor_parallel import MLP, ParallelMLP

__all__ = [
    "Layout",
    "train_step",
    "reference_step",
    "make_stages",
    "shard_of",
    "step_communication",
]


@dataclass(frozen=True)
class Layout:
    """A dp x tp x pp grid of ranks.  ``order`` names the dimensions from the fastest-varying
    to the slowest: the default "tp-dp-pp" is Megatron-LM's (tensor-parallel ranks adjacent)."""

    dp: int
    tp: int
    pp: int
    order: str = "tp-dp-pp"

    def _dims(self) -> list[str]:
        dims = self.order.split("-")
        if sorted(dims) != ["dp", "pp", "tp"]:
            raise ValueError(f"Layout: order must name dp, tp and pp once each, got {self.order!r}")
        return dims

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    def rank(self, dp: int, tp: int, pp: int) -> int:
        """Global rank of grid point (dp, tp, pp)."""
        for name, v, n in (("dp", dp, self.dp), ("tp", tp, self.tp), ("pp", pp, self.pp)):
            if not 0 <= v < n:
                raise ValueError(f"Layout.rank: {name} index {v} is outside 0..{n - 1}")
        index, size = {"dp": dp, "tp": tp, "pp": pp}, {"dp": self.dp, "tp": self.tp, "pp": self.pp}
        rank, stride = 0, 1
        for dim in self._dims():
            rank += index[dim] * stride
            stride *= size[dim]
        return rank

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(dp, tp, pp) index of a global rank."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"Layout.coords: rank {rank} is outside 0..{self.world_size - 1}")
        size, index = {"dp": self.dp, "tp": self.tp, "pp": self.pp}, {}
        for dim in self._dims():
            index[dim], rank = rank % size[dim], rank // size[dim]
        return index["dp"], index["tp"], index["pp"]

    def groups(self, kind: str) -> list[list[int]]:
        """All groups of one kind ("dp", "tp" or "pp"), each a sorted list of global ranks."""
        if kind not in ("dp", "tp", "pp"):
            raise ValueError(f"Layout.groups: kind must be 'dp', 'tp' or 'pp', got {kind!r}")
        found: dict[tuple, list[int]] = {}
        for r in range(self.world_size):
            d, t, p = self.coords(r)
            key = {"dp": (t, p), "tp": (d, p), "pp": (d, t)}[kind]
            found.setdefault(key, []).append(r)
        return list(found.values())

    def new_groups(self) -> dict[str, object]:
        """Inside a rank: create every group with ``dist.new_group`` (all ranks must create all
        groups, in the same order, as in torch) and return this rank's {"dp", "tp", "pp"}."""
        me = dist.get_rank()
        mine = {}
        for kind in ("tp", "dp", "pp"):
            for ranks in self.groups(kind):
                g = dist.new_group(ranks)
                if me in ranks:
                    mine[kind] = g
        return mine


def step_communication(
    layout: Layout,
    per_node: int,
    layers: int,
    hidden: int,
    seq: int,
    micro_batch: int,
    micro_batches: int,
    bytes_per_value: int = 2,
    intra: alpha_beta.Link = alpha_beta.NVLINK,
    inter: alpha_beta.Link = alpha_beta.INFINIBAND,
) -> dict[str, dict]:
    """Alpha-beta estimate of one training step's communication per GPU, per dimension, for a
    GPT-style model (12 h^2 parameters per layer) placed ``per_node`` GPUs to a node.

    A group whose ranks sit on one node uses ``intra``, otherwise ``inter``.  TP: 4 all-reduces of
    the activation (micro_batch x seq x hidden) per layer and micro-batch; PP: one activation
    forward and one gradient back per micro-batch and stage boundary; DP: one all-reduce of the
    stage's gradient shard per step.  Returns {kind: {"calls", "bytes", "seconds", "link"}} with
    bytes per call and the total seconds of the step (no overlap).
    """

    dims, size = layout._dims(), {"dp": layout.dp, "tp": layout.tp, "pp": layout.pp}

    def link_of(kind: str) -> alpha_beta.Link:
        # the ranks of one group differ only in `kind`'s index, `stride` apart; written out here
        # rather than through Layout.groups, which a lab's sealed copy withholds (lab 17 asks for it)
        stride = math.prod(size[d] for d in dims[: dims.index(kind)])
        n = size[kind]
        firsts = (r for r in range(layout.world_size) if (r // stride) % n == 0)
        spans = any((r + (n - 1) * stride) // per_node != r // per_node for r in firsts)
        return inter if spans else intra

    act = micro_batch * seq * hidden * bytes_per_value
    out = {}
    calls = 4 * (layers // layout.pp) * micro_batches if layout.tp > 1 else 0
    link = link_of("tp")
    out["tp"] = {
        "calls": calls,
        "bytes": act,
        "link": link.name,
        "seconds": calls * alpha_beta.collective_time("all_reduce", act, layout.tp, link),
    }
    calls = 2 * micro_batches if layout.pp > 1 else 0
    link = link_of("pp")
    out["pp"] = {"calls": calls, "bytes": act, "link": link.name, "seconds": calls * link.time(act)}
    grad = 12 * hidden**2 * layers // (layout.tp * layout.pp) * bytes_per_value
    link = link_of("dp")
    out["dp"] = {
        "calls": int(layout.dp > 1),
        "bytes": grad,
        "link": link.name,
        "seconds": (layout.dp > 1)
        * alpha_beta.collective_time("all_reduce", grad, layout.dp, link),
    }
    return out


def make_stages(pp: int, blocks_per_stage: int, d: int, seed: int = 0) -> list[nn.Sequential]:
    """``pp`` stages, each ``blocks_per_stage`` MLP blocks (d -> 4d -> d) with residuals."""
    torch.manual_seed(seed)
    return [
        nn.Sequential(*[_Residual(MLP(d, 4 * d)) for _ in range(blocks_per_stage)])
        for _ in range(pp)
    ]


class _Residual(nn.Module):
    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return x + self.inner(x)


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((out - y) ** 2).sum()


def _program(layout: Layout, stages, x, y, micro_batches: int):
    rank = dist.get_rank()
    d, t, p = layout.coords(rank)
    groups = layout.new_groups()
    stage = nn.Sequential(
        *[_Residual(ParallelMLP(blk.inner, t, layout.tp, groups["tp"])) for blk in stages[p]]
    )
    xs = x.chunk(layout.dp)[d].chunk(micro_batches)  # this data-parallel shard, in micro-batches
    ys = y.chunk(layout.dp)[d].chunk(micro_batches)
    prev = layout.rank(d, t, p - 1) if p > 0 else None
    nxt = layout.rank(d, t, p + 1) if p < layout.pp - 1 else None
    saved = []
    for mb in range(micro_batches):  # GPipe: all forwards ...
        inp = xs[mb].clone()
        if prev is not None:
            dist.recv(inp, prev)
        inp.requires_grad_(prev is not None)
        out = stage(inp)
        if nxt is not None:
            dist.send(out.detach().contiguous(), nxt)
        saved.append((inp, out))
    for mb in range(micro_batches):  # ... then all backwards
        inp, out = saved[mb]
        if nxt is None:
            _loss(out, ys[mb]).backward()
        else:
            grad = torch.empty_like(out)
            dist.recv(grad, nxt)
            out.backward(grad)
        if prev is not None:
            dist.send(inp.grad.contiguous(), prev)
    for param in stage.parameters():  # data parallelism: sum the gradients of the replicas
        dist.all_reduce(param.grad, group=groups["dp"])
    return {name: prm.grad for name, prm in stage.named_parameters()}


def train_step(
    layout: Layout,
    stages: list[nn.Sequential],
    x: torch.Tensor,
    y: torch.Tensor,
    micro_batches: int = 2,
) -> list[dict[str, torch.Tensor]]:
    """One step of ``stages`` (``layout.pp`` of them) on ``layout.world_size`` emulated ranks.

    x, y: the global batch (n, d); n must split into dp shards of ``micro_batches`` pieces.
    Returns, per global rank, ``{parameter name: gradient}`` of its shard of its stage.
    """
    if len(stages) != layout.pp:
        raise ValueError(f"train_step: layout has pp={layout.pp} but {len(stages)} stages given")
    if len(x) % (layout.dp * micro_batches):
        raise ValueError(
            f"train_step: batch of {len(x)} rows does not split into dp={layout.dp} "
            f"shards of {micro_batches} micro-batches"
        )
    return dist.launch(_program, layout.world_size, layout, stages, x, y, micro_batches)


def reference_step(stages: list[nn.Sequential], x: torch.Tensor, y: torch.Tensor):
    """The same step on one device: returns per stage ``{parameter name: gradient}``."""
    model = copy.deepcopy(nn.Sequential(*stages))
    _loss(model(x), y).backward()
    return [{n: p.grad for n, p in stage.named_parameters()} for stage in model]


def shard_of(layout: Layout, rank: int, name: str, full: torch.Tensor) -> torch.Tensor:
    """The slice of a full gradient/weight that ``rank`` holds for parameter ``name`` of its
    stage (fc1 split by output rows, fc2 weight by input columns, fc2 bias replicated)."""
    _, t, _ = layout.coords(rank)
    if ".fc1." in name:
        k = full.shape[0] // layout.tp
        return full[t * k : (t + 1) * k]
    if name.endswith("fc2.weight"):
        k = full.shape[1] // layout.tp
        return full[:, t * k : (t + 1) * k]
    return full
