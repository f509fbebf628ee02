"""torch's profiler on emulated ranks: one profiler for the process, each rank sees its own events.

``torch.profiler.profile`` and ``torch.autograd.profiler.profile`` drive one profiler per
process (Kineto's); two ranks profiling at once on threads of one process crashed it (a
segmentation fault).  While emulated ranks run, their profiler regions share one session:

* the first rank to enter a profiler region starts the process's profiler, recording every
  thread (``_ExperimentalConfig(profile_all_threads=True)``), with that rank's options; a rank
  entering while the session runs joins it;
* each rank marks where its region begins and ends, on its own thread;
* a rank leaving its region while other ranks are still inside theirs waits for them (an
  emulated wait: if they in turn wait for it, the run stops with a ``DeadlockError`` naming
  the profiler, never a hang); the last one stops the profiler;
* every rank's ``events()`` / ``function_events`` / ``key_averages()`` then hold only the events
  of its own thread inside its own region, as a process of its own would record them.
  ``export_chrome_trace`` writes the whole session (every rank's thread, each named
  ``labs.dist-rank-<r>`` in the trace).

Outside emulated ranks nothing changes.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import torch
from torch.autograd import profiler as _ap

from . import _emulator as _emu

__all__ = ["install", "uninstall"]

_MARK = "labs.dist.profiler:"
_ids = itertools.count()


class _Session:
    """One run of the process's profiler, shared by the rank regions inside it."""

    def __init__(self) -> None:
        self.inside = 0  # regions still open
        self.closing = False  # the last region left: the profiler is being stopped
        self.done = False  # stopped; ``results`` holds what it recorded
        self.results: Any = None


_lock = threading.Lock()  # guards _current (world.lock guards the waits)
_current: _Session | None = None
_local = threading.local()  # the session this thread's region belongs to
_orig: dict[str, Any] = {}


def _all_threads(config: Any) -> Any:
    """A copy of an ``_ExperimentalConfig`` that records every thread."""
    cls = type(config)
    state = config.__getstate__()
    flags = cls(profile_all_threads=True).__getstate__()
    index = [i for i, (a, b) in enumerate(zip(cls().__getstate__(), flags)) if a != b]
    new = list(state)
    for i in index:
        new[i] = True
    return cls(*new)


def _config(self: Any, create_trace_id: bool = False) -> Any:
    if _emu.current() is None:
        return _orig["config"](self, create_trace_id)
    saved = self.experimental_config
    self.experimental_config = _all_threads(saved)
    try:
        return _orig["config"](self, create_trace_id)
    finally:
        self.experimental_config = saved


def _mark(what: str) -> str:
    """Record an empty event named ``what`` on this thread; return its name."""
    name = f"{_MARK}{what}#{next(_ids)}"
    with torch.autograd.profiler.record_function(name):
        pass
    return name


def _wait_for_stop(ctx: Any, session: _Session, why: str) -> None:
    w = ctx.world
    with w.lock:
        w.block(ctx.rank, lambda: why, lambda: session.done)


def _prepare_profiler(*args: Any, **kwargs: Any) -> None:
    ctx = _emu.current()
    if ctx is None:
        return _orig["_prepare_profiler"](*args, **kwargs)
    global _current
    while True:
        with _lock:
            session = _current
            if session is None:
                _current = session = _Session()
                _local.owner = True
                break
            if not session.closing:
                _local.owner = False
                break
        _wait_for_stop(ctx, session, "torch.profiler: the previous session stopping")
    _local.session = session
    if _local.owner:
        _orig["_prepare_profiler"](*args, **kwargs)
    return None


def _enable_profiler(*args: Any, **kwargs: Any) -> None:
    ctx = _emu.current()
    if ctx is None:
        return _orig["_enable_profiler"](*args, **kwargs)
    session = getattr(_local, "session", None)
    if session is None:  # entered without _prepare_trace (torch does not, but be safe)
        _prepare_profiler(*args)
        session = _local.session
    if _local.owner:
        _orig["_enable_profiler"](*args, **kwargs)
    with _lock:
        session.inside += 1
    _local.begin = _mark(f"rank {ctx.rank} begin")
    return None


def _disable_profiler() -> Any:
    ctx = _emu.current()
    session = getattr(_local, "session", None)
    if ctx is None or session is None:
        return _orig["_disable_profiler"]()
    _local.end = _mark(f"rank {ctx.rank} end")
    with _lock:
        session.inside -= 1
        last = session.inside == 0
        if last:
            session.closing = True
    if last:
        global _current
        try:
            session.results = _orig["_disable_profiler"]()
        finally:
            w = ctx.world
            with _lock:
                _current = None
            with w.lock:
                session.done = True
                w.wake()
    else:
        others = "torch.profiler: the end of this rank's profiler region (emulated ranks share "
        _wait_for_stop(ctx, session, others + "one profiler; it stops when every rank's "
                       "region has ended; another rank is still inside its region)")  # fmt: skip
    _local.session = None
    return session.results


def _exit(self: Any, *args: Any) -> Any:
    window = None
    if _emu.current() is not None and getattr(_local, "session", None) is not None:
        window = (_local.begin,)
    out = _orig["__exit__"](self, *args)
    if window is not None:
        self._labs_window = (window[0], _local.end)
    return out


def _parse(self: Any, result: Any, *args: Any, **kwargs: Any) -> list[Any]:
    events = _orig["_parse_kineto_results"](self, result, *args, **kwargs)
    window = getattr(self, "_labs_window", None)
    if window is None:
        return events
    begin = next((e for e in events if e.name == window[0]), None)
    end = next((e for e in events if e.name == window[1]), None)
    if begin is None or end is None:
        return [e for e in events if not e.name.startswith(_MARK)]
    lo, hi, tid = begin.time_range.start, end.time_range.end, begin.thread
    return [
        e
        for e in events
        if not e.name.startswith(_MARK) and e.thread == tid and lo <= e.time_range.start <= hi
    ]


def install() -> None:
    """Share one profiler session among the ranks' profiler regions (see the module doc)."""
    if _orig:
        return
    prof = _ap.profile
    for name in ("_prepare_profiler", "_enable_profiler", "_disable_profiler"):
        _orig[name] = getattr(_ap, name)
    _orig["config"], _orig["__exit__"] = prof.config, prof.__exit__
    _orig["_parse_kineto_results"] = prof._parse_kineto_results
    _ap._prepare_profiler, _ap._enable_profiler = _prepare_profiler, _enable_profiler
    _ap._disable_profiler = _disable_profiler
    prof.config, prof.__exit__, prof._parse_kineto_results = _config, _exit, _parse


def uninstall() -> None:
    """Put torch's profiler functions back (stopping a session that a failed run left open)."""
    global _current
    if not _orig:
        return
    if _current is not None and not _current.done:
        try:
            _orig["_disable_profiler"]()
        except RuntimeError:  # prepared but never started
            pass
        _current = None
    prof = _ap.profile
    for name in ("_prepare_profiler", "_enable_profiler", "_disable_profiler"):
        setattr(_ap, name, _orig[name])
    prof.config, prof.__exit__ = _orig["config"], _orig["__exit__"]
    prof._parse_kineto_results = _orig["_parse_kineto_results"]
    _orig.clear()


# -- the events a gloo process group records --------------------------------------------------
def record(name: str, inputs: list[Any]) -> Any:
    """Start the event ``gloo:<name>`` that gloo's process group records for a collective, with
    its input shapes (complex tensors as pairs of reals), when a profiler is on; else None.

    gloo starts it on the calling thread and ends it on its worker thread, so torch's profiler
    shows it as asynchronous (``is_async``): :func:`finish` ends it on a thread of its own.
    """
    if not _ap._is_profiler_enabled:  # True from the session's start to its stop
        return None
    args = [torch.view_as_real(t) if t.is_complex() else t for t in inputs]
    return torch.autograd._record_function_with_args_enter(f"gloo:{name}", *args)


_ender: list[Any] = []  # (the queue of a daemon thread that ends events)


def finish(handle: Any) -> None:
    """End an event started by :func:`record`, on another thread (returns once it is ended)."""
    if handle is None:
        return
    import queue

    if not _ender:
        q: queue.Queue = queue.Queue()

        def run() -> None:
            while True:
                h, done = q.get()
                torch.autograd._record_function_with_args_exit(h)
                done.set()

        threading.Thread(target=run, name="labs.dist-profiler-events", daemon=True).start()
        _ender.append(q)
    done = threading.Event()
    _ender[0].put((handle, done))
    done.wait()
