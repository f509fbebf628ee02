"""Simulating pipeline schedules (Chapters 14 and 18): timelines, bubbles, memory, formulas.

:func:`simulate` turns a :class:`labs.parallel.pipeline.schedules.Schedule` and per-action costs into a
:class:`Timeline` without running a model; :mod:`labs.parallel.pipeline.execute` records the same kind of
timeline from a real run.  Example::

    s = one_f_one_b(p=4, m=8)
    tl = simulate(s, costs={"F": 1.0, "B": 1.0, "W": 1.0})   # full backward = B + W = 2
    bubble_fraction(tl)            # 3 / 11 = (p - 1) / (m + p - 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labs.parallel.pipeline.schedules import SCHEDULES, Action, Schedule, ScheduleError

__all__ = [
    "Event",
    "Timeline",
    "action_cost",
    "simulate",
    "bubble_fraction",
    "peak_stash",
    "idle_time",
    "bubble_fraction_formula",
    "bubble_time",
]


@dataclass(frozen=True)
class Event:
    """One action on the timeline: rank, action, start and end (in cost units or seconds)."""

    rank: int
    action: Action
    start: float
    end: float


@dataclass
class Timeline:
    """What ran where and when.  ``events[rank]`` in execution order."""

    schedule: Schedule
    events: list[list[Event]] = field(default_factory=list)

    @property
    def makespan(self) -> float:
        """Time from the first start to the last end."""
        starts = [e.start for evs in self.events for e in evs]
        ends = [e.end for evs in self.events for e in evs]
        return max(ends) - min(starts)

    def busy(self, rank: int) -> float:
        """Total compute time of one rank."""
        return sum(e.end - e.start for e in self.events[rank])


def action_cost(s: Schedule, rank: int, a: Action, costs: dict[str, float]) -> float:
    """Cost of one action: ``costs[kind]`` is for a chunk holding 1/p of the model; a chunk of a
    schedule with more stages than ranks costs proportionally less.  A ``B`` with no ``W`` in the
    schedule is the full backward and costs ``B + W``."""
    scale = s.p / s.num_stages
    if a.kind == "B" and (rank, a.mb, a.chunk) not in _split_set(s):
        return scale * (costs["B"] + costs.get("W", 0.0))
    return scale * costs[a.kind]


def _split_set(s: Schedule) -> set[tuple[int, int, int]]:
    """The (rank, micro-batch, chunk) whose backward is split into B and W."""
    cache = getattr(s, "_split_cache", None)
    if cache is None:
        cache = {
            (r, a.mb, a.chunk) for r, acts in enumerate(s.actions) for a in acts if a.kind == "W"
        }
        s._split_cache = cache  # type: ignore[attr-defined]
    return cache


def _dependency(s: Schedule, r: int, a: Action) -> tuple[str, int, int] | None:
    """The (kind, micro-batch, route position) whose result action ``a`` on rank ``r`` needs."""
    pos = s.position(a.mb, r, a.chunk)
    if a.kind == "F":
        return ("F", a.mb, pos - 1) if pos > 0 else None
    if a.kind == "B":
        return ("B", a.mb, pos + 1) if pos < s.num_stages - 1 else ("F", a.mb, pos)
    return ("B", a.mb, pos)


def simulate(s: Schedule, costs: dict[str, float] | None = None, comm: float = 0.0) -> Timeline:
    """Timeline of schedule ``s`` when each action takes ``costs[kind]`` and each message between
    ranks takes ``comm`` (same units).  Each rank runs its actions in order; an action starts when
    the rank is free and its inputs have arrived.

    Default costs: F = 1, B = 1, W = 1 (the zero-bubble paper's unit case), i.e. a full backward
    costs 2 forwards.  An overlapped pair (``Action.overlap``) costs ``costs["F&B"]`` if given,
    else F + B, and both its results appear at its end.  Raises :class:`ScheduleError` naming the
    stuck ranks if the schedule deadlocks.
    """
    costs = {"F": 1.0, "B": 1.0, "W": 1.0} | (costs or {})
    s.check()
    done: dict[tuple[str, int, int], tuple[float, int]] = {}  # (kind, mb, pos) -> (end, rank)
    nxt = [0] * s.p
    free = [0.0] * s.p
    events: list[list[Event]] = [[] for _ in range(s.p)]
    remaining = sum(len(a) for a in s.actions)
    while remaining:
        progressed = False
        for r in range(s.p):
            while nxt[r] < len(s.actions[r]):
                group = s.actions[r][nxt[r] : nxt[r] + (2 if s.actions[r][nxt[r]].overlap else 1)]
                ready = [0.0]
                for a in group:
                    dep = _dependency(s, r, a)
                    if dep is not None and dep not in done:
                        break
                    if dep is not None:
                        end, src = done[dep]
                        ready.append(end + (comm if src != r else 0.0))
                else:
                    start = max(free[r], *ready)
                    parts = [action_cost(s, r, a, costs) for a in group]
                    total = sum(parts)
                    if len(group) == 2 and "F&B" in costs:
                        total = costs["F&B"] * s.p / s.num_stages
                    t = start
                    for a, c in zip(group, parts):
                        events[r].append(Event(r, a, t, t + c * total / sum(parts)))
                        t += c * total / sum(parts)
                    for a in group:
                        done[(a.kind, a.mb, s.position(a.mb, r, a.chunk))] = (start + total, r)
                    free[r] = start + total
                    nxt[r] += len(group)
                    remaining -= len(group)
                    progressed = True
                    continue
                break
        if not progressed:
            stuck = [
                f"rank {r} waits before {s.actions[r][nxt[r]]}"
                for r in range(s.p)
                if nxt[r] < len(s.actions[r])
            ]
            raise ScheduleError(f"{s.name}: deadlock, no rank can proceed: " + "; ".join(stuck))
    return Timeline(s, events)


def bubble_fraction(tl: Timeline) -> float:
    """Idle share of the ranks' time: 1 - (sum of busy time) / (p x makespan)."""
    p = tl.schedule.p
    return 1.0 - sum(tl.busy(r) for r in range(p)) / (p * tl.makespan)


def peak_stash(tl: Timeline) -> list[int]:
    """Per rank, the largest number of micro-batch chunks whose activations are held at once:
    from the end of F until the end of the full backward (or of W when the backward is split)."""
    split = _split_set(tl.schedule)
    peaks = []
    for r, evs in enumerate(tl.events):
        live = peak = 0
        for e in evs:  # events of one rank are sequential
            a = e.action
            if a.kind == "F":
                live += 1
                peak = max(peak, live)
            elif (a.kind == "B" and (r, a.mb, a.chunk) not in split) or a.kind == "W":
                live -= 1
        peaks.append(peak)
    return peaks


def idle_time(tl: Timeline) -> float:
    """Idle time of the most idle rank: max over ranks of (makespan - busy time)."""
    return max(tl.makespan - tl.busy(r) for r in range(tl.schedule.p))


def bubble_fraction_formula(p: int, m: int, v: int = 1) -> float:
    """GPipe and 1F1B: (p - 1) / (m + p - 1) of the total time; with v interleaved chunks per rank
    the bubble shrinks v-fold: (p - 1) / (v m + p - 1).  (Equal stages, any F:B ratio.)"""
    return (p - 1) / (v * m + p - 1)


def bubble_time(name: str, p: int, v: int = 1, costs: dict[str, float] | None = None) -> float:
    """Published idle time per rank, in the units of ``costs`` (F, B, W per 1/p of the model;
    B is the input-gradient part, so a full backward costs B + W; F&B defaults to F + B + W).

    1F1B and GPipe (p - 1)(F + B + W); interleaved the same divided by v; ZB-H1 (Qi et al., 2024)
    (p - 1)(F + B - W) (for W no longer than F or B, and m >= p); DualPipe (DeepSeek-AI, 2024) (p/2 - 1)(F&B + B_full - 3W); DualPipeV is
    DualPipe on 2p half-size stages: (p - 1)(F&B + B_full - 3W) / 2.
    """
    c = {"F": 1.0, "B": 1.0, "W": 1.0} | (costs or {})
    f, b, w = c["F"], c["B"], c["W"]
    fb = c.get("F&B", f + b + w)
    if name in ("GPipe", "1F1B"):
        return (p - 1) * (f + b + w)
    if name.startswith("Interleaved"):
        return (p - 1) * (f + b + w) / v
    if name == "ZB-H1":
        return (p - 1) * (f + b - w)
    if name == "DualPipe":
        return (p / 2 - 1) * (fb + b + w - 3 * w)
    if name == "DualPipeV":
        return (p - 1) * (fb + b + w - 3 * w) / 2
    names = [*SCHEDULES, "DualPipe", "DualPipeV"]
    raise ValueError(f"bubble_time: unknown schedule {name!r}; use one of {names}")
