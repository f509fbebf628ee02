"""Emulated ranks: one thread per rank, all talking through one shared :class:`World`.

One lock (``world.lock``) guards the world.  A rank that must wait (for a message, for the other
members of a collective) registers *what* it waits for as a predicate, then checks whether every
live rank is now waiting on a predicate that nothing can make true: that is a deadlock, reported
at once in every rank (or, where the program set timeouts, gloo's timeout errors: ``_stuck.py``).  Otherwise it sleeps on a private gate; whoever changes the world (sends,
arrives at a collective, fails) re-evaluates the waiting predicates and opens exactly the gates
of the ranks that can proceed.  A collective completes when its last member arrives: that rank
reduces or copies the buffers of all members (numpy or torch ops on cache-sized chunks, never a
Python loop over elements; for large all-reduces each member reduces its own slice) and wakes
the others.  Messages are buffered: ``send`` copies the tensor and returns.

The per-rank side (``RankContext``: sending, receiving, arriving at a collective) is in
``_rank.py``; how the rank threads are scheduled on the operating system is in ``_sched.py``.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._common import _Abort
from ._sched import acquire_pinned, cpu_masks
from ._stuck import _DONE, Stuck, _Wait
from ._turns import Turns
from .trace import Trace

if TYPE_CHECKING:
    from ._rank import RankContext

__all__ = [
    "DistError",
    "DeadlockError",
    "CollectiveMismatchError",
    "DistTimeoutError",
    "Group",
    "World",
    "current",
]


class DistError(RuntimeError):
    """Base class of the errors an emulated run raises about the program as a whole."""


class DeadlockError(DistError):
    """Every live rank waits for something that no rank can provide any more."""


class CollectiveMismatchError(DistError, ValueError):
    """Ranks called different collectives, or the same one with different shapes / dtypes."""


class DistTimeoutError(DistError, TimeoutError):
    """The run did not finish within ``launch(..., timeout=...)`` seconds."""


_tls = threading.local()
LAST_TRACE: Trace | None = None  # the trace of the most recent run, also when it failed


def current() -> RankContext | None:
    """The calling thread's :class:`~._rank.RankContext`, or ``None`` outside an emulated rank."""
    return getattr(_tls, "ctx", None)


class Group:
    """A set of global ranks made by ``new_group``; mirrors ``torch.distributed.ProcessGroup``.

    ``group.size()`` is its number of ranks; ``group.rank()`` is the calling rank's index in it
    (-1 when the caller is not a member); ``group.ranks`` lists the global ranks.
    """

    __slots__ = ("gid", "ranks", "index", "peers", "timeout")

    def __init__(self, gid: int, ranks: list[int], timeout: float | None = None):
        self.gid = gid
        self.timeout = timeout  # seconds a member waits before gloo's error (see _stuck.py)
        self.ranks = tuple(ranks)
        self.index = {r: i for i, r in enumerate(self.ranks)}
        self.peers = [tuple(q for q in self.ranks if q != r) for r in self.ranks]  # by group rank

    def size(self) -> int:
        return len(self.ranks)

    def rank(self) -> int:
        ctx = current()
        return -1 if ctx is None else self.index.get(ctx.rank, -1)

    def __repr__(self) -> str:
        return f"Group(ranks={list(self.ranks)})"


class _Slot:
    """One collective call of one group, filled as its members arrive."""

    __slots__ = (
        "sig", "desc", "entries", "arrived", "ready", "next_part", "parts_left", "done", "first"
    )  # fmt: skip

    def __init__(self, size: int):
        self.sig: Any = None
        self.desc: list[Any] = [None] * size
        self.entries: list[Any] = [None] * size
        self.arrived = 0
        self.ready = False  # every member arrived
        self.next_part = 0  # split collectives: the next part nobody has claimed yet
        self.parts_left = size  # split collectives: parts not finished yet
        self.done = False
        self.first = -1

    def is_done(self) -> bool:
        return self.done


class _Msg:
    __slots__ = ("data", "msg_id", "order", "src")

    def __init__(self, data: Any, msg_id: int, order: int, src: int):
        self.data, self.msg_id, self.order, self.src = data, msg_id, order, src


class World(Turns, Stuck):
    """Shared state of one emulated run: mailboxes, collective slots, rank states, the trace."""

    pin_all = False  # True: ranks sleep pinned in every wait (the policy of earlier versions;
    # benchmarks/bench_allreduce.py compares it with the default, see _sched.py)

    def __init__(self, world_size: int, serial: bool = False):
        self.size = world_size
        self.lock = threading.Lock()
        self.init_turns(serial)  # serial: one rank at a time runs user code (see _turns.py)
        self.cpus = cpu_masks()  # (all CPUs, the one CPU pinned sleepers use) or None
        self.error: BaseException | None = None
        self.t0 = time.perf_counter()
        self.state: list[Any] = [None] * world_size  # None running, _Wait blocked, _DONE finished
        self.n_done = 0
        self.n_blocked = 0  # ranks whose state is a _Wait
        self.finished = threading.Event()  # all ranks done, or the run failed
        self.trace = Trace(world_size)
        self.world_group = Group(0, list(range(world_size)))
        self.groups: dict[int, Group] = {}
        self.pg_groups: dict[tuple, Group] = {}  # groups of torch process groups (backend.py)
        self.store: Any = None  # the torch Store those groups share (made on first use)
        self.slots: dict[tuple[int, int], _Slot] = {}
        # point-to-point: channel (src, dst, tag) -> {sequence number: message}
        self.msgs: dict[tuple[int, int, int], dict[int, _Msg]] = defaultdict(dict)
        self.sent_seq: dict[tuple[int, int, int], int] = defaultdict(int)
        self.recv_seq: dict[tuple[int, int, int], int] = defaultdict(int)
        self.msg_ids = itertools.count()
        self.arrivals = itertools.count()
        self.broken: dict[Any, str] = {}  # group id -> why it is unusable (see _stuck.py)

    # -- failures -------------------------------------------------------------------------
    def fail(self, err: BaseException) -> None:
        """Record the run's first failure and wake everyone (call with the lock held)."""
        if self.error is None:
            self.error = err
        self.finished.set()
        self.wake()
        if self.serial:  # ranks waiting for the baton must wake up to unwind
            with self.baton_lock:
                while self.baton_queue:
                    self.baton_queue.popleft()[1].release()
                self.baton_owner = None

    def wake(self) -> None:
        """Release every blocked rank that can now proceed, or all of them after a failure
        (call with the lock held after any change that may satisfy a waiting rank)."""
        if not self.n_blocked:
            return
        failed = self.error is not None
        for r, st in enumerate(self.state):
            if type(st) is _Wait and (failed or st.ready()):
                self.state[r] = None
                self.n_blocked -= 1
                if self.serial and not failed and st.turn:
                    self.grant_baton(r, st.gate)  # it wakes up when the baton reaches it
                else:
                    st.gate.release()

    def check(self) -> None:
        """Unwind the calling rank if the run already failed (call with the lock held)."""
        if self.error is not None:
            raise _Abort

    def sleep(self, st: _Wait | None, pinned: bool = False) -> None:
        """(Lock NOT held.) Block until :meth:`wake` releases ``st``; unwind if the run failed.

        ``pinned``: sleep on one CPU (``_sched.acquire_pinned``); large collectives whose
        members wake up to reduce short parts in parallel ask for it (see ``_sched.py``).
        In serial runs a rank gives up its turn while it sleeps and wakes with it again, unless
        ``st.turn`` is False (the members of a large all-reduce wake to reduce their parts side
        by side, and take their turn when the collective is done).
        """
        if st is None:
            return
        if st.deadline is not None:
            self.sleep_until(st, current() if self.serial else None)
            if self.error is not None:
                raise _Abort
            self.raise_if_expired(st)
            return
        if not st.gate.acquire(False):
            ctx = current() if self.serial else None
            handover = ctx is not None and ctx.has_baton and st.turn and self.cpus is not None
            if handover:  # hand the turn over on one CPU: the next rank wakes where we sleep
                os.sched_setaffinity(0, self.cpus[1])
            if ctx is not None and ctx.has_baton:
                self.give_baton(ctx)  # let another rank run while this one waits
            if handover:
                try:
                    st.gate.acquire()
                finally:
                    os.sched_setaffinity(0, self.cpus[0])
            elif self.cpus is not None and (pinned or self.pin_all):
                acquire_pinned(st.gate, self.cpus)
            else:
                st.gate.acquire()
            if ctx is not None and st.turn and self.error is None:  # woken by grant_baton
                ctx.has_baton = True
                ctx.rng.restore()
        if self.error is not None:
            raise _Abort

    def block(self, rank: int, desc: Callable[[], str], ready: Callable[[], bool],
              deadline: float | None = None, on_timeout: Any = None) -> None:  # fmt: skip
        """Wait (lock held, and held again on return) until ``ready()``."""
        st = self.wait_for(rank, desc, ready, deadline, on_timeout)
        if st is None:
            return
        self.lock.release()
        try:
            self.sleep(st)
        finally:
            self.lock.acquire()

    def finish(self, rank: int) -> None:
        with self.lock:
            if type(self.state[rank]) is _Wait:  # unwound by an abort while registered
                self.n_blocked -= 1
            self.state[rank] = _DONE
            self.n_done += 1
            if self.n_done == self.size:
                self.finished.set()
            elif self.error is None:
                self.check_deadlock()
