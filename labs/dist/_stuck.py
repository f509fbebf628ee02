"""When ranks cannot proceed: deadlocks, and the timeouts that gloo raises on a waiting rank.

A blocked rank registers a :class:`_Wait`: what it waits for (a description and a predicate)
and, when its process group has a timeout the program chose (``init_process_group(timeout=...)``,
``new_group(timeout=...)``, ``monitored_barrier(timeout=...)``), a deadline and the error gloo
raises when it passes.  ``World`` (``_emulator.py``) inherits these methods.

* A rank with a deadline sleeps at most until it, then raises gloo's error (a ``RuntimeError``
  it may catch), after the time gloo would wait; meanwhile the others run on, and may catch up.
* **Every live rank blocked, none can proceed, none with a deadline**: a deadlock.  The run
  stops at once with a :class:`~labs.dist._emulator.DeadlockError` naming what each rank waits
  for (gloo would hang until its default timeout, 30 minutes).  While some blocked rank has a
  deadline, its timeout will fire and it may unblock the others, so the run goes on; a deadline
  more than :data:`LONG_WAIT` seconds away (``monitored_barrier``'s default is 30 minutes) fires
  at once, since nothing but the timeout can end that wait.

A group on which a rank timed out is *broken*, as under gloo (which closes the group's
connections): later calls on it raise ``RuntimeError`` on every rank.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ._common import _Abort

__all__ = ["Stuck"]

_DONE = "done"
LONG_WAIT = 5.0  # seconds: a deadline further away fires at once when no rank can proceed


class _Wait:
    """What a blocked rank waits for: a description, a predicate (evaluated under the world
    lock) and a private lock, held until another rank makes the predicate true and releases it
    (waking exactly the ranks that can proceed, without a shared condition variable); optionally
    a deadline (``time.perf_counter()`` seconds) and the error to raise when it passes."""

    __slots__ = ("desc", "ready", "since", "gate", "turn", "rank", "deadline", "on_timeout",
                 "expired")  # fmt: skip

    def __init__(self, rank: int, desc: Callable[[], str], ready: Callable[[], bool],
                 deadline: float | None = None,
                 on_timeout: Callable[[], BaseException] | None = None):  # fmt: skip
        self.desc, self.ready, self.since = desc, ready, time.perf_counter()
        self.rank, self.deadline, self.on_timeout = rank, deadline, on_timeout
        self.expired = False
        self.turn = True  # serial runs: wake with the turn to run user code (see World.sleep)
        self.gate = threading.Lock()
        self.gate.acquire()


def gloo_timeout(ms: int, what: str) -> RuntimeError:
    """The ``RuntimeError`` gloo raises when a wait passes its timeout (its text, then why)."""
    return RuntimeError(
        f"[labs.dist, emulated gloo] Timed out waiting {ms}ms for recv operation to complete "
        f"({what})"
    )


class Stuck:
    """Deadlock detection and deadlines (mixed into ``World``, which provides the rest)."""

    size: int
    lock: threading.Lock
    state: list[Any]
    n_blocked: int
    n_done: int
    error: BaseException | None
    broken: dict[Any, str]

    def describe_ranks(self) -> str:
        """One line per rank: running, finished, or what it waits for (lock held)."""
        now = time.perf_counter()
        lines = []
        with self.baton_lock:  # type: ignore[attr-defined]
            queued = {r for r, _ in self.baton_queue}  # type: ignore[attr-defined]
            owner = self.baton_owner  # type: ignore[attr-defined]
        for r, st in enumerate(self.state):
            if st is _DONE:
                lines.append(f"  rank {r}: finished (its function returned)")
            elif st is None and r in queued:
                lines.append(f"  rank {r}: waiting for its turn to run (one rank at a time, for "
                             f"per-rank random state; rank {owner} has the turn)")  # fmt: skip
            elif st is None:
                lines.append(f"  rank {r}: running Python code (not inside a labs.dist call)")
            else:
                lines.append(f"  rank {r}: waiting {now - st.since:.2f} s in {st.desc()}")
        pending = [
            f"rank {s} -> rank {d} (tag {t}, {m.data.numel() * m.data.element_size()} bytes)"
            for (s, d, t), box in self.msgs.items()  # type: ignore[attr-defined]
            for m in box.values()
        ]
        lines.append("  messages sent but never received: " + (", ".join(pending) or "none"))
        return "\n".join(lines)

    def check_deadlock(self) -> None:
        """If every live rank is blocked, none can proceed and none has a deadline, fail the
        run with a ``DeadlockError`` (lock held)."""
        if self.n_blocked + self.n_done < self.size or self.n_blocked == 0:
            return  # some rank is running: it may still unblock the others
        live = [st for st in self.state if st is not _DONE]
        if any(st.ready() for st in live):
            return
        timed = [st for st in live if st.deadline is not None]
        if timed:  # their timeouts will fire: gloo's error, after gloo's wait; a long one now
            first = min(st.deadline for st in timed)
            if first - time.perf_counter() > LONG_WAIT:
                for st in timed:
                    if st.deadline == first:
                        self.expire(st)
            return
        from ._emulator import DeadlockError

        self.fail(  # type: ignore[attr-defined]
            DeadlockError(
                "deadlock: every rank that has not returned is waiting, and nothing any rank has "
                "sent or started can wake one of them:\n"
                + self.describe_ranks()
                + "\nCheck that every send has a matching recv and that all ranks of a group call "
                "the same collectives in the same order."
            )
        )

    def expire(self, st: _Wait) -> None:
        """Wake a blocked rank whose deadline no rank can beat any more: it raises its timeout
        error now (lock held)."""
        st.expired = True
        self.state[st.rank] = None
        self.n_blocked -= 1
        if self.serial and st.turn:  # type: ignore[attr-defined]
            self.grant_baton(st.rank, st.gate)  # type: ignore[attr-defined]
        else:
            st.gate.release()

    def wait_for(self, rank: int, desc: Callable[[], str], ready: Callable[[], bool],
                 deadline: float | None = None,
                 on_timeout: Callable[[], BaseException] | None = None) -> _Wait | None:  # fmt: skip
        """(Lock held.) ``None`` if ``ready()`` already; else register the rank as blocked,
        check for a deadlock and return the :class:`_Wait` to :meth:`sleep` on."""
        if self.error is not None:
            raise _Abort
        if ready():
            return None
        st = self.state[rank] = _Wait(rank, desc, ready, deadline, on_timeout)
        self.n_blocked += 1
        self.check_deadlock()
        return st

    def sleep_until(self, st: _Wait, ctx: Any) -> None:
        """Sleep on a wait with a deadline (lock NOT held); on the rank's own turn when it wakes.

        Returns when woken; if the deadline passed first, unregisters the wait and marks it
        expired (the caller raises)."""
        if ctx is not None and ctx.has_baton:
            self.give_baton(ctx)  # type: ignore[attr-defined]
        left = max(0.0, st.deadline - time.perf_counter())  # type: ignore[operator]
        if not st.gate.acquire(timeout=left):
            with self.lock:
                mine = self.state[st.rank] is st
                if mine:
                    self.state[st.rank] = None
                    self.n_blocked -= 1
                    st.expired = True
            if mine:
                if ctx is not None and self.serial and self.error is None:  # type: ignore[attr-defined]
                    self.take_baton(ctx)  # type: ignore[attr-defined]
                return
            st.gate.acquire()  # woken at the same moment: the release is on its way
        if ctx is not None and st.turn and self.error is None and self.serial:  # type: ignore[attr-defined]
            ctx.has_baton = True
            ctx.rng.restore()

    def raise_if_expired(self, st: _Wait | None) -> None:
        """After a wait: raise its timeout error if its deadline passed (lock NOT held)."""
        if st is not None and st.expired and st.on_timeout is not None:
            raise st.on_timeout()


def deadline_for(group: Any, timeout: Any, what: Callable[[list[int]], str]):
    """(deadline, error maker) of a wait on ``group``: ``timeout`` = (seconds, error maker) if
    given, else the group's own timeout (a program's explicit ``timeout=``) with gloo's error,
    whose explanation ``what(missing ranks)`` gives; None: wait for ever."""
    if timeout is None:
        seconds = getattr(group, "timeout", None)
        if seconds is None:
            return None
        ms = int(seconds * 1000)
        timeout = (seconds, lambda missing: gloo_timeout(ms, what(missing)))
    return time.perf_counter() + timeout[0], timeout[1]


def broken_note(group: Any, rank: int, what: str) -> str:
    """Why a group on which a rank timed out is unusable (``World.broken``)."""
    return (f"group {list(group.ranks)} is unusable: rank {rank} timed out in {what} (gloo "
            "closes a group's connections after a timeout)")  # fmt: skip


def recv_limit(ctx: Any, group: Any, what: str) -> tuple[Any, Any]:
    """(deadline, error maker) of a receive by ``ctx``'s rank on ``group`` (its timeout)."""
    limit = (
        None if group is None else deadline_for(group, None, lambda _: f"rank {ctx.rank}: {what}")
    )
    if limit is None:
        return None, None
    w = ctx.world

    def expired() -> BaseException:
        with w.lock:
            w.broken[group.gid] = broken_note(group, ctx.rank, what)
        return limit[1]([])

    return limit[0], expired
