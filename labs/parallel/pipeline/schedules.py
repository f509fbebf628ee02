"""Pipeline schedules as data (Chapters 14 and 18): the format and the classic schedules.

A *schedule* says, for every pipeline rank, the ordered list of compute actions it runs:

* ``F`` -- forward of one micro-batch through one model chunk held by the rank;
* ``B`` -- backward of that micro-batch through that chunk.  When the schedule also holds a ``W``
  for the same (micro-batch, chunk), ``B`` only computes the gradient with respect to the chunk's
  *input* (what the previous stage waits for) and ``W`` computes the *weight* gradients later
  (zero-bubble schedules); otherwise ``B`` is the full backward.

Which (rank, chunk) a micro-batch visits, in order, is its *route*; the sends and receives of a
schedule are implied by it: the output of ``F`` at route position ``k`` goes to position ``k + 1``,
the input gradient of ``B`` at position ``k`` goes to position ``k - 1``.

This module holds :class:`Action`, :class:`Schedule` and GPipe, 1F1B, interleaved 1F1B and ZB-H1;
:mod:`labs.parallel.pipeline.sim` simulates them, :mod:`labs.parallel.pipeline.plot` draws the timelines,
:mod:`labs.parallel.pipeline.execute` runs them on emulated ranks and :mod:`labs.parallel.pipeline.dualpipe` adds DualPipe.
:mod:`labs.parallel.pipeline` gathers all of it under one name.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = [
    "Action",
    "Schedule",
    "ScheduleError",
    "gpipe",
    "one_f_one_b",
    "interleaved_1f1b",
    "zb_h1",
    "SCHEDULES",
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
