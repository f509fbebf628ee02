"""Threads that an emulated rank starts belong to that rank, as a process's threads do.

PyTorch starts threads of its own inside a rank's process: ``torch.distributed.checkpoint``
stages a state dict on a thread pool (``StagingOptions(use_async_staging=True)``), data loaders
and user code start theirs.  Such a thread must see what its process sees: the rank's
``torch.distributed`` world (its default group, its groups by name), its ``os.environ``, its
printed output.  While emulated ranks run, a thread started by a rank thread runs with that
rank's context (:func:`labs.dist._emulator.current` returns it, the rank's process groups are
registered in the thread's group registry).

It may read that state, copy tensors, send (sends are buffered), but it may not *wait* on the
emulator (a collective, a receive): the emulator schedules one thread per rank, and a second
one waiting for a peer would be invisible to deadlock detection.  Such a call raises
``RuntimeError`` naming the rank and the thread (under torchrun it would run; make the call from
the rank's own thread).
"""

from __future__ import annotations

import threading
from typing import Any

from torch._C import _distributed_c10d as c10d

from . import _emulator as _emu

__all__ = ["install", "uninstall", "check_own_thread"]

_orig_start = threading.Thread.start


def _run_as(ctx: Any, run: Any) -> Any:
    def run_in_rank() -> None:
        _emu._tls.ctx = ctx
        world = ctx.c10d_world
        if world is not None:  # the thread's group registry starts empty (thread isolation)
            for pg, name in list(world.pg_names.items()):
                try:
                    c10d._register_process_group(name, pg)
                except RuntimeError:  # already there
                    pass
        try:
            run()
        finally:
            _emu._tls.ctx = None

    return run_in_rank


def _start(self: threading.Thread) -> None:
    ctx = _emu.current()
    if ctx is not None and not self.name.startswith("labs.dist-rank-"):
        self.run = _run_as(ctx, self.run)  # type: ignore[method-assign]
    _orig_start(self)


def check_own_thread(ctx: Any, what: str) -> None:
    """Raise if the calling thread is not the rank's own (a thread the rank started)."""
    if threading.get_ident() != ctx.thread:
        raise RuntimeError(
            f"rank {ctx.rank}: {what} was called from thread "
            f"{threading.current_thread().name!r}, which rank {ctx.rank} started; on emulated "
            "ranks only the rank's own thread may wait for other ranks (collectives, receives): "
            "make the call from the rank's thread (under torchrun a background thread may)"
        )


def install() -> None:
    """Threads started by rank threads run as that rank (while emulated ranks run)."""
    threading.Thread.start = _start  # type: ignore[method-assign]


def uninstall() -> None:
    threading.Thread.start = _orig_start  # type: ignore[method-assign]
