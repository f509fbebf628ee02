"""Ranks that take turns: one rank at a time runs its own code (per-rank random state).

Emulated ranks are threads of one process, and torch has one default generator, so for every
rank to have its own random state (``_rng.py``) only one of them may run user code at a time.
The right to run is a *baton*: a rank that must wait (in a collective, a ``recv``, a
``time.sleep``) hands it to the next rank in the queue, saving its random state, and the rank
that receives it restores its own.  ``World`` (``_emulator.py``) inherits these methods; its
``sleep`` hands the baton over on one CPU (``_sched.py``).  A launch with
``per_rank_rng=False`` is not serial: the ranks run side by side and share the generators.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

from ._common import _Abort

if TYPE_CHECKING:
    from ._rank import RankContext

__all__ = ["Turns"]


class Turns:
    """The baton of a serial run (mixed into ``World``, which sets ``error``)."""

    error: BaseException | None

    def init_turns(self, serial: bool) -> None:
        self.serial = serial
        self.baton_lock = threading.Lock()
        self.baton_owner: int | None = None
        self.baton_queue: deque = deque()  # (rank, gate) waiting for the baton, in order

    def take_baton(self, ctx: RankContext) -> None:
        """(Lock NOT held.) Wait until this rank may run user code; install its random state."""
        with self.baton_lock:
            if self.error is not None:
                raise _Abort
            gate = None
            if self.baton_owner is None:
                self.baton_owner = ctx.rank
            else:
                gate = threading.Lock()
                gate.acquire()
                self.baton_queue.append((ctx.rank, gate))
        if gate is not None:
            gate.acquire()  # give_baton made this rank the owner (or the run failed)
            if self.error is not None:
                raise _Abort
        ctx.has_baton = True
        ctx.rng.restore()

    def grant_baton(self, rank: int, gate: threading.Lock) -> None:
        """Release ``gate`` (held by the waiting ``rank``) once the baton is free for it: at
        once if nobody holds it, else when the ranks queued before it have had their turn.
        One wake-up per hand-over, not a wake-up and then a wait for the baton."""
        with self.baton_lock:
            if self.baton_owner is None:
                self.baton_owner = rank
                gate.release()
            else:
                self.baton_queue.append((rank, gate))

    def give_baton(self, ctx: RankContext) -> None:
        """(Lock NOT held.) Save this rank's random state; hand the baton to the next rank."""
        ctx.rng.save()
        ctx.has_baton = False
        with self.baton_lock:
            if self.baton_queue:
                rank, gate = self.baton_queue.popleft()
                self.baton_owner = rank
                gate.release()
            else:
                self.baton_owner = None
