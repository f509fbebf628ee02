"""Data parallelism: sharding the batch, summing gradients, gradient buckets (Chapter 13).

Every data-parallel rank holds a full replica of the model, computes the gradient of its shard of
the batch, and the ranks sum (or average) their gradients with an all-reduce, so that every replica
applies the same update.  PyTorch's ``DistributedDataParallel`` does not all-reduce each gradient
tensor separately: it packs them, in the order backward produces them (last layer first), into
*buckets* of about ``bucket_cap_mb`` MiB (25 MiB by default; see :func:`ddp_bucket_plan` for its
exact rule) and all-reduces a bucket as soon as all of its gradients are ready, overlapping
communication with the rest of the backward pass.

This module holds the pieces the chapter and the lab use::

    x_mine = shard(x, rank, world_size)                      # this rank's rows of the batch
    plan = bucket_plan([g.nbytes for g in grads], 25e6)      # buckets of at most 25e6 bytes
    plan = ddp_bucket_plan([g.nbytes for g in grads])        # DDP's buckets (default caps)
    all_reduce_buckets(grads, 25e6)                          # sum them over the ranks, in place
    predicted_time(plan, sizes, p=8, link=alpha_beta.NVLINK)  # alpha-beta estimate, seconds
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from labs import dist
from labs.dist import alpha_beta

__all__ = [
    "shard",
    "core_grads",
    "bucket_plan",
    "ddp_bucket_plan",
    "all_reduce_buckets",
    "predicted_time",
]


def shard(batch, rank: int, world_size: int):
    """Rows ``[rank * n/W, (rank + 1) * n/W)`` of ``batch`` (numpy array or tensor, n rows).

    Raises ``ValueError`` unless the batch splits evenly (as ``DistributedSampler`` pads or drops
    to make it so): unequal shards would weight some examples more than others in the average.
    """
    n = len(batch)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"shard: rank {rank} is not in 0..{world_size - 1}")
    if n % world_size:
        raise ValueError(
            f"shard: a batch of {n} rows does not split evenly over {world_size} ranks; "
            f"use a batch size that is a multiple of {world_size}"
        )
    k = n // world_size
    return batch[rank * k : (rank + 1) * k]


def core_grads(model) -> list[np.ndarray]:
    """The gradient arrays of a :class:`labs.core.Model`, in the order backward produces them
    (last layer first, ``b`` before ``a``), as DDP sees them."""
    return [model.grads[i][k] for i in reversed(range(model.n)) for k in ("b", "a")]


def bucket_plan(sizes: Sequence[int], bucket_bytes: float) -> list[list[int]]:
    """Group gradients, in the given (backward) order, into buckets of at most ``bucket_bytes``.

    A gradient larger than the cap gets a bucket of its own.  This is the simplest packing rule
    (Lab 13 builds it); DDP's own rule closes a bucket only once it *reaches* the cap
    (:func:`ddp_bucket_plan`).  Returns the list of buckets, each a list of indices into ``sizes``
    (bytes per gradient).
    """
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_plan: bucket_bytes must be positive, got {bucket_bytes}")
    buckets: list[list[int]] = []
    filled = 0.0
    for i, size in enumerate(sizes):
        if buckets and filled + size <= bucket_bytes:
            buckets[-1].append(i)
            filled += size
        else:
            buckets.append([i])
            filled = size
    return buckets


MIB = 1024 * 1024
DDP_BUCKET_CAP_MB = 25  # torch.nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB
DDP_FIRST_BUCKET_BYTES = MIB  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


def ddp_bucket_plan(sizes: Sequence[int], bucket_cap_mb: float | None = None) -> list[list[int]]:
    """The buckets ``DistributedDataParallel(model, bucket_cap_mb=...)`` forms over gradients of
    ``sizes`` bytes, given in the order the backward pass makes them ready (last layer first).

    DDP's rule, from ``torch/nn/parallel/distributed.py`` and its C++ reducer: the cap is
    ``bucket_cap_mb`` **MiB** (25 by default), a gradient joins the open bucket, and the bucket is
    closed as soon as its bytes *reach* the cap, so every bucket but the last holds at least the cap
    and may exceed it by part of one gradient.  With ``bucket_cap_mb=None`` (the default) the
    first bucket, the one of the last layers, is capped at 1 MiB instead, so that the first
    all-reduce starts early; an explicit ``bucket_cap_mb`` caps every bucket alike.  This is the
    plan DDP rebuilds after its first step from the order in which the gradients arrived; in the
    first step it all-reduces all gradients as one bucket.  All gradients are taken to share one
    dtype and device (DDP buckets each dtype and device apart).  Returns a list of buckets, each a
    list of indices into ``sizes``.
    """
    cap_mb = DDP_BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb
    if cap_mb <= 0:
        raise ValueError(f"ddp_bucket_plan: bucket_cap_mb must be positive, got {bucket_cap_mb}")
    cap = int(cap_mb * MIB)
    caps = [DDP_FIRST_BUCKET_BYTES if bucket_cap_mb is None else cap, cap]
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i, size in enumerate(sizes):
        current.append(i)
        filled += size
        if filled >= caps[min(len(buckets), 1)]:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


def all_reduce_buckets(grads: Sequence, bucket_bytes: float, group=None, average: bool = False):
    """Sum (or average) ``grads`` over the ranks of ``group``, one all-reduce per bucket.

    ``grads``: numpy arrays or tensors of one dtype, in backward order; updated in place.
    Returns the bucket plan used (see :func:`bucket_plan`).
    """
    arrays = [torch.as_tensor(g) for g in grads]  # shares memory with numpy inputs
    plan = bucket_plan([a.numel() * a.element_size() for a in arrays], bucket_bytes)
    size = dist.get_world_size(group)
    for bucket in plan:
        flat = torch.cat([arrays[i].reshape(-1) for i in bucket])
        dist.all_reduce(flat, group=group)
        if average:
            flat /= size
        offset = 0
        for i in bucket:
            n = arrays[i].numel()
            arrays[i].copy_(flat[offset : offset + n].view_as(arrays[i]))
            offset += n
    return plan


def predicted_time(
    plan: list[list[int]], sizes: Sequence[int], p: int, link: alpha_beta.Link
) -> float:
    """Alpha-beta time (seconds) of the ring all-reduces of a bucket plan on ``p`` ranks, one
    after the other (no overlap with compute)."""
    return sum(
        alpha_beta.collective_time("all_reduce", sum(sizes[i] for i in b), p, link) for b in plan
    )
