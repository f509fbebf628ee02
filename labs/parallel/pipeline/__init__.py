"""Pipeline schedules as data, a timeline simulator, and timeline drawings (Chapters 14 and 18).

A *schedule* says, for every pipeline rank, the ordered list of compute actions it runs (``F``
forward, ``B`` backward -- only the input gradient when a ``W`` for the same micro-batch and chunk
follows -- and ``W`` weight gradients); a micro-batch's *route* lists the (rank, chunk) pairs it
visits, which implies the sends and receives.  Example::

    from labs.parallel import pipeline as pp
    s = pp.one_f_one_b(p=4, m=8)
    tl = pp.simulate(s, costs={"F": 1.0, "B": 1.0, "W": 1.0})   # full backward = B + W = 2
    pp.bubble_fraction(tl)         # 3 / 11 = (p - 1) / (m + p - 1)
    pp.draw_timeline(tl)

This package's ``__init__`` gathers the public names; the pieces live in

* :mod:`labs.parallel.pipeline.schedules` -- :class:`Action`, :class:`Schedule`, GPipe, 1F1B, interleaved
  1F1B, ZB-H1;
* :mod:`labs.parallel.pipeline.sim` -- :func:`simulate`, :class:`Timeline`, bubble, stash and idle-time
  measures and the published formulas;
* :mod:`labs.parallel.pipeline.plot` -- :func:`draw_timeline` (imported when first called, so that
  ``import labs.parallel.pipeline`` does not load matplotlib).

DualPipe and DualPipeV (Chapter 18) live in :mod:`labs.parallel.pipeline.dualpipe`, the executor on emulated ranks
in :mod:`labs.parallel.pipeline.execute`; both produce and consume the same :class:`Schedule` objects.
PyTorch's own schedules (``torch.distributed.pipelining``) run on the same stages, on emulated
ranks, with :mod:`labs.parallel.pipeline.torch_schedules`.
"""

from __future__ import annotations

from labs.parallel.pipeline.schedules import (
    SCHEDULES,
    Action,
    Schedule,
    ScheduleError,
    gpipe,
    interleaved_1f1b,
    one_f_one_b,
    zb_h1,
)
from labs.parallel.pipeline.sim import (
    Event,
    Timeline,
    action_cost,
    bubble_fraction,
    bubble_fraction_formula,
    bubble_time,
    idle_time,
    peak_stash,
    simulate,
)

__all__ = [
    "Action",
    "Schedule",
    "Event",
    "Timeline",
    "ScheduleError",
    "gpipe",
    "one_f_one_b",
    "interleaved_1f1b",
    "zb_h1",
    "SCHEDULES",
    "simulate",
    "action_cost",
    "bubble_fraction",
    "peak_stash",
    "idle_time",
    "bubble_fraction_formula",
    "bubble_time",
    "draw_timeline",
]


def draw_timeline(
    tl: Timeline, ax=None, title: str | None = None, labels: bool = True, raster: bool = False
):
    """Draw a timeline, one row per rank (see :func:`labs.parallel.pipeline.plot.draw_timeline`)."""
    from labs.parallel.pipeline.plot import draw_timeline as draw

    return draw(tl, ax=ax, title=title, labels=labels, raster=raster)
