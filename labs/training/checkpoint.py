"""Checkpoints that survive crashes: atomic directories, verified on load, resumed exactly.

A checkpoint is a directory ``ROOT/step_00000010/`` holding the state files and a
``manifest.json`` (size and SHA-256 of every file, the step, the format, the world size).  Three
formats share that layout:

* ``"full"``: one ``state.pt`` with the whole (unsharded) state, written by rank 0 alone --
  :func:`save_full` / :func:`load_full`;
* ``"shards"``: one ``shard-RRRRR-of-WWWWW.pt`` per rank (the ZeRO emulation of :mod:`labs.parallel.zero`)
  -- :func:`save_shards` / :func:`load_shard`; a different world size is refused;
* ``"dcp"``: the files of ``torch.distributed.checkpoint`` (every process writes its own shards
  of the DTensors of an FSDP2 model) -- :func:`save_dcp` / :func:`load_dcp`; DCP reshards on load,
  so the world size may change.

Atomicity: everything is first written into ``ROOT/.tmp-step_00000010/``; only when every file is
complete and flushed does rank 0 write the manifest and ``os.replace`` the directory to its final
name, then atomically rewrite ``ROOT/latest``.  A crash or kill at any point before that leaves
the previous checkpoint (and ``latest``) untouched.  For tests, setting the environment variable
``LABS_CKPT_CRASH_BEFORE_COMMIT=1`` makes the process die (``os._exit(17)``) right before the rename.

Loading verifies the manifest first: a missing, truncated or corrupted file raises
:class:`CheckpointError` naming the file and what is wrong; :func:`load_model_state` compares every
key and shape with the model before touching it, so a load either succeeds or changes nothing.

The atomic commit and the verification live in :mod:`labs.training.commit` (re-exported here);
this module holds the three formats and :func:`load_model_state`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from labs.training.commit import (
    CRASH_ENV,
    CheckpointError,
    begin,
    check_format,
    commit,
    latest_step,
    step_dir,
    tmp_dir,
    verify,
)

__all__ = [
    "CheckpointError",
    "CRASH_ENV",
    "step_dir",
    "latest_step",
    "verify",
    "save_full",
    "load_full",
    "save_shards",
    "load_shard",
    "save_dcp",
    "load_dcp",
    "load_model_state",
]


def save_full(root: str | os.PathLike, step: int, state: dict[str, Any], **meta: Any) -> Path:
    """Write the whole training ``state`` (model, optimizer, RNG, ...) as one file, atomically.

    Call it on one process only (rank 0): the state must already be gathered (unsharded).

    Returns:
        The final checkpoint directory.
    """
    tmp = begin(root, step)
    torch.save(state, tmp / "state.pt")
    return commit(root, step, "full", 1, meta)


def load_full(root: str | os.PathLike, step: int | None = None) -> dict[str, Any]:
    """Verify and load a ``"full"`` checkpoint (default: the latest) on CPU."""
    d, manifest = verify(root, step)
    check_format(d, manifest, "full")
    try:
        return torch.load(d / "state.pt", map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises several types for broken archives
        raise CheckpointError(f"{d / 'state.pt'}: cannot be read ({err})") from err


def _shard_name(rank: int, world_size: int) -> str:
    return f"shard-{rank:05d}-of-{world_size:05d}.pt"


def save_shards(
    root: str | os.PathLike,
    step: int,
    rank: int,
    world_size: int,
    shard: dict[str, Any],
    barrier: Callable[[], None],
    **meta: Any,
) -> Path:
    """Every rank writes its own ``shard``; rank 0 commits once all are written.

    Args:
        rank, world_size: this rank and the number of ranks (each calls this function).
        shard: this rank's part of the state (its parameter and optimizer shards, ...).
        barrier: a function that returns once every rank has called it (``dist.barrier``).

    Returns:
        The final checkpoint directory (after the last barrier, on every rank).
    """
    if rank == 0:
        begin(root, step)
    barrier()
    torch.save(shard, tmp_dir(root, step) / _shard_name(rank, world_size))
    barrier()
    if rank == 0:
        commit(root, step, "shards", world_size, meta)
    barrier()
    return step_dir(root, step)


def load_shard(
    root: str | os.PathLike, rank: int, world_size: int, step: int | None = None
) -> dict[str, Any]:
    """Load this rank's shard of a ``"shards"`` checkpoint written by the same number of ranks.

    Raises:
        CheckpointError: the checkpoint was written by a different number of ranks (shards are
            cut per rank and cannot be re-cut here: save a full checkpoint to change world size).
    """
    d, manifest = verify(root, step)
    check_format(d, manifest, "shards")
    if manifest["world_size"] != world_size:
        raise CheckpointError(
            f"{d}: written by {manifest['world_size']} ranks, loaded by {world_size}; ZeRO shards "
            f"only fit the world size that wrote them -- run with {manifest['world_size']} ranks "
            "or resume from a full checkpoint"
        )
    f = d / _shard_name(rank, world_size)
    try:
        return torch.load(f, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"{f}: cannot be read ({err})") from err


def save_dcp(root: str | os.PathLike, step: int, state: dict[str, Any], **meta: Any) -> Path:
    """Save a sharded ``state`` (e.g. FSDP2 DTensors) with ``torch.distributed.checkpoint``.

    Every process calls it (under an initialised process group); each writes only its shards.
    """
    import torch.distributed as tdist
    import torch.distributed.checkpoint as dcp

    rank, world = tdist.get_rank(), tdist.get_world_size()
    if rank == 0:
        begin(root, step)
    tdist.barrier()
    dcp.save(state, checkpoint_id=str(tmp_dir(root, step)))
    tdist.barrier()
    if rank == 0:
        commit(root, step, "dcp", world, meta)
    tdist.barrier()
    return step_dir(root, step)


def load_dcp(root: str | os.PathLike, state: dict[str, Any], step: int | None = None) -> dict:
    """Verify a ``"dcp"`` checkpoint, then load it in place into ``state``; returns the manifest.

    ``state`` must hold tensors (or DTensors) of the right shapes: DCP fills them, resharding if
    the world size changed.  A shape mismatch raises :class:`CheckpointError`.
    """
    import torch.distributed.checkpoint as dcp

    d, manifest = verify(root, step)
    check_format(d, manifest, "dcp")
    try:
        dcp.load(state, checkpoint_id=str(d))
    except Exception as err:  # noqa: BLE001 - DCP wraps per-rank failures in its own exception
        raise CheckpointError(f"{d}: cannot be loaded into this model ({err})") from err
    return manifest


def load_model_state(model: nn.Module, state_dict: dict[str, torch.Tensor], source: str) -> None:
    """Load ``state_dict`` into ``model`` after checking every key and shape (all or nothing).

    Raises:
        CheckpointError: keys missing or unexpected, or a shape differs; the message names
            ``source`` (the file) and the first mismatches.
    """
    own = model.state_dict()
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    wrong = [
        f"{k}: checkpoint {tuple(state_dict[k].shape)}, model {tuple(own[k].shape)}"
        for k in own
        if k in state_dict and tuple(state_dict[k].shape) != tuple(own[k].shape)
    ]
    if missing or unexpected or wrong:
        parts = []
        if wrong:
            parts.append("shape mismatch " + "; ".join(wrong[:3]))
        if missing:
            parts.append(f"missing keys {missing[:3]}")
        if unexpected:
            parts.append(f"unexpected keys {unexpected[:3]}")
        raise CheckpointError(
            f"{source}: does not fit this model -- " + " | ".join(parts) + " (nothing was loaded; "
            "build the model with the configuration the checkpoint was saved with)"
        )
    model.load_state_dict(state_dict)
