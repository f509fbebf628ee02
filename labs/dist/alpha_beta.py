"""The alpha-beta (latency-bandwidth) model of communication time.

Sending one message of ``n`` bytes over a link costs ``alpha + n * beta``: ``alpha`` seconds of
start-up latency, then ``beta = 1 / bandwidth`` seconds per byte (Hockney, 1994).  Two uses:

* :func:`collective_time` gives the closed-form cost of a collective algorithm on ``p`` ranks
  (Thakur, Rabenseifner and Gropp, 2005), e.g. ring all-reduce
  ``2(p-1) alpha + 2(p-1)/p n beta``;
* :func:`predict` replays a :class:`~labs.dist.trace.Trace` of an emulated run on a chosen
  interconnect: every message occupies the sender's outgoing and the receiver's incoming port
  for ``alpha + n beta``; a receive completes when its message arrived; a collective starts when
  its last member arrives and lasts :func:`collective_time`.  Compute regions keep their
  measured duration (or none with ``compute=False``).

Presets (bandwidth per direction, from the vendors' specifications; the latencies are
assumptions of the order of a few microseconds, not measurements -- change them to your own):

* :data:`NVLINK` -- NVLink 4 on an H100 SXM: 900 GB/s total bidirectional per GPU (NVIDIA H100
  Tensor Core GPU datasheet, 2022), so 450 GB/s each way; alpha 3 us.
* :data:`PCIE` -- PCIe 5.0 x16: 32 GT/s x 16 lanes with 128b/130b encoding, about 63 GB/s each
  way (PCI-SIG PCIe 5.0 specification, 2019); alpha 5 us.
* :data:`INFINIBAND` -- InfiniBand NDR, 400 Gb/s per port = 50 GB/s each way (NVIDIA
  ConnectX-7 product brief, 2022); alpha 5 us.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .trace import Trace

__all__ = [
    "Link",
    "NVLINK",
    "PCIE",
    "INFINIBAND",
    "PRESETS",
    "collective_time",
    "hierarchical_all_reduce_time",
    "bus_bandwidth",
    "two_level",
    "predict",
    "Prediction",
]


@dataclass(frozen=True)
class Link:
    """A link with start-up latency ``alpha`` (seconds) and ``bandwidth`` (bytes/s, one way)."""

    name: str
    alpha: float
    bandwidth: float
    source: str = ""

    @property
    def beta(self) -> float:
        """Seconds per byte: ``1 / bandwidth``."""
        return 1.0 / self.bandwidth

    def time(self, nbytes: float) -> float:
        """Seconds to send one message of ``nbytes`` bytes: ``alpha + nbytes * beta``."""
        return self.alpha + nbytes / self.bandwidth


NVLINK = Link("NVLink 4 (H100 SXM)", 3e-6, 450e9, "NVIDIA H100 datasheet (2022): 900 GB/s bidir.")
PCIE = Link("PCIe 5.0 x16", 5e-6, 63e9, "PCI-SIG PCIe 5.0 (2019): 32 GT/s x16, 128b/130b")
INFINIBAND = Link("InfiniBand NDR", 5e-6, 50e9, "NVIDIA ConnectX-7 (2022): 400 Gb/s per port")
PRESETS = {"nvlink": NVLINK, "pcie": PCIE, "infiniband": INFINIBAND}

_ALGORITHMS = {
    "all_reduce": ("ring", "recursive_doubling", "rabenseifner", "tree", "naive"),
    "all_gather": ("ring", "recursive_doubling"),
    "reduce_scatter": ("ring", "recursive_halving"),
    "broadcast": ("tree", "naive", "chain"),
    "reduce": ("tree", "naive", "chain"),
    "gather": ("direct",),
    "scatter": ("direct",),
    "all_to_all": ("direct",),
    "barrier": ("dissemination",),
}
_ALIASES = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter"}


def _lg(p: int) -> int:
    return math.ceil(math.log2(p)) if p > 1 else 0


def collective_time(op: str, nbytes: float, p: int, link: Link, algorithm: str = "") -> float:
    """Seconds for one collective on ``p`` ranks under the alpha-beta model.

    Args:
        op: ``"all_reduce"``, ``"all_gather"``, ``"reduce_scatter"``, ``"broadcast"``,
            ``"reduce"``, ``"gather"``, ``"scatter"``, ``"all_to_all"`` or ``"barrier"``.
        nbytes: n, the size of the whole result in bytes: the reduced / broadcast tensor, the
            concatenated output of all_gather / gather, the input of reduce_scatter / scatter,
            one rank's whole input of all_to_all.
        p: number of ranks.
        link: the link every step uses.
        algorithm: default the first listed: all_reduce ``ring`` |
            ``recursive_doubling`` | ``rabenseifner`` (halving-doubling) | ``tree`` (binomial
            reduce then broadcast) | ``naive`` (everyone sends to rank 0, which sends back);
            all_gather ``ring`` | ``recursive_doubling``; reduce_scatter ``ring`` |
            ``recursive_halving``; broadcast / reduce ``tree`` | ``naive`` | ``chain``.
    """
    op = _ALIASES.get(op, op)
    if op not in _ALGORITHMS:
        raise ValueError(f"collective_time: unknown op {op!r}; expected one of {list(_ALGORITHMS)}")
    algo = algorithm or _ALGORITHMS[op][0]
    if algo not in _ALGORITHMS[op]:
        raise ValueError(
            f"collective_time: {op} has no algorithm {algo!r}; expected one of {_ALGORITHMS[op]}"
        )
    if p < 1:
        raise ValueError(f"collective_time: p must be >= 1, got {p}")
    if p == 1:
        return 0.0
    a, b, n, lg = link.alpha, link.beta, float(nbytes), _lg(p)
    frac = (p - 1) / p
    if op == "all_reduce":
        return {
            "ring": 2 * (p - 1) * a + 2 * frac * n * b,
            "recursive_doubling": lg * (a + n * b),
            "rabenseifner": 2 * lg * a + 2 * frac * n * b,
            "tree": 2 * lg * (a + n * b),
            "naive": 2 * (p - 1) * (a + n * b),
        }[algo]
    if op in ("all_gather", "reduce_scatter"):
        steps = p - 1 if algo == "ring" else lg
        return steps * a + frac * n * b
    if op in ("broadcast", "reduce"):
        return {
            "tree": lg * (a + n * b),
            "naive": (p - 1) * (a + n * b),
            "chain": (p - 1) * (a + n * b),
        }[algo]
    if op in ("gather", "scatter", "all_to_all"):
        return (p - 1) * a + frac * n * b
    return lg * a  # barrier


def hierarchical_all_reduce_time(nbytes: float, nodes: int, per_node: int, intra: Link,
                                 inter: Link) -> float:  # fmt: skip
    """Two-level all-reduce: ring reduce-scatter inside each node, ring all-reduce of each
    1/per_node shard across nodes, ring all-gather inside each node (seconds)."""
    t = 2 * collective_time("reduce_scatter", nbytes, per_node, intra)
    return t + collective_time("all_reduce", nbytes / per_node, nodes, inter)


def bus_bandwidth(op: str, nbytes: float, p: int, seconds: float) -> float:
    """nccl-tests "bus bandwidth" (bytes/s): algorithm bandwidth n/t times 2(p-1)/p for
    all-reduce, (p-1)/p for all-gather, reduce-scatter and all-to-all, 1 otherwise."""
    op = _ALIASES.get(op, op)
    factor = {"all_reduce": 2 * (p - 1) / p}.get(
        op, (p - 1) / p if op in ("all_gather", "reduce_scatter", "all_to_all") else 1.0
    )
    return nbytes / seconds * factor


def two_level(per_node: int, intra: Link = NVLINK, inter: Link = INFINIBAND) -> Callable:
    """A topology: ranks ``k*per_node ... (k+1)*per_node - 1`` share node k and talk over
    ``intra``; ranks on different nodes talk over ``inter``.  Returns ``link(src, dst)``."""

    def link(src: int, dst: int) -> Link:
        return intra if src // per_node == dst // per_node else inter

    link.per_node = per_node  # type: ignore[attr-defined]
    return link


@dataclass
class Prediction:
    """Result of :func:`predict`: times in seconds from the start of the program.

    Attributes:
        total: when the last rank finishes.
        per_rank: when each rank finishes.
        events: per rank, ``(op, start, end, kind)`` of every replayed record.
    """

    total: float
    per_rank: list[float]
    events: list[list[tuple[str, float, float, str]]] = field(default_factory=list)


def _group_link(link: Callable, ranks: tuple[int, ...]) -> Link:
    """The slowest link between ring neighbours of a group (what a ring is limited by)."""
    pairs = [(ranks[i], ranks[(i + 1) % len(ranks)]) for i in range(len(ranks))]
    links = [link(s, d) for s, d in pairs if s != d] or [link(ranks[0], ranks[0])]
    return Link("group", max(x.alpha for x in links), min(x.bandwidth for x in links))


def _total_bytes(op: str, nbytes: int, p: int) -> float:
    """Convert a record's per-rank ``nbytes`` to :func:`collective_time`'s ``nbytes``."""
    base = _ALIASES.get(op, op)
    return nbytes * p if base in ("all_gather", "reduce_scatter", "gather", "scatter") else nbytes


def predict(
    trace: Trace,
    link: Link | Callable[[int, int], Link] = NVLINK,
    algorithms: dict[str, str] | None = None,
    compute: bool = True,
) -> Prediction:
    """Replay ``trace`` under the alpha-beta model and predict when each rank finishes.

    Args:
        trace: from :func:`labs.dist.last_trace`.
        link: one :class:`Link` for every pair of ranks, or ``link(src, dst) -> Link``
            (e.g. :func:`two_level`).
        algorithms: per collective op, the algorithm :func:`collective_time` assumes.
        compute: keep the measured duration of :func:`labs.dist.region` spans (else 0).
    """
    link_of = link if callable(link) and not isinstance(link, Link) else (lambda s, d: link)
    algorithms = algorithms or {}
    n = trace.world_size
    recs = trace.records
    clock = [0.0] * n
    out_free = [0.0] * n
    in_free = [0.0] * n
    arrival: dict[int, float] = {}
    idx = [0] * n
    events: list[list[tuple[str, float, float, str]]] = [[] for _ in range(n)]
    seen: dict[tuple[int, tuple[int, ...]], int] = {}
    waiting: dict[int, Any] = {}
    arrived: dict[tuple, dict[int, float]] = {}
    while True:
        # Replay the action that can happen earliest, so that ports are granted in time order.
        best_t, r = math.inf, -1
        for k in range(n):
            if idx[k] >= len(recs[k]) or k in waiting:
                continue
            rec = recs[k][idx[k]]
            if rec.kind == "p2p" and rec.op in ("send", "isend"):
                t = max(clock[k], out_free[k])
            elif rec.kind == "p2p":
                if rec.msg_id not in arrival:
                    continue
                t = max(clock[k], arrival[rec.msg_id])
            else:
                t = clock[k]
            if t < best_t:
                best_t, r = t, k
        if r < 0:
            break
        rec = recs[r][idx[r]]
        idx[r] += 1
        if rec.kind == "p2p" and rec.op in ("send", "isend"):
            d = rec.peers[0]
            start = max(clock[r], out_free[r], in_free[d])
            end = start + link_of(r, d).time(rec.nbytes)
            out_free[r] = in_free[d] = arrival[rec.msg_id] = end
            if rec.op == "send":
                clock[r] = end
            events[r].append((rec.op, start, end, "p2p"))
        elif rec.kind == "p2p":
            start = clock[r]
            clock[r] = max(clock[r], arrival[rec.msg_id])
            events[r].append((rec.op, start, clock[r], "p2p"))
        elif rec.kind == "compute":
            start = clock[r]
            clock[r] += rec.duration if compute else 0.0
            events[r].append((rec.op, start, clock[r], "compute"))
        else:
            k = seen.get((r, rec.group), 0)
            seen[(r, rec.group)] = k + 1
            key = (rec.group, k)
            arrived.setdefault(key, {})[r] = clock[r]
            waiting[r] = rec
            if len(arrived[key]) == len(rec.group):
                start = max(arrived.pop(key).values())
                p = len(rec.group)
                algo = algorithms.get(_ALIASES.get(rec.op, rec.op), "")
                dur = collective_time(
                    rec.op, _total_bytes(rec.op, rec.nbytes, p), p,
                    _group_link(link_of, rec.group), algo,
                )  # fmt: skip
                for m in rec.group:
                    clock[m] = start + dur
                    events[m].append((rec.op, start, start + dur, "collective"))
                    del waiting[m]
    if waiting or any(idx[r] < len(recs[r]) for r in range(n)):
        stuck = {r: recs[r][min(idx[r], len(recs[r]) - 1)].op for r in range(n)
                 if r in waiting or idx[r] < len(recs[r])}  # fmt: skip
        raise ValueError(f"predict: the trace cannot be replayed; ranks stuck at {stuck}")
    return Prediction(max(clock, default=0.0), clock, events)
