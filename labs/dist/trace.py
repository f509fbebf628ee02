"""The trace of an emulated run: what each rank sent, received and when.

Every call a rank makes through :mod:`labs.dist` inside :func:`labs.dist.launch` appends one
:class:`Record` to that rank's list.  After ``launch`` returns, :func:`labs.dist.last_trace`
gives the :class:`Trace`::

    dist.launch(my_program, 4)
    tr = dist.last_trace()
    tr.bytes_sent()          # [bytes sent by rank 0, rank 1, ...]
    tr.message_counts()      # point-to-point messages sent per rank
    tr.timeline(0)           # rank 0's operations in order, with start and end times

Bytes of point-to-point operations are exact.  A collective is one record per rank whose bytes
are what that rank would move under the bandwidth-optimal algorithm NCCL uses for large messages
(ring for all-reduce / all-gather / reduce-scatter, a pipelined chain for broadcast / reduce,
direct transfers for gather / scatter / all-to-all); ``Record.algorithm`` says which.
Times are seconds since ``launch`` started (``time.perf_counter``), so they vary run to run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

__all__ = ["Record", "Trace", "P2P_OPS", "COLLECTIVE_OPS"]

P2P_OPS = ("send", "isend", "recv", "irecv")
COLLECTIVE_OPS = (
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "gather",
    "scatter",
    "reduce_scatter",
    "all_to_all",
    "barrier",
)


@dataclass(slots=True)
class Record:
    """One operation of one rank.

    Attributes:
        rank: global rank that made the call.
        op: the ``labs.dist`` function name (``"send"``, ``"all_reduce"``, ...), or a region name
            given to :func:`labs.dist.region` (then ``kind == "compute"``).
        peers: global ranks this operation exchanged data with (for a collective: the other
            members of its group).
        bytes_sent: bytes this rank sent in the operation.
        bytes_recv: bytes this rank received in the operation.
        t_start: seconds since launch when the call was made (for ``irecv``: when posted).
        t_end: seconds since launch when it completed (for ``irecv``: when ``wait`` returned).
        group: global ranks of the group the operation ran on.
        kind: ``"p2p"``, ``"collective"`` or ``"compute"``.
        nbytes: size in bytes of the operation's main buffer (the tensor sent / reduced /
            this rank's contribution to a gather).
        msg_id: for point-to-point records, the id shared by a send and the recv it matched.
        algorithm: for collectives, the algorithm the byte counts assume.
    """

    rank: int
    op: str
    peers: tuple[int, ...]
    bytes_sent: int
    bytes_recv: int
    t_start: float
    t_end: float
    group: tuple[int, ...]
    kind: str = "p2p"
    nbytes: int = 0
    msg_id: int = -1
    algorithm: str = ""

    @property
    def duration(self) -> float:
        """``t_end - t_start`` in seconds."""
        return self.t_end - self.t_start


class Trace:
    """Per-rank lists of :class:`Record` from one emulated run (``trace[r]`` is rank r's list)."""

    def __init__(self, world_size: int, records: list[list[Record]] | None = None):
        self.world_size = world_size
        self._records: list[list[Record]] = records or [[] for _ in range(world_size)]
        # running ranks append plain tuples (Record's fields in order), ~1 us cheaper per call
        # than building a Record; they become Records when someone reads the trace
        self.pending: list[list[tuple]] = [[] for _ in range(world_size)]

    @property
    def records(self) -> list[list[Record]]:
        """``records[r]``: rank r's :class:`Record` list, in call order."""
        for rank, raw in enumerate(self.pending):
            n = len(raw)  # a running rank may append meanwhile: convert only what is there
            if n:
                self._records[rank].extend(Record(*t) for t in raw[:n])
                del raw[:n]
        return self._records

    def __getitem__(self, rank: int) -> list[Record]:
        return self.records[rank]

    def __len__(self) -> int:
        return self.world_size

    def all_records(self) -> list[Record]:
        """Every record of every rank, sorted by start time."""
        return sorted((r for rs in self.records for r in rs), key=lambda r: r.t_start)

    def select(self, op: str | None = None, kind: str | None = None) -> list[list[Record]]:
        """Per-rank records, keeping only operation ``op`` and/or kind ``kind``."""
        return [
            [r for r in rs if (op is None or r.op == op) and (kind is None or r.kind == kind)]
            for rs in self.records
        ]

    def bytes_sent(self, kind: str | None = None) -> list[int]:
        """Bytes sent per rank (index = rank); ``kind="p2p"`` counts only send / isend."""
        return [sum(r.bytes_sent for r in rs) for rs in self.select(kind=kind)]

    def bytes_received(self, kind: str | None = None) -> list[int]:
        """Bytes received per rank (index = rank)."""
        return [sum(r.bytes_recv for r in rs) for rs in self.select(kind=kind)]

    def message_counts(self) -> list[int]:
        """Point-to-point messages sent per rank (``send`` and ``isend`` calls)."""
        return [sum(1 for r in rs if r.op in ("send", "isend")) for rs in self.records]

    def op_counts(self, rank: int | None = None) -> Counter:
        """How many times each operation was called, by one rank or by all ranks together."""
        ranks = range(self.world_size) if rank is None else [rank]
        return Counter(r.op for k in ranks for r in self.records[k])

    def timeline(self, rank: int) -> list[tuple[str, float, float]]:
        """Rank ``rank``'s operations in call order as ``(op, t_start, t_end)`` in seconds."""
        return [(r.op, r.t_start, r.t_end) for r in self.records[rank]]

    def summary(self) -> str:
        """A small text table: per rank, messages, bytes sent / received and operations."""
        lines = [f"{'rank':>4} {'msgs':>5} {'sent B':>12} {'recv B':>12}  ops"]
        sent, recv, msgs = self.bytes_sent(), self.bytes_received(), self.message_counts()
        for k in range(self.world_size):
            ops = ", ".join(f"{op}x{n}" for op, n in sorted(self.op_counts(k).items()))
            lines.append(f"{k:>4} {msgs[k]:>5} {sent[k]:>12} {recv[k]:>12}  {ops}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        n = sum(len(rs) for rs in self.records)
        return f"Trace(world_size={self.world_size}, records={n})"
