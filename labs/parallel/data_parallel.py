"""Data parallelism: sharding the batch, summing gradients, gradient buckets (Chapter 13).

Every data-parallel rank holds a full replica of the model, computes the gradient of its shard of
the batch, and the ranks sum (or average) their gradients with an all-reduce, so that every replica
applies the same update.  PyTorch's ``DistributedDataParallel`` does not all-reduce each gradient
tensor separately: it packs them, in the order backward produces them (last layer first), into
*buckets* of at most ``bucket_cap_mb`` (25 MB by default) and all-reduces a bucket as soon as all of
its gradients are ready, overlapping communication with the rest of the backward pass.

This module holds the pieces the chapter and the lab use::

    x_mine = shard(x, rank, world_size)                      # this rank's rows of the batch
    plan = bucket_plan([g.nbytes for g in grads], 25e6)      # which gradients share a bucket
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

    A gradient larger than the cap gets a bucket of its own, as in DDP.  Returns the list of
    buckets, each a list of indices into ``sizes`` (bytes per gradient).
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
