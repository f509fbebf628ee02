"""Pipeline schedules as data, a timeline simulator, and timeline drawings (Chapters 14 and 18).

A *schedule* says, for every pipeline rank, the ordered list of compute actions it runs:

* ``F`` -- forward of one micro-batch through one model chunk held by the rank;
* ``B`` -- backward of that micro-batch through that chunk.  When the schedule also holds a ``W``
  for the same (micro-batch, chunk), ``B`` only computes the gradient with respect to the chunk's
  *input* (what the previous stage waits for) and ``W`` computes the *weight* gradients later
  (zero-bubble schedules); otherwise ``B`` is the full backward.

Which (rank, chunk) a micro-batch visits, in order, is its *route*; the sends and receives of a
schedule are implied by it: the output of ``F`` at route position ``k`` goes to position ``k + 1``,
the input gradient of ``B`` at position ``k`` goes to position ``k - 1``.

:func:`simulate` turns a schedule and per-action costs into a timeline without running a model;
:mod:`labs.pipeline_exec` runs a schedule on emulated ranks for a real model and records the same
kind of timeline.  Example::

    s = one_f_one_b(p=4, m=8)
    tl = simulate(s, costs={"F": 1.0, "B": 1.0, "W": 1.0})   # full backward = B + W = 2
    bubble_fraction(tl)            # 3 / 11 = (p - 1) / (m + p - 1)

DualPipe and DualPipeV (Chapter 18) live in :mod:`labs.dualpipe` and produce the same
:class:`Schedule` objects.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

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
    "bubble_fraction",
    "peak_stash",
    "idle_time",
    "bubble_fraction_formula",
    "bubble_time",
    "draw_timeline",
]


class ScheduleError(ValueError):
    """A schedule is malformed or cannot run (a rank waits for work that never comes)."""


@dataclass(frozen=True)
class Action:
    """One compute step of a rank: ``kind`` in ``"F"``, ``"B"``, ``"W"``; micro-batch ``mb``;
    ``chunk``: which of the rank's model chunks (0 unless the rank holds several).  ``overlap``
    marks an F that runs overlapped with the B right after it (DualPipe's "F&B" pairs): the
    two start together and both results appear when the pair ends."""

    kind: str
    mb: int
    chunk: int = 0
    overlap: bool = field(default=False, compare=False)  # F fused with the next B (DualPipe)

    def __str__(self) -> str:
        return f"{self.kind}{self.mb}" + (f".{self.chunk}" if self.chunk else "")


@dataclass
class Schedule:
    """A pipeline schedule: ``actions[rank]`` is the ordered list of that rank's actions.

    Attributes:
        name: for plots and tables.
        p: number of pipeline ranks.  m: number of micro-batches.  v: chunks per rank.
        actions: per rank, the ordered list of :class:`Action`.
        routes: per micro-batch, the (rank, chunk) pairs it visits in forward order.
        copies: how many copies of the weights the ranks hold together (2 for DualPipe).
    """

    name: str
    p: int
    m: int
    v: int
    actions: list[list[Action]]
    routes: list[list[tuple[int, int]]]
    copies: int = 1

    @property
    def num_stages(self) -> int:
        """How many pieces the model is cut into (the length of a route)."""
        return len(self.routes[0])

    def position(self, mb: int, rank: int, chunk: int) -> int:
        """Index of (rank, chunk) on micro-batch ``mb``'s route (its model stage)."""
        try:
            return self.routes[mb].index((rank, chunk))
        except ValueError:
            raise ScheduleError(
                f"{self.name}: rank {rank} chunk {chunk} is not on the route of micro-batch {mb}"
            ) from None

    def messages(self, rank: int) -> list[tuple[Action, str, int]]:
        """The point-to-point messages ``rank``'s actions imply, in order, as
        ``(action, "recv" | "send", peer rank)``: an F receives its input from the previous
        position on the route and sends its output to the next; a B receives the output gradient
        from the next position and sends the input gradient to the previous.  A W sends nothing,
        and nothing is sent when both positions are on the same rank.
        """
        out = []
        last = self.num_stages - 1
        for a in self.actions[rank]:
            pos = self.position(a.mb, rank, a.chunk)
            route = self.routes[a.mb]
            if a.kind == "F":
                out += [(a, "recv", route[pos - 1][0])] if pos > 0 else []
                out += [(a, "send", route[pos + 1][0])] if pos < last else []
            elif a.kind == "B":
                out += [(a, "recv", route[pos + 1][0])] if pos < last else []
                out += [(a, "send", route[pos - 1][0])] if pos > 0 else []
        return [msg for msg in out if msg[2] != rank]  # the turn of a V stays on its rank

    def check(self) -> None:
        """Raise :class:`ScheduleError` unless every (micro-batch, stage) gets exactly one F and
        one B on the right rank, and at most one W after its B."""
        want = sorted((mb, r, c) for mb, route in enumerate(self.routes) for r, c in route)
        for kind in ("F", "B"):
            got = sorted(
                (a.mb, r, a.chunk)
                for r, acts in enumerate(self.actions)
                for a in acts
                if a.kind == kind
            )
            if got != want:
                missing = sorted(set(want) - set(got))[:3]
                extra = sorted({g for g in got if got.count(g) > 1 or g not in want})[:3]
                raise ScheduleError(
                    f"{self.name}: each (micro-batch, rank, chunk) needs exactly one {kind}; "
                    f"missing e.g. {missing}, duplicated or misplaced e.g. {extra}"
                )
        for r, acts in enumerate(self.actions):
            seen_b = set()
            for a in acts:
                if a.kind == "B":
                    seen_b.add((a.mb, a.chunk))
                elif a.kind == "W" and (a.mb, a.chunk) not in seen_b:
                    raise ScheduleError(f"{self.name}: rank {r} runs {a} before its B")
                elif a.kind not in "FBW":
                    raise ScheduleError(f"{self.name}: rank {r} has unknown action kind {a.kind!r}")


def _simple_route(p: int) -> list[tuple[int, int]]:
    return [(r, 0) for r in range(p)]


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


def gpipe(p: int, m: int) -> Schedule:
    """GPipe (Huang et al., 2019): all m forwards, then all m backwards, on every rank."""
    _need(p >= 1 and m >= 1, f"gpipe: need p >= 1 and m >= 1, got p={p}, m={m}")
    acts = [
        [Action("F", i) for i in range(m)] + [Action("B", i) for i in range(m)] for _ in range(p)
    ]
    return Schedule("GPipe", p, m, 1, acts, [_simple_route(p)] * m)


def one_f_one_b(p: int, m: int) -> Schedule:
    """1F1B (PipeDream-Flush / Megatron): rank r runs min(p - 1 - r, m) warm-up forwards, then
    alternates one forward and one backward, then drains the remaining backwards."""
    _need(p >= 1 and m >= 1, f"one_f_one_b: need p >= 1 and m >= 1, got p={p}, m={m}")
    acts = []
    for r in range(p):
        warm = min(p - 1 - r, m)
        seq = [Action("F", i) for i in range(warm)]
        for i in range(m - warm):
            seq += [Action("F", warm + i), Action("B", i)]
        seq += [Action("B", i) for i in range(m - warm, m)]
        acts.append(seq)
    return Schedule("1F1B", p, m, 1, acts, [_simple_route(p)] * m)


def interleaved_1f1b(p: int, m: int, v: int) -> Schedule:
    """Interleaved 1F1B (Narayanan et al., 2021): each rank holds v chunks; stage s = c * p + r
    lives on rank r as chunk c.  Micro-batches move through the chunks in groups of p, and rank r
    warms up with 2(p - 1 - r) + (v - 1) p forwards, as in Megatron-LM.  Needs m % p == 0."""
    _need(p >= 1 and v >= 1 and m >= 1, f"interleaved_1f1b: bad p={p}, m={m}, v={v}")
    _need(m % p == 0, f"interleaved_1f1b: m must be a multiple of p (got m={m}, p={p})")
    total = m * v

    def fwd(k: int) -> Action:
        return Action("F", (k // (p * v)) * p + k % p, (k // p) % v)

    def bwd(k: int) -> Action:
        return Action("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)

    acts = []
    for r in range(p):
        warm = min((p - 1 - r) * 2 + (v - 1) * p, total)
        seq = [fwd(k) for k in range(warm)]
        for k in range(total - warm):
            seq += [fwd(warm + k), bwd(k)]
        seq += [bwd(k) for k in range(total - warm, total)]
        acts.append(seq)
    route = [(s % p, s // p) for s in range(p * v)]
    return Schedule(f"Interleaved 1F1B (v={v})", p, m, v, acts, [route] * m)


def zb_h1(p: int, m: int) -> Schedule:
    """ZB-H1 (Qi et al., 2024): 1F1B with the backward split into B (input gradient) and W
    (weight gradient).  Rank r keeps up to r weight gradients pending and uses them to fill the
    idle slots of the cool-down, so activations stay bounded as in 1F1B."""
    _need(p >= 1 and m >= 1, f"zb_h1: need p >= 1 and m >= 1, got p={p}, m={m}")
    acts = []
    for r in range(p):
        warm = min(p - 1 - r, m)
        seq = [Action("F", i) for i in range(warm)]
        pending: deque[int] = deque()
        for i in range(m - warm):
            seq += [Action("F", warm + i), Action("B", i)]
            pending.append(i)
            if len(pending) > r:
                seq.append(Action("W", pending.popleft()))
        for i in range(m - warm, m):
            seq.append(Action("B", i))
            pending.append(i)
            seq.append(Action("W", pending.popleft()))
        seq += [Action("W", i) for i in pending]
        acts.append(seq)
    return Schedule("ZB-H1", p, m, 1, acts, [_simple_route(p)] * m)


SCHEDULES = {
    "GPipe": gpipe,
    "1F1B": one_f_one_b,
    "Interleaved 1F1B": interleaved_1f1b,
    "ZB-H1": zb_h1,
}


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


def draw_timeline(
    tl: Timeline, ax=None, title: str | None = None, labels: bool = True, raster: bool = False
):
    """Draw a timeline, one row per rank (see :func:`labs.pipeline_plot.draw_timeline`)."""
    from labs.pipeline_plot import draw_timeline as draw

    return draw(tl, ax=ax, title=title, labels=labels, raster=raster)
