"""Checkpoints that survive crashes: atomic directories, verified on load, resumed exactly.

A checkpoint is a directory ``ROOT/step_00000010/`` holding the state files and a
``manifest.json`` (size and SHA-256 of every file, the step, the format, the world size).  Three
formats share that layout:

* ``"full"``: one ``state.pt`` with the whole (unsharded) state, written by rank 0 alone --
  :func:`save_full` / :func:`load_full`;
* ``"shards"``: one ``shard-RRRRR-of-WWWWW.pt`` per rank (the ZeRO emulation of :mod:`labs.zero`)
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
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

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

CRASH_ENV = "LABS_CKPT_CRASH_BEFORE_COMMIT"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, corrupt, or does not fit the model / world size."""


def step_dir(root: str | os.PathLike, step: int) -> Path:
    """The final directory of the checkpoint of ``step`` under ``root``."""
    return Path(root) / f"step_{step:08d}"


def _tmp_dir(root: str | os.PathLike, step: int) -> Path:
    return Path(root) / f".tmp-step_{step:08d}"


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        _fsync_file(path)
    except OSError:  # some file systems refuse fsync on directories; the rename is still atomic
        pass


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _begin(root: str | os.PathLike, step: int) -> Path:
    """Create an empty temporary directory for ``step`` (removing leftovers of a crashed save)."""
    tmp = _tmp_dir(root, step)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def _commit(root: str | os.PathLike, step: int, fmt: str, world_size: int, meta: dict) -> Path:
    """Write the manifest of the temporary directory, rename it into place, update ``latest``."""
    root, tmp, final = Path(root), _tmp_dir(root, step), step_dir(root, step)
    files = {}
    for f in sorted(tmp.rglob("*")):
        if f.is_file():
            _fsync_file(f)
            files[str(f.relative_to(tmp))] = {"bytes": f.stat().st_size, "sha256": _sha256(f)}
    manifest = {"format": fmt, "step": step, "world_size": world_size, "files": files, **meta}
    with open(tmp / "manifest.json", "w") as f:
        json.dump(manifest, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)
    if os.environ.get(CRASH_ENV) == "1":
        os._exit(17)  # test hook: die after writing everything, before the atomic rename
    if final.exists():  # re-saving a step: move the old one aside first (rename is atomic)
        old = root / f".old-step_{step:08d}"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)
    _fsync_dir(root)
    latest_tmp = root / ".latest.tmp"
    latest_tmp.write_text(f"{final.name}\n")
    _fsync_file(latest_tmp)
    os.replace(latest_tmp, root / "latest")
    _fsync_dir(root)
    return final


def latest_step(root: str | os.PathLike) -> int | None:
    """The step of the newest committed checkpoint under ``root``, or None if there is none."""
    pointer = Path(root) / "latest"
    if not pointer.exists():
        return None
    name = pointer.read_text().strip()
    try:
        return int(name.removeprefix("step_"))
    except ValueError:
        raise CheckpointError(f"{pointer}: expected 'step_NNNNNNNN', found {name!r}") from None


def verify(root: str | os.PathLike, step: int | None = None) -> tuple[Path, dict]:
    """Check the checkpoint of ``step`` (default: latest) against its manifest.

    Returns:
        ``(directory, manifest)``.

    Raises:
        CheckpointError: no checkpoint, no manifest (an interrupted save), a file missing, of the
            wrong size (truncated) or with the wrong SHA-256 (corrupt).  The message names the file.
    """
    if step is None:
        step = latest_step(root)
        if step is None:
            raise CheckpointError(f"no checkpoint under {root}: {Path(root) / 'latest'} is missing")
    d = step_dir(root, step)
    man_path = d / "manifest.json"
    if not man_path.exists():
        raise CheckpointError(
            f"{d}: no manifest.json -- not a checkpoint, or its save never finished"
        )
    try:
        manifest = json.loads(man_path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{man_path}: corrupt manifest ({err})") from None
    for name, info in manifest["files"].items():
        f = d / name
        if not f.exists():
            raise CheckpointError(f"{f}: listed in the manifest but missing")
        size = f.stat().st_size
        if size != info["bytes"]:
            raise CheckpointError(
                f"{f}: truncated or overwritten -- {size} bytes on disk, {info['bytes']} expected"
            )
        if _sha256(f) != info["sha256"]:
            raise CheckpointError(f"{f}: corrupt -- SHA-256 differs from the manifest")
    return d, manifest


def _check_format(path: Path, manifest: dict, fmt: str) -> None:
    if manifest["format"] != fmt:
        raise CheckpointError(
            f"{path}: a {manifest['format']!r} checkpoint, but a {fmt!r} one was asked for"
        )


def save_full(root: str | os.PathLike, step: int, state: dict[str, Any], **meta: Any) -> Path:
    """Write the whole training ``state`` (model, optimizer, RNG, ...) as one file, atomically.

    Call it on one process only (rank 0): the state must already be gathered (unsharded).

    Returns:
        The final checkpoint directory.
    """
    tmp = _begin(root, step)
    torch.save(state, tmp / "state.pt")
    return _commit(root, step, "full", 1, meta)


def load_full(root: str | os.PathLike, step: int | None = None) -> dict[str, Any]:
    """Verify and load a ``"full"`` checkpoint (default: the latest) on CPU."""
    d, manifest = verify(root, step)
    _check_format(d, manifest, "full")
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
        _begin(root, step)
    barrier()
    torch.save(shard, _tmp_dir(root, step) / _shard_name(rank, world_size))
    barrier()
    if rank == 0:
        _commit(root, step, "shards", world_size, meta)
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
    _check_format(d, manifest, "shards")
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
        _begin(root, step)
    tdist.barrier()
    dcp.save(state, checkpoint_id=str(_tmp_dir(root, step)))
    tdist.barrier()
    if rank == 0:
        _commit(root, step, "dcp", world, meta)
    tdist.barrier()
    return step_dir(root, step)


def load_dcp(root: str | os.PathLike, state: dict[str, Any], step: int | None = None) -> dict:
    """Verify a ``"dcp"`` checkpoint, then load it in place into ``state``; returns the manifest.

    ``state`` must hold tensors (or DTensors) of the right shapes: DCP fills them, resharding if
    the world size changed.  A shape mismatch raises :class:`CheckpointError`.
    """
    import torch.distributed.checkpoint as dcp

    d, manifest = verify(root, step)
    _check_format(d, manifest, "dcp")
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
