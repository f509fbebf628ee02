"""Atomic checkpoint directories: write into a temporary directory, commit, verify on load.

A checkpoint is a directory ``ROOT/step_00000010/`` holding state files and a ``manifest.json``
(size and SHA-256 of every file, the step, the format, the world size).  :func:`begin` creates
``ROOT/.tmp-step_00000010/``; the caller writes its files there; :func:`commit` (rank 0, once every
file is complete) flushes them, writes the manifest, ``os.replace``-s the directory to its final
name and atomically rewrites ``ROOT/latest``.  A crash or kill at any point before the rename
leaves the previous checkpoint (and ``latest``) untouched.  For tests, the environment variable
``LABS_CKPT_CRASH_BEFORE_COMMIT=1`` makes the process die (``os._exit(17)``) right before it.

:func:`verify` checks a checkpoint against its manifest before anything is loaded: a missing,
truncated or corrupted file raises :class:`CheckpointError` naming the file and what is wrong.
The file formats that use this (one file, per-rank shards, ``torch.distributed.checkpoint``) are
in :mod:`labs.training.checkpoint`, which re-exports the public names of this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

__all__ = [
    "CheckpointError",
    "CRASH_ENV",
    "step_dir",
    "tmp_dir",
    "begin",
    "commit",
    "latest_step",
    "verify",
    "check_format",
]

CRASH_ENV = "LABS_CKPT_CRASH_BEFORE_COMMIT"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, corrupt, or does not fit the model / world size."""


def step_dir(root: str | os.PathLike, step: int) -> Path:
    """The final directory of the checkpoint of ``step`` under ``root``."""
    return Path(root) / f"step_{step:08d}"


def tmp_dir(root: str | os.PathLike, step: int) -> Path:
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


def begin(root: str | os.PathLike, step: int) -> Path:
    """Create an empty temporary directory for ``step`` (removing leftovers of a crashed save)."""
    tmp = tmp_dir(root, step)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def commit(root: str | os.PathLike, step: int, fmt: str, world_size: int, meta: dict) -> Path:
    """Write the manifest of the temporary directory, rename it into place, update ``latest``."""
    root, tmp, final = Path(root), tmp_dir(root, step), step_dir(root, step)
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


def check_format(path: Path, manifest: dict, fmt: str) -> None:
    if manifest["format"] != fmt:
        raise CheckpointError(
            f"{path}: a {manifest['format']!r} checkpoint, but a {fmt!r} one was asked for"
        )
