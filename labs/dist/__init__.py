"""``torch.distributed`` on threads: emulated ranks for learning and testing collectives.

The functions here have the names, argument order and in-place semantics of
``torch.distributed``.  Write the per-rank program as a function and start it with
:func:`launch`::

    from labs import dist
    import torch

    def program():
        x = torch.full((4,), float(dist.get_rank()))
        dist.all_reduce(x)                      # in place: every rank now holds 0+1+2+3
        return x

    dist.launch(program, 4)                     # -> [tensor([6., 6., 6., 6.])] * 4
    dist.last_trace().bytes_sent()              # what each rank sent (see labs.dist.trace)

Two ways to run the same program:

* **Emulated** (a plain ``python`` process or a notebook): ``launch(fn, world_size)`` runs
  ``fn`` once per rank, each on its own thread, and returns the list of return values
  (index = rank).  Every call is recorded in a :class:`~labs.dist.trace.Trace`; a deadlock is
  reported at once, naming what each rank waits for.
* **Under torchrun** (``RANK`` and ``WORLD_SIZE`` in the environment): ``launch`` initialises
  ``torch.distributed`` (NCCL when CUDA is available, gloo otherwise) unless it is already
  initialised, runs ``fn`` once for this process's rank, destroys the process group it created,
  and returns a list of length ``world_size`` that holds ``fn``'s return value at index
  ``RANK`` and ``None`` everywhere else (the other ranks' values live in the other processes).
  Every ``labs.dist`` call then delegates to ``torch.distributed``.

Both accept torch tensors and numpy arrays (results are written into the array you pass), the
``group=`` argument (a group from :func:`new_group`) and ``async_op=True`` (returns a
:class:`Work` whose ``wait()`` completes the operation).  Peer ranks (``src``, ``dst``) are
global ranks as in torch; ``group_src`` / ``group_dst`` give a rank within the group instead.

Ordinary ``torch.distributed`` programs run unchanged on emulated ranks with
``python -m labs.dist.run --nproc_per_node 4 script.py`` (:mod:`labs.dist.run`).  On an
emulated rank, ``init_process_group("gloo")`` (or ``"nccl"``) gives the rank a real
``torch.distributed`` process group whose collectives run on the emulator
(:mod:`labs.dist.backend`), so PyTorch's own ``DistributedDataParallel``, FSDP2
(``fully_shard``), ``DeviceMesh`` / DTensor, functional collectives and
``torch.distributed.checkpoint`` work there, traced like every other call.  Process-group set-up,
subgroups are in :mod:`labs.dist.compat`; ``P2POp`` / ``batch_isend_irecv``,
``all_to_all_single`` with uneven splits and the object collectives of ``labs.dist`` itself in
:mod:`labs.dist.compat_ops`.  Every rank has its own torch, numpy and ``random``
state, as separate processes have (``labs/dist/_rng.py``): seed it inside the rank's program.

Emulator semantics worth knowing: ``send`` / ``isend`` copy the tensor and return at once
(buffered, like a small NCCL or MPI message); ``recv`` blocks until the matching message
arrived; messages between two ranks with the same tag arrive in order; ``recv(src=None)`` takes
the oldest message from any rank.  Collectives complete when the last member of the group
arrives.  Ranks are threads that take turns: one rank at a time runs its own code (so that
each has its own random state), and every call costs some tens of microseconds of thread switching whatever the tensor size
(``benchmarks/bench_allreduce.py`` measures it; ``_sched.py`` explains how the ranks are
scheduled).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _emulator as _emu
from . import _launch, _p2p, alpha_beta, compat, compat_ops, trace
from . import _torchrun as _tr
from ._api import (
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all,
    barrier,
    broadcast,
    gather,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    region,
    scatter,
    send,
)
from ._common import ReduceOp, Work
from ._emulator import (
    CollectiveMismatchError,
    DeadlockError,
    DistError,
    DistTimeoutError,
    Group,
)
from ._torchrun import torchrun_backend
from .compat import (
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    group,
    init_process_group,
    is_available,
    monitored_barrier,
    new_subgroups,
    new_subgroups_by_enumeration,
)
from .compat_ops import (
    P2POp,
    all_gather_object,
    all_gather_single,
    all_to_all_single,
    batch_isend_irecv,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    reduce_scatter_single,
    scatter_object_list,
    send_object_list,
)
from .trace import Record, Trace

__all__ = [
    "ReduceOp",
    "Work",
    "Group",
    "DistError",
    "DeadlockError",
    "CollectiveMismatchError",
    "DistTimeoutError",
    "Trace",
    "Record",
    "launch",
    "last_trace",
    "is_emulated",
    "torchrun_backend",
    "is_initialized",
    "get_rank",
    "get_world_size",
    "new_group",
    "send",
    "recv",
    "isend",
    "irecv",
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "barrier",
    "region",
    "trace",
    "alpha_beta",
    "compat",
    "compat_ops",
    "init_process_group",
    "destroy_process_group",
    "is_available",
    "get_backend",
    "group",
    "get_process_group_ranks",
    "get_global_rank",
    "get_group_rank",
    "monitored_barrier",
    "new_subgroups",
    "new_subgroups_by_enumeration",
    "P2POp",
    "batch_isend_irecv",
    "all_to_all_single",
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "scatter_object_list",
    "send_object_list",
    "recv_object_list",
    "all_gather_single",
    "reduce_scatter_single",
]

DEFAULT_TIMEOUT = 60.0


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = DEFAULT_TIMEOUT,
    per_rank_rng: bool = True,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(*args, **kwargs)`` once per rank; return the per-rank results (index = rank).

    Args:
        fn: the per-rank program; it finds its rank with :func:`get_rank`.
        world_size: number of ranks (>= 1).
        *args, **kwargs: passed to ``fn`` unchanged, the same for every rank.
        timeout: keyword-only, seconds.  Emulated: the whole run must finish within it, else
            :class:`DistTimeoutError` says what each rank was doing (deadlocks are reported at
            once, without waiting).  Under torchrun: the collective timeout of the process group.
            ``launch`` consumes ``timeout=``; if ``fn`` itself takes an argument named
            ``timeout``, bind it first (``functools.partial(fn, timeout=...)``).
        per_rank_rng: keyword-only.  Emulated: every rank has its own torch, numpy and
            ``random`` state, as separate processes have.  As under torchrun the ranks start
            from different seeds (an unseeded ``nn.Linear`` differs between ranks), derived
            from the caller's ``torch.initial_seed()`` and the rank, so a seeded notebook
            repeats its numbers; ``torch.manual_seed(rank)`` gives the numbers it gives under
            torchrun.  The ranks
            run user code one at a time, swapping the states at every switch (a few
            microseconds each, see ``labs/dist/_rng.py``).  ``False``: the ranks share the
            caller's generators and run side by side (the numbers then depend on thread
            timing).  Under torchrun: ignored (processes have their own).

    Returns:
        Emulated: ``[fn's value on rank 0, ..., on rank world_size-1]``.  Under torchrun: a
        list of length ``world_size`` with this process's value at index ``RANK`` and ``None``
        elsewhere.

    Raises:
        DeadlockError: every live rank waits for something no rank can provide.
        CollectiveMismatchError: ranks called different collectives, shapes or dtypes.
        DistTimeoutError: the run exceeded ``timeout``.
        Exception: an exception raised in a rank stops every rank and is re-raised here as the
            same type, its message prefixed with ``rank R failed:`` and the original chained as
            ``__cause__`` (so its traceback shows where in ``fn`` it happened).
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"launch: world_size must be an int >= 1, got {world_size!r}")
    if not callable(fn):
        raise TypeError(f"launch: fn must be callable, got {type(fn).__name__}")
    if _emu.current() is not None:
        raise RuntimeError("launch: called from inside an emulated rank; launch cannot nest")
    if _tr.env_rank() is not None:
        return _tr.launch(fn, world_size, args, kwargs, timeout)
    results, _ = _launch.run(fn, world_size, args, kwargs, timeout, per_rank_rng)
    return results


def last_trace() -> Trace:
    """The :class:`Trace` of the most recent emulated :func:`launch` (also one that failed)."""
    if _emu.LAST_TRACE is None:
        raise RuntimeError("last_trace: no emulated launch has run yet")
    return _emu.LAST_TRACE


def is_emulated() -> bool:
    """True when called from a rank started by an emulated :func:`launch`."""
    return _emu.current() is not None


def is_initialized() -> bool:
    """True inside an emulated rank or once ``torch.distributed`` is initialised."""
    import torch.distributed as tdist

    return _emu.current() is not None or tdist.is_initialized()


def get_rank(group: Any = None) -> int:
    """This rank's index in ``group`` (the world by default); -1 if not a member."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.get_rank(group)
    if group is None:
        return ctx.rank
    group = getattr(group, "_labs_group", group)  # a torch group of labs.dist.backend
    return group.index.get(ctx.rank, -1) if hasattr(group, "index") else -1


def get_world_size(group: Any = None) -> int:
    """Number of ranks in ``group`` (the world by default); -1 if the caller is not a member."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.get_world_size(group)
    if group is None:
        return ctx.world.size
    group = getattr(group, "_labs_group", group)  # a torch group of labs.dist.backend
    return group.size() if ctx.rank in getattr(group, "index", ()) else -1


def new_group(ranks: list[int] | None = None, **kwargs: Any) -> Any:
    """A group of the given global ranks (all ranks when None).

    As in torch, every rank must call ``new_group`` with the same ranks in the same order, also
    ranks that are not members.  Emulated, after ``init_process_group``: a torch process group of
    the emulated backend (:mod:`labs.dist.backend`), else a :class:`Group`; extra torch keyword
    arguments (``backend``, ``timeout``) go to torch, or are ignored by the emulator.
    """
    ctx = _emu.current()
    if ctx is None:
        return _tr.new_group(ranks)
    if ctx.c10d_world is not None and ctx.c10d_world.default_pg is not None:
        # torch's default group exists on this rank: a torch group (of labs.dist.backend),
        # which PyTorch's own modules (DDP, DeviceMesh) accept
        from torch.distributed import distributed_c10d

        return distributed_c10d.new_group(ranks, **kwargs)
    return _p2p.new_group(ctx, ranks)
