"""The per-thread side of an emulated rank: point-to-point messages and collective arrival.

Every ``labs.dist`` call made inside :func:`labs.dist.launch` reaches the :class:`RankContext`
of its thread (``_emulator.current()``), which changes the shared :class:`~._emulator.World`
under its lock and sleeps through ``World.sleep`` when it must wait.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ._emulator import (
    CollectiveMismatchError,
    Group,
    World,
    _Abort,
    _Msg,
    _Slot,
)
from ._rank_threads import check_own_thread
from ._stuck import broken_note, deadline_for, recv_limit

__all__ = ["RankContext"]


class RankContext:
    """Per-thread state of one emulated rank."""

    def __init__(self, world: World, rank: int):
        self.world = world
        self.rank = rank
        self.thread = threading.get_ident()  # made on the rank's own thread (_rank_threads.py)
        self.t0 = world.t0
        self.records = world.trace.pending[rank]  # this rank's trace, as tuples
        self.coll_seq: dict[int, int] = defaultdict(int)
        self.n_groups = 0
        self.np_memo: tuple | None = None  # see labs.dist._reduce.small_view
        self.rng = None  # this rank's _rng.RankRandom in serial runs (per_rank_rng=True)
        self.has_baton = False
        self.plain = False  # runs a plain torch program (labs.dist.run): torch's life cycle
        self.pg_counts: dict[tuple[int, ...], int] = {}  # torch groups made, by ranks (backend.py)
        self.c10d_world: Any = None  # this rank's torch.distributed world (backend.py)
        self.dtensor_handlers: dict | None = None  # DTensor's custom op table (_torch_shared.py)
        self.class_attrs: dict = {}  # torch's class-level caches, this rank's copies (same)

    def now(self) -> float:
        """Seconds since the launch started."""
        return time.perf_counter() - self.t0

    def record(self, op, peers, sent, recv, t_start, group, kind, nbytes, msg_id=-1, algo=""):
        """Append one :class:`~labs.dist.trace.Record` (as a tuple) to this rank's trace."""
        t_end = time.perf_counter() - self.t0
        self.records.append(
            (self.rank, op, peers, sent, recv, t_start, t_end, group, kind, nbytes, msg_id, algo)
        )

    # -- groups ---------------------------------------------------------------------------
    def new_group(self, ranks: list[int]) -> Group:
        w = self.world
        with w.lock:
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
        with w.lock:
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
        with w.lock:
            w.check()
            seq = w.recv_seq[ch]
            w.recv_seq[ch] = seq + 1
        return ch, seq

    def take(self, ch: tuple[int, int, int], seq: int, what: str, group: Group | None = None):
        """Block until message ``seq`` of channel ``ch`` arrived; remove and return it."""
        w = self.world
        if threading.get_ident() != self.thread:
            check_own_thread(self, what)
        deadline, on_timeout = recv_limit(self, group, what)
        with w.lock:  # look the mailbox up under the lock: two threads must never create it
            box = w.msgs[ch]
            st = w.wait_for(self.rank, lambda: what, lambda: seq in box, deadline, on_timeout)
            if st is None:
                return box.pop(seq)
        w.sleep(st)
        with w.lock:
            return box.pop(seq)

    def take_any(self, tag: int, what: str, group: Group | None = None) -> _Msg:
        """Block until a message with ``tag`` from any rank is available; take the oldest."""
        w = self.world
        me = self.rank
        if threading.get_ident() != self.thread:
            check_own_thread(self, what)
        deadline, on_timeout = recv_limit(self, group, what)

        def candidates():
            for s in range(w.size):
                ch = (s, me, tag)
                seq = w.recv_seq.get(ch, 0)
                box = w.msgs.get(ch)
                if box and seq in box:
                    yield box[seq].order, ch, seq

        with w.lock:
            w.block(me, lambda: what, lambda: next(candidates(), None) is not None, deadline,
                    on_timeout)  # fmt: skip
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
        blocking: bool = True,
        pin: bool = False,
        timeout: tuple[float, Callable[[list[int]], BaseException]] | None = None,
    ) -> Callable[[], None]:
        """Arrive at this rank's next collective on ``group``; return a function that waits.

        ``sig`` must be equal across members (else :class:`CollectiveMismatchError`); ``desc()``
        describes the call for error messages; ``entry`` is this rank's buffers.  The last member
        to arrive runs ``compute(entries)`` (entries indexed by group rank) outside the lock,
        then marks the call done and wakes the others.  A ``blocking`` member that is not the
        last registers its wait in the same critical section as its arrival and sleeps before
        returning (the hot path of a synchronous collective: one lock round trip, one sleep).

        With ``split``, once all arrived the members instead run ``split(entries, k, size)`` for
        parts k = 0 ... size-1 (large buffers: the parts run in parallel where numpy releases
        the GIL).  Parts are claimed dynamically, so a member that called with
        ``async_op=True`` and waits late (or never) does not hold the others up.  ``pin``: the
        members sleep pinned to one CPU while they wait (short parts; see ``_sched.py``).
        ``timeout``: (seconds, the error to raise given the missing global ranks) instead of the
        group's own timeout (``group.timeout``; see ``_stuck.py``).
        """
        w = self.world
        if threading.get_ident() != self.thread:
            check_own_thread(self, desc())
        me = group.index[self.rank]
        size = len(group.ranks)
        st = None
        limit = deadline_for(group, timeout, lambda missing: f"rank {self.rank}: {desc()} on group "
                          f"{list(group.ranks)}: ranks {missing} did not arrive")  # fmt: skip
        with w.lock:
            if w.error is not None:
                raise _Abort
            if group.gid in w.broken:
                raise RuntimeError(f"rank {self.rank}: {desc()}: {w.broken[group.gid]}")
            seq = self.coll_seq[group.gid]
            self.coll_seq[group.gid] = seq + 1
            key = (group.gid, seq)
            slot = w.slots.get(key)
            if slot is None:
                slot = w.slots[key] = _Slot(size)
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
            last = slot.arrived == size

            def waiting() -> str:
                missing = [group.ranks[i] for i, e in enumerate(slot.desc) if e is None]
                return (
                    f"{desc()} on group {list(group.ranks)} (call #{seq} of that group; "
                    f"still missing ranks {missing})"
                )

            def expired() -> BaseException:
                missing = [group.ranks[i] for i, e in enumerate(slot.desc) if e is None]
                err = limit[1](missing)  # type: ignore[index]
                with w.lock:
                    w.broken[group.gid] = broken_note(group, self.rank, desc())
                return err

            deadline = None if limit is None else limit[0]
            on_timeout = None if limit is None else expired
            if last:
                del w.slots[key]
                slot.ready = True
                if split is not None:
                    w.wake()
            elif blocking and split is None:
                st = w.wait_for(self.rank, waiting, slot.is_done, deadline, on_timeout)

        if split is not None:
            return self._split_work(slot, split, desc, waiting, size, pin, deadline, on_timeout)
        if last:
            try:
                compute(slot.entries)
            except (ValueError, TypeError, RuntimeError) as err:
                with w.lock:
                    w.fail(CollectiveMismatchError(f"{desc()} on group {list(group.ranks)}: {err}"))
                raise _Abort from err
            with w.lock:
                slot.done = True
                w.wake()
            return _noop
        if blocking:
            w.sleep(st)
            return _noop

        def wait() -> None:
            with w.lock:
                st = w.wait_for(self.rank, waiting, slot.is_done, deadline, on_timeout)
            w.sleep(st)

        return wait

    def _split_work(self, slot, split, desc, waiting, size, pin, deadline, on_timeout):
        """The waiting function of a split collective (see :meth:`collective`)."""
        w = self.world

        def work() -> None:
            """Claim unfinished parts until none is left, then wait for the others."""
            with w.lock:
                st = w.wait_for(self.rank, waiting, lambda: slot.ready, deadline, on_timeout)
                if st is not None:
                    st.turn = False  # reduce parts beside the others, whoever has the turn
            w.sleep(st, pin)
            while True:
                with w.lock:
                    w.check()
                    k = slot.next_part
                    if k >= size:
                        break
                    slot.next_part = k + 1
                try:
                    split(slot.entries, k, size)
                except (ValueError, TypeError, RuntimeError) as err:
                    with w.lock:
                        w.fail(CollectiveMismatchError(f"{desc()}: {err}"))
                    raise _Abort from err
                with w.lock:
                    slot.parts_left -= 1
                    if slot.parts_left == 0:
                        slot.done = True
                        w.wake()
            with w.lock:
                st = w.wait_for(self.rank, lambda: f"{desc()} (other ranks' parts)", slot.is_done)
                if st is not None:
                    st.turn = False
            w.sleep(st, pin)
            if w.serial and not self.has_baton:
                w.take_baton(self)  # back to user code: one rank at a time

        return work


def _noop() -> None:
    return None
