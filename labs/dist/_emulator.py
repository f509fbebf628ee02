"""Emulated ranks: one thread per rank, all talking through one shared :class:`World`.

One lock (``world.cond``) guards the world.  A rank that must wait (for a message, for the other
members of a collective) registers *what* it waits for as a predicate, then checks whether every
live rank is now waiting on a predicate that nothing can make true: that is a deadlock, reported
at once in every rank.  Otherwise it sleeps on a private gate; whoever changes the world (sends,
arrives at a collective, fails) re-evaluates the waiting predicates and opens exactly the gates
of the ranks that can proceed.  A collective completes when its last member arrives: that rank
reduces or copies the buffers of all members (numpy or torch ops on cache-sized chunks, never a
Python loop over elements; for large all-reduces each member reduces its own slice) and wakes
the others.  Messages are buffered: ``send`` copies the tensor and returns.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from .trace import Record, Trace

__all__ = [
    "DistError",
    "DeadlockError",
    "CollectiveMismatchError",
    "DistTimeoutError",
    "Group",
    "World",
    "RankContext",
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


class _Abort(BaseException):
    """Unwinds a rank after another rank failed (not an ``Exception``: user code can't catch it)."""


_tls = threading.local()
LAST_TRACE: Trace | None = None  # the trace of the most recent run, also when it failed


def current() -> RankContext | None:
    """The calling thread's :class:`RankContext`, or ``None`` outside an emulated rank."""
    return getattr(_tls, "ctx", None)


class Group:
    """A set of global ranks made by ``new_group``; mirrors ``torch.distributed.ProcessGroup``.

    ``group.size()`` is its number of ranks; ``group.rank()`` is the calling rank's index in it
    (-1 when the caller is not a member); ``group.ranks`` lists the global ranks.
    """

    __slots__ = ("gid", "ranks", "index")

    def __init__(self, gid: int, ranks: list[int]):
        self.gid = gid
        self.ranks = tuple(ranks)
        self.index = {r: i for i, r in enumerate(self.ranks)}

    def size(self) -> int:
        return len(self.ranks)

    def rank(self) -> int:
        ctx = current()
        return -1 if ctx is None else self.index.get(ctx.rank, -1)

    def __repr__(self) -> str:
        return f"Group(ranks={list(self.ranks)})"


class _Wait:
    """What a blocked rank waits for: a description, a predicate (evaluated under the world
    lock) and a private lock, held until another rank makes the predicate true and releases it
    (waking exactly the ranks that can proceed, without a shared condition variable)."""

    __slots__ = ("desc", "ready", "since", "gate")

    def __init__(self, desc: Callable[[], str], ready: Callable[[], bool]):
        self.desc, self.ready, self.since = desc, ready, time.perf_counter()
        self.gate = threading.Lock()
        self.gate.acquire()


_DONE = "done"


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


class _Msg:
    __slots__ = ("data", "msg_id", "order", "src")

    def __init__(self, data: Any, msg_id: int, order: int, src: int):
        self.data, self.msg_id, self.order, self.src = data, msg_id, order, src


class World:
    """Shared state of one emulated run: mailboxes, collective slots, rank states, the trace."""

    def __init__(self, world_size: int):
        self.size = world_size
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.t0 = time.perf_counter()
        self.state: list[Any] = [None] * world_size  # None running, _Wait blocked, _DONE finished
        self.n_done = 0
        self.finished = threading.Event()  # all ranks done, or the run failed
        self.trace = Trace(world_size)
        self.world_group = Group(0, list(range(world_size)))
        self.groups: dict[int, Group] = {}
        self.slots: dict[tuple[int, int], _Slot] = {}
        # point-to-point: channel (src, dst, tag) -> {sequence number: message}
        self.msgs: dict[tuple[int, int, int], dict[int, _Msg]] = defaultdict(dict)
        self.sent_seq: dict[tuple[int, int, int], int] = defaultdict(int)
        self.recv_seq: dict[tuple[int, int, int], int] = defaultdict(int)
        self.msg_ids = itertools.count()
        self.arrivals = itertools.count()

    # -- failures -------------------------------------------------------------------------
    def fail(self, err: BaseException) -> None:
        """Record the run's first failure and wake everyone (call with the lock held)."""
        if self.error is None:
            self.error = err
        self.finished.set()
        self.wake()

    def wake(self) -> None:
        """Release every blocked rank that can now proceed, or all of them after a failure
        (call with the lock held after any change that may satisfy a waiting rank)."""
        failed = self.error is not None
        for r, st in enumerate(self.state):
            if type(st) is _Wait and (failed or st.ready()):
                self.state[r] = None
                st.gate.release()

    def check(self) -> None:
        """Unwind the calling rank if the run already failed (call with the lock held)."""
        if self.error is not None:
            raise _Abort

    def describe_ranks(self) -> str:
        """One line per rank: running, finished, or what it waits for (lock held)."""
        now = time.perf_counter()
        lines = []
        for r, st in enumerate(self.state):
            if st is _DONE:
                lines.append(f"  rank {r}: finished (its function returned)")
            elif st is None:
                lines.append(f"  rank {r}: running Python code (not inside a labs.dist call)")
            else:
                lines.append(f"  rank {r}: waiting {now - st.since:.2f} s in {st.desc()}")
        pending = [
            f"rank {s} -> rank {d} (tag {t}, {m.data.numel() * m.data.element_size()} bytes)"
            for (s, d, t), box in self.msgs.items()
            for m in box.values()
        ]
        lines.append("  messages sent but never received: " + (", ".join(pending) or "none"))
        return "\n".join(lines)

    def check_deadlock(self) -> None:
        """Fail the run if every live rank is blocked and none of them can proceed (lock held)."""
        live = [st for st in self.state if st is not _DONE]
        if not live or any(st is None for st in live):
            return
        if any(st.ready() for st in live):
            return
        self.fail(
            DeadlockError(
                "deadlock: every rank that has not returned is waiting, and nothing any rank has "
                "sent or started can wake one of them:\n"
                + self.describe_ranks()
                + "\nCheck that every send has a matching recv and that all ranks of a group call "
                "the same collectives in the same order."
            )
        )

    def wait_for(self, rank: int, desc: Callable[[], str], ready: Callable[[], bool]):
        """(Lock held.) ``None`` if ``ready()`` already; else register the rank as blocked,
        check for a deadlock and return the :class:`_Wait` to :meth:`sleep` on."""
        self.check()
        if ready():
            return None
        st = self.state[rank] = _Wait(desc, ready)
        self.check_deadlock()
        return st

    def sleep(self, st: _Wait | None) -> None:
        """(Lock NOT held.) Block until :meth:`wake` releases ``st``; unwind if the run failed."""
        if st is not None:
            st.gate.acquire()
            if self.error is not None:
                raise _Abort

    def block(self, rank: int, desc: Callable[[], str], ready: Callable[[], bool]) -> None:
        """Wait (lock held, and held again on return) until ``ready()``."""
        st = self.wait_for(rank, desc, ready)
        if st is None:
            return
        self.cond.release()
        try:
            self.sleep(st)
        finally:
            self.cond.acquire()

    def finish(self, rank: int) -> None:
        with self.cond:
            self.state[rank] = _DONE
            self.n_done += 1
            if self.n_done == self.size:
                self.finished.set()
            elif self.error is None:
                self.check_deadlock()


class RankContext:
    """Per-thread state of one emulated rank."""

    def __init__(self, world: World, rank: int):
        self.world = world
        self.rank = rank
        self.coll_seq: dict[int, int] = defaultdict(int)
        self.n_groups = 0

    def now(self) -> float:
        return time.perf_counter() - self.world.t0

    def record(self, op, peers, sent, recv, t_start, group, kind, nbytes, msg_id=-1, algo=""):
        self.world.trace.records[self.rank].append(
            Record(
                self.rank,
                op,
                peers,
                sent,
                recv,
                t_start,
                self.now(),
                group,
                kind,
                nbytes,
                msg_id,
                algo,
            )  # fmt: skip
        )

    # -- groups ---------------------------------------------------------------------------
    def new_group(self, ranks: list[int]) -> Group:
        w = self.world
        with w.cond:
            w.check()
            k = self.n_groups
            self.n_groups += 1
            g = w.groups.get(k)
            if g is None:
                g = w.groups[k] = Group(k + 1, ranks)
            elif list(g.ranks) != ranks:
                w.fail(
                    CollectiveMismatchError(
                        f"new_group call #{k}: rank {self.rank} asked for ranks {ranks} but an "
                        f"earlier rank asked for {list(g.ranks)}; every rank must call new_group "
                        "with the same ranks in the same order"
                    )
                )
                raise _Abort
            return g

    # -- point to point -------------------------------------------------------------------
    def post_send(self, data: Any, dst: int, tag: int) -> int:
        """Deposit a copy of ``data`` for ``dst``; returns the message id."""
        w = self.world
        ch = (self.rank, dst, tag)
        with w.cond:
            w.check()
            seq = w.sent_seq[ch]
            w.sent_seq[ch] = seq + 1
            msg_id = next(w.msg_ids)
            w.msgs[ch][seq] = _Msg(data, msg_id, next(w.arrivals), self.rank)
            w.wake()
        return msg_id

    def reserve_recv(self, src: int, tag: int) -> tuple[tuple[int, int, int], int]:
        """Claim the next message slot of channel (src -> me, tag), in posting order."""
        w = self.world
        ch = (src, self.rank, tag)
        with w.cond:
            w.check()
            seq = w.recv_seq[ch]
            w.recv_seq[ch] = seq + 1
        return ch, seq

    def take(self, ch: tuple[int, int, int], seq: int, what: str) -> _Msg:
        """Block until message ``seq`` of channel ``ch`` arrived; remove and return it."""
        w = self.world
        box = w.msgs[ch]
        with w.cond:
            st = w.wait_for(self.rank, lambda: what, lambda: seq in box)
            if st is None:
                return box.pop(seq)
        w.sleep(st)
        with w.cond:
            return box.pop(seq)

    def take_any(self, tag: int, what: str) -> _Msg:
        """Block until a message with ``tag`` from any rank is available; take the oldest."""
        w = self.world
        me = self.rank

        def candidates():
            for s in range(w.size):
                ch = (s, me, tag)
                seq = w.recv_seq.get(ch, 0)
                box = w.msgs.get(ch)
                if box and seq in box:
                    yield box[seq].order, ch, seq

        with w.cond:
            w.block(me, lambda: what, lambda: next(candidates(), None) is not None)
            _, ch, seq = min(candidates())
            w.recv_seq[ch] = seq + 1
            return w.msgs[ch].pop(seq)

    # -- collectives ----------------------------------------------------------------------
    def collective(
        self,
        group: Group,
        sig: tuple,
        desc: Callable[[], str],
        entry: Any,
        compute: Callable[[list[Any]], None],
        split: Callable[[list[Any], int, int], None] | None = None,
    ) -> Callable[[], None]:
        """Arrive at this rank's next collective on ``group``; return a function that waits.

        ``sig`` must be equal across members (else :class:`CollectiveMismatchError`); ``desc()``
        describes the call for error messages; ``entry`` is
        this rank's buffers; the last member to arrive runs ``compute(entries)`` (entries indexed
        by group rank) outside the lock, then marks the call done.  With ``split``, once all
        arrived the members instead run ``split(entries, k, size)`` for parts k = 0 ... size-1
        (large buffers: the parts run in parallel where numpy releases the GIL).  Parts are claimed
        dynamically, so a member that called with ``async_op=True`` and waits late (or never)
        does not hold the others up.
        """
        w = self.world
        me = group.index[self.rank]
        with w.cond:
            w.check()
            seq = self.coll_seq[group.gid]
            self.coll_seq[group.gid] = seq + 1
            key = (group.gid, seq)
            slot = w.slots.get(key)
            if slot is None:
                slot = w.slots[key] = _Slot(group.size())
                slot.sig, slot.first = sig, self.rank
            elif sig != slot.sig:
                w.fail(
                    CollectiveMismatchError(
                        f"collective mismatch on group {list(group.ranks)}, call #{seq} of that "
                        f"group: rank {slot.first} called {slot.desc[group.index[slot.first]]()} "
                        f"but rank {self.rank} called {desc()}; all ranks of a group must make the "
                        "same collective calls, in the same order, with the same shapes and "
                        "dtypes. State of every rank:\n" + w.describe_ranks()
                    )
                )
                raise _Abort
            slot.desc[me] = desc
            slot.entries[me] = entry
            slot.arrived += 1
            last = slot.arrived == group.size()
            if last:
                del w.slots[key]
                slot.ready = True
                if split is not None:
                    w.wake()

        def waiting() -> str:
            missing = [group.ranks[i] for i, e in enumerate(slot.desc) if e is None]
            return (
                f"{desc()} on group {list(group.ranks)} (call #{seq} of that group; "
                f"still missing ranks {missing})"
            )

        if split is not None:
            size = group.size()

            def work() -> None:
                """Claim unfinished parts until none is left, then wait for the others."""
                with w.cond:
                    st = w.wait_for(self.rank, waiting, lambda: slot.ready)
                w.sleep(st)
                while True:
                    with w.cond:
                        w.check()
                        k = slot.next_part
                        if k >= size:
                            break
                        slot.next_part = k + 1
                    try:
                        split(slot.entries, k, size)
                    except (ValueError, TypeError, RuntimeError) as err:
                        with w.cond:
                            w.fail(CollectiveMismatchError(f"{desc()}: {err}"))
                        raise _Abort from err
                    with w.cond:
                        slot.parts_left -= 1
                        if slot.parts_left == 0:
                            slot.done = True
                            w.wake()
                with w.cond:
                    st = w.wait_for(
                        self.rank, lambda: f"{desc()} (other ranks' parts)", lambda: slot.done
                    )
                w.sleep(st)

            return work
        if last:
            try:
                compute(slot.entries)
            except (ValueError, TypeError, RuntimeError) as err:
                with w.cond:
                    w.fail(CollectiveMismatchError(f"{desc()} on group {list(group.ranks)}: {err}"))
                raise _Abort from err
            with w.cond:
                slot.done = True
                w.wake()
            return _noop

        def wait() -> None:
            with w.cond:
                st = w.wait_for(self.rank, waiting, lambda: slot.done)
            w.sleep(st)

        return wait


def _noop() -> None:
    return None
