"""How emulated ranks are scheduled by the operating system (Linux only; elsewhere a no-op).

Every member of an all-reduce of at least 1 MiB wakes up to reduce its part of the buffers, in
parallel where numpy releases the GIL, so large collectives run on more threads than there are
cores, and ranks that take turns hand the turn over many times a call.  Three settings help,
without touching the ranks' own computation:

* **Sleeping on one CPU, when the parts are short.**  A rank that waits in a large collective
  whose parts are at most ``PIN_PART_BYTES`` sleeps pinned to the lowest CPU this process may
  use and is unpinned as soon as it wakes.  Linux otherwise wakes it on an idle CPU, which on a
  virtual machine must first be rescheduled by the host; for a short part, that wake-up is most
  of the time.  A rank with a long part is not pinned: woken on the busy CPU, it would first have
  to move before it could work alongside the others.  Nor is a rank waiting in a small
  collective: there the two extra system calls per wait cost more than a cheaper wake-up saves.
* **Handing the turn over on one CPU.**  Ranks take turns to run their own code (each has its
  own random state, see ``_rng.py``), so a rank that must wait hands the turn to the next one.
  It first moves to the lowest CPU, where the next rank sleeps too: the next rank then wakes on
  the CPU the first one is just leaving, which on a virtual machine costs about 6 us rather
  than the 25 us of waking a thread on another, idle CPU.  The woken rank unpins itself before
  it returns to its own code.
* **SCHED_BATCH for every rank thread.**  A rank woken by another would otherwise preempt the
  waker at once, and ranks reducing their parts side by side would keep preempting each other.

``benchmarks/bench_allreduce.py`` measures these choices side by side.  (The hand-over: a tiny
4-rank all-reduce went from about 125-165 us to 65-75 us, also below the 65-110 us of ranks
that run side by side with a shared random state.)  On the 2-core virtual
machine this book was written on, without them (``LABS_DIST_PIN=0``) a 4-rank all-reduce of
1 MB took 1.7 to 2 times as long; pinning every wait instead (``World.pin_all``, the policy of
earlier versions) made a tiny 4-rank all-reduce about 1.3 times slower, and a 2-rank one of
16 MB about 1.5 times.

A rank is never pinned while it runs its own code, so torch's thread pools (which a thread
passes on to the threads it starts) and the rank's computation keep every CPU.
``LABS_DIST_PIN=0`` turns both settings off.
"""

from __future__ import annotations

import os
import threading

__all__ = ["PIN_PART_BYTES", "cpu_masks", "acquire_pinned", "batch_scheduling"]

PIN_PART_BYTES = 1 << 20  # ranks that wake up to reduce a part of at most this size sleep pinned


def cpu_masks() -> tuple[set[int], set[int]] | None:
    """(the CPUs this thread may use, the lowest of them), or None where ranks never pin.

    None with ``LABS_DIST_PIN=0``, on a single CPU, where the OS has no ``sched_setaffinity``
    (macOS, Windows) or where setting it is forbidden (some sandboxes).
    """
    if not hasattr(os, "sched_setaffinity") or os.environ.get("LABS_DIST_PIN", "1") == "0":
        return None
    try:
        cpus = os.sched_getaffinity(0)
        if len(cpus) < 2:
            return None
        os.sched_setaffinity(0, cpus)  # may be forbidden (some sandboxes): then never pin
    except OSError:
        return None
    return set(cpus), {min(cpus)}


def acquire_pinned(gate: threading.Lock, cpus: tuple[set[int], set[int]]) -> None:
    """Block on ``gate`` (a held lock another thread will release) pinned to ``cpus[1]``;
    on waking, allow ``cpus[0]`` again."""
    everywhere, home = cpus
    os.sched_setaffinity(0, home)
    try:
        gate.acquire()
    finally:
        os.sched_setaffinity(0, everywhere)


def batch_scheduling() -> None:
    """Make the calling thread SCHED_BATCH, where the OS has it (best effort, never raises)."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass
