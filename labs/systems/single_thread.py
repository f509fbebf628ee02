"""Measure a call on the thread that measures it: refuse threads started inside the call.

PyTorch's CPU profiler (:func:`labs.systems.roofline.peak_memory_bytes`) and a
``TorchFunctionMode`` (the call recorders of the lab checks) see only the thread they run on. Work
handed to another Python thread is invisible to them, so a measurement would read 0 bytes or no
calls. :func:`no_new_threads` makes starting a Python thread inside the measured block an error
that says so. PyTorch's own intra-op threads (OpenMP, not Python threads) are not affected.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_new_threads"]

# the functions a Python thread starts through, by Python version (3.13 renamed the first)
_STARTERS = [(threading, "_start_new_thread"), (threading, "_start_joinable_thread"),
             (_thread, "start_new_thread"), (_thread, "start_joinable_thread")]  # fmt: skip


@contextmanager
def no_new_threads(what: str) -> Iterator[None]:
    """Inside the block, starting a Python thread raises ``RuntimeError`` naming ``what`` (the
    measurement), so that no work escapes it. The previous functions are restored on exit."""

    def refuse(*args, **kwargs):
        raise RuntimeError(
            f"{what}: the measured call started a thread; the measurement sees only the thread it "
            "runs on, so do the work in the calling thread"
        )

    saved = [(mod, name, getattr(mod, name)) for mod, name in _STARTERS if hasattr(mod, name)]
    for mod, name, _ in saved:
        setattr(mod, name, refuse)
    try:
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)
