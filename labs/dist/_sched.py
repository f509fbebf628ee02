"""How emulated ranks are scheduled by the operating system (Linux only; elsewhere a no-op).

A tiny collective costs little Python but several thread switches: each rank that waits sleeps
once and is woken once, and only one rank runs Python at a time (the GIL).  Two settings make
those switches cheap without touching the ranks' own computation:

* **Sleeping on one CPU.**  A blocked rank sleeps pinned to the lowest CPU this process may use
  and is unpinned as soon as it wakes.  Linux otherwise wakes a thread on an *idle* CPU, and on
  a virtual machine an idle virtual CPU must first be rescheduled by the host: on the 2-core
  virtual machine this book was written on, a 4-rank all-reduce of a tiny tensor took 1.5 to
  2.5 times longer without it (``LABS_DIST_PIN=0``).  A rank is
  never pinned while it runs its own code, so torch's thread pools (which a thread passes on to
  the threads it starts) and the rank's computation keep every CPU.
* **SCHED_BATCH.**  A rank woken by another would otherwise preempt the waker at once, only to
  block again on the GIL the waker still holds; batch threads wait for their turn instead.

``LABS_DIST_PIN=0`` turns both off.
"""

from __future__ import annotations

import os
import threading

__all__ = ["cpu_masks", "acquire_pinned", "batch_scheduling"]


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
