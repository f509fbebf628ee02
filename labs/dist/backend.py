"""``labs.dist`` as a ``torch.distributed`` backend: PyTorch's own DDP, FSDP2 and DTensor on
emulated ranks.

``torch.distributed``'s functions reach a *process group* object, and PyTorch's parallel modules
(``DistributedDataParallel``'s C++ reducer, FSDP2's ``fully_shard``, ``DeviceMesh``, the
functional collectives) call its methods directly.  This module gives every emulated rank a real
``torch.distributed.ProcessGroup``, :class:`EmulatedProcessGroup`, whose methods run the
emulator's collectives (:mod:`labs.dist._ops`, :mod:`._p2p`, :mod:`._exchange`): every call
is traced with its size and group, costed by :mod:`labs.dist.alpha_beta`, checked for
mismatches and deadlocks.  It is registered under the backend name ``"emulated"`` with
``torch.distributed.Backend.register_backend``; on an emulated rank ``init_process_group("gloo")``
(or ``"nccl"`` without GPUs) creates it (:func:`labs.dist.compat.init_process_group`), and so
does ``new_group(backend="gloo")``.  Its groups call themselves ``"gloo"`` (``get_backend``,
DDP's logs), since they run gloo's collectives on CPU tensors.
How torch's process-group tables become per rank is in :mod:`labs.dist._torch_world`.

A collective returns a :class:`_EmulatedWork`: ``wait()`` blocks through the emulator (the
rank gives up its turn, deadlocks are detected), ``get_future()`` waits and returns a completed
future (DDP's reducer asks for it at once).

A collective the backend does not provide raises ``NotImplementedError`` naming it, never hangs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._C import _distributed_c10d as c10d
from torch.distributed import distributed_c10d as dc10d

from . import _exchange as _ex
from . import _ops, _p2p, _profiler, _shards
from ._backend_work import _EmulatedWork, gloo_stand_in
from ._common import ArgumentError
from ._emulator import Group

__all__ = ["BACKEND", "EmulatedProcessGroup", "SUPPORTED"]

BACKEND = "emulated"


def _op(opts: Any) -> Any:
    """The emulator's name for ``opts.reduceOp``; PREMUL_SUM and custom ops raise."""
    op = opts.reduceOp
    op = getattr(op, "op", op)  # a ReduceOp holds its RedOpType in .op
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    if name.upper() not in {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"}:
        raise NotImplementedError(
            f"the emulated backend supports ReduceOp SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, "
            f"BXOR; got {op!r} (PREMUL_SUM: scale the tensor first, then reduce with SUM)"
        )
    return name


def _unsupported(name: str):
    def method(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"rank {self._ctx.rank}: ProcessGroup.{name} is not provided by the emulated backend "
            f"(labs.dist.backend); supported: {', '.join(SUPPORTED)}"
        )

    method.__name__ = name
    return method


SUPPORTED = (
    "allreduce", "allreduce_coalesced", "allgather_coalesced", "broadcast", "reduce", "allgather",
    "all_gather_single", "_allgather_base", "all_gather_single_coalesced", "reduce_scatter",
    "reduce_scatter_single", "_reduce_scatter_base", "reduce_scatter_single_coalesced",
    "gather", "scatter", "alltoall", "all_to_all_single", "barrier", "monitored_barrier",
    "send", "recv", "recv_anysource",
)  # fmt: skip


class EmulatedProcessGroup(c10d.ProcessGroup):
    """One emulated rank's ``torch.distributed.ProcessGroup``: its members, its rank in them,
    and the c10d methods (lists of tensors and an options object, returning a ``Work``), each
    run as the emulator's collective on the group's :class:`~labs.dist._emulator.Group`.

    Ranks in the options (``rootRank``, ``dstRank``) are group ranks, as in c10d.
    """

    def __init__(self, ctx: Any, group: Group):
        super().__init__(group.index[ctx.rank], group.size())
        self._ctx, self._labs_group = ctx, group
        self._coalesced: list[_EmulatedWork] | None = None
        # torch's C++ asks a group named "gloo" for its gloo backend (DDP's logger reads its
        # thread count): a one-rank gloo group stands in, never used for a collective
        self._register_backend(torch.device("cpu"), c10d.ProcessGroup.BackendType.GLOO,
                               gloo_stand_in())  # fmt: skip

    # the c10d surface --------------------------------------------------------------------
    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        """``"gloo"``: the collectives run as gloo's (DDP logs this name, as under gloo)."""
        return "gloo"

    @property
    def _device_types(self) -> list[torch.device]:
        """The devices this group's collectives take: CPU tensors (as gloo's), which
        ``torch.distributed.checkpoint.async_save`` requires."""
        return [torch.device("cpu")]

    def _set_group_name(self, name: str) -> None:
        super()._set_group_name(name)
        self._name = name

    @property
    def group_name(self) -> str:
        """The name torch gave this group (c10d's getter does not reach process groups written
        in Python); kept after ``destroy_process_group`` removed it from the rank's tables."""
        name = getattr(self, "_name", None)
        return name if name is not None else dc10d._world.pg_names[self]

    def getGroupName(self) -> str:  # noqa: N802 - torch's name
        return self.group_name

    def __repr__(self) -> str:
        return f"EmulatedProcessGroup(ranks={list(self._labs_group.ranks)}, rank={self.rank()})"

    def _run(self, result: list[torch.Tensor], works: list[Any], after: Any = None,
             event: tuple[str, list[torch.Tensor]] | None = None) -> _EmulatedWork:  # fmt: skip
        """The work of a call; ``event``: (name, inputs) of the profiler event gloo records."""
        ev = _profiler.record(*event) if event is not None else None
        work = _EmulatedWork(works, result, after=after, event=ev)
        if self._coalesced is not None:  # inside _start_coalescing ... _end_coalescing
            self._coalesced.append(work)
        return work

    def _start_coalescing(self, device: Any = None) -> None:
        """``torch.distributed._coalescing_manager``: collect the works issued until
        :meth:`_end_coalescing` (each collective still runs on its own)."""
        self._coalesced = []

    def _end_coalescing(self, device: Any = None) -> _EmulatedWork:
        works, self._coalesced = self._coalesced or [], None
        return _EmulatedWork(works, [t for w in works for t in w._result])

    def _root(self, root: int, fn: str) -> int:
        """Check a group rank from the options (gloo raises a RuntimeError for a bad one)."""
        if not 0 <= root < self.size():
            raise ArgumentError(
                f"rank {self._ctx.rank}: {fn}: root rank {root} is not a rank of this group "
                f"(size {self.size()})"
            )
        return root

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> _EmulatedWork:
        op = _op(opts or c10d.AllreduceOptions())
        g = self._labs_group
        name = "sparse_all_reduce" if tensors and tensors[0].is_sparse else "all_reduce"
        works = [_ops.all_reduce(self._ctx, t, op, g, True) for t in tensors]
        return self._run(tensors, works, event=(name, [] if name[0] == "s" else tensors))

    def allreduce_coalesced(self, tensors, opts=None):
        """gloo's: one all-reduce of the tensors flattened into one buffer (so the ring's chunks,
        and the order of summation, are those of the whole buffer), copied back after."""
        op = _op(opts or c10d.AllreduceCoalescedOptions())
        flat = torch.cat([t.reshape(-1) for t in tensors])
        work = _ops.all_reduce(self._ctx, flat, op, self._labs_group, True)

        def back() -> None:
            for t, part in zip(tensors, flat.split([t.numel() for t in tensors])):
                t.copy_(part.view(t.shape))

        return self._run(tensors, [work], back, ("all_reduce", tensors))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """``output_lists[i][j]`` <- rank i's ``input_list[j]`` (one all-gather per tensor)."""
        g, n = self._labs_group, self.size()
        works = [_shards.all_gather(self._ctx, [output_lists[i][j] for i in range(n)], t, g, True)
                 for j, t in enumerate(input_list)]  # fmt: skip
        outs = [t for o in output_lists for t in o]
        return self._run(outs, works, event=("all_gather", input_list))

    def broadcast(self, tensors, opts=None):
        root = self._root((opts or c10d.BroadcastOptions()).rootRank, "broadcast")
        g = self._labs_group
        works = [_ops.broadcast(self._ctx, t, None, g, True, root) for t in tensors]
        return self._run(tensors, works, event=("broadcast", tensors))

    def reduce(self, tensors, opts=None):
        opts = opts or c10d.ReduceOptions()
        op, g = _op(opts), self._labs_group
        root = self._root(opts.rootRank, "reduce")
        works = [_ops.reduce(self._ctx, t, None, op, g, True, root) for t in tensors]
        return self._run(tensors, works, event=("reduce", tensors))

    def allgather(self, output_tensors, input_tensors, opts=None):
        g = self._labs_group
        works = [_shards.all_gather(self._ctx, outs, t, g, True)
                 for outs, t in zip(output_tensors, input_tensors)]  # fmt: skip
        outs = [t for o in output_tensors for t in o]
        return self._run(outs, works, event=("all_gather", list(input_tensors)))

    def all_gather_single(self, output, input, opts=None):
        w = _shards.all_gather_into_tensor(self._ctx, output, input, self._labs_group, True)
        return self._run([output], [w], event=("all_gather", [input]))

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        g = self._labs_group
        works = [_shards.all_gather_into_tensor(self._ctx, o, i, g, True)
                 for o, i in zip(outputs, inputs)]  # fmt: skip
        return self._run(list(outputs), works)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        op, g = _op(opts or c10d.ReduceScatterOptions()), self._labs_group
        works = [_shards.reduce_scatter(self._ctx, o, ins, op, g, True)
                 for o, ins in zip(output_tensors, input_lists)]  # fmt: skip
        return self._run(list(output_tensors), works, event=("all_reduce", list(output_tensors)))

    def reduce_scatter_single(self, output, input, opts=None):
        op = _op(opts or c10d.ReduceScatterOptions())
        w = _shards.reduce_scatter_tensor(self._ctx, output, input, op, self._labs_group, True)
        return self._run([output], [w], event=("all_reduce", [input]))

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        op, g = _op(opts or c10d.ReduceScatterOptions()), self._labs_group
        works = [_shards.reduce_scatter_tensor(self._ctx, o, i, op, g, True)
                 for o, i in zip(outputs, inputs)]  # fmt: skip
        return self._run(list(outputs), works)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def gather(self, output_lists, input_tensors, opts=None):
        root, g = self._root((opts or c10d.GatherOptions()).rootRank, "gather"), self._labs_group
        outs = output_lists[0] if output_lists else None
        w = _shards.gather(self._ctx, input_tensors[0], outs, None, g, True, root)
        return self._run(list(outs or []), [w], event=("gather", list(input_tensors)))

    def scatter(self, output_tensors, input_lists, opts=None):
        root, g = self._root((opts or c10d.ScatterOptions()).rootRank, "scatter"), self._labs_group
        ins = input_lists[0] if input_lists else None
        w = _shards.scatter(self._ctx, output_tensors[0], ins, None, g, True, root)
        return self._run(list(output_tensors), [w], event=("scatter", list(ins or [])))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        w = _ex.all_to_all(self._ctx, output_tensors, input_tensors, self._labs_group, True)
        return self._run(list(output_tensors), [w], event=("all_to_all", list(input_tensors)))

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):  # fmt: skip
        w = _ex.all_to_all_single(self._ctx, output, input, list(output_split_sizes) or None,
                                  list(input_split_sizes) or None, self._labs_group, True)  # fmt: skip
        return self._run([output], [w], event=("all_to_all", [input]))

    alltoall_base = all_to_all_single

    def barrier(self, opts=None):
        works = [_ops.barrier(self._ctx, self._labs_group, True)]
        return self._run([], works, event=("barrier", []))

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        _ops.monitored_barrier(self._ctx, self, timeout, wait_all_ranks)

    def send(self, tensors, dst, tag=0):
        for t in tensors:
            _p2p.send(self._ctx, t, None, self._labs_group, tag, dst)
        return self._run(list(tensors), [], event=("send", list(tensors)))

    def recv(self, tensors, src, tag=0):
        works = [_p2p.irecv(self._ctx, t, None, self._labs_group, tag, src) for t in tensors]
        return self._run(list(tensors), works, event=("recv", list(tensors)))

    def recv_anysource(self, tensors, tag=0):
        """Receive from whichever rank sends first (at once: torch's ``recv(src=None)``)."""
        g = self._labs_group
        srcs = [_p2p.recv(self._ctx, t, None, None, tag, None) for t in tensors]
        src = g.index.get(srcs[-1], -1) if srcs else -1
        return _EmulatedWork(
            [], list(tensors), src, event=_profiler.record("recvAnySource", tensors)
        )


for _name in ("reduce_coalesced", "broadcast_coalesced", "gather_coalesced"):
    if _name not in EmulatedProcessGroup.__dict__:
        setattr(EmulatedProcessGroup, _name, _unsupported(_name))
