"""torch.distributed's process-group tables, one set per emulated rank (for :mod:`.backend`).

Three pieces make torch's process-group machinery work on threads of one process:

* torch keeps its process groups in one module global (``distributed_c10d._world``); while
  ranks run, :func:`installed` replaces it with :class:`_WorldByRank`, which hands each rank
  its own :class:`_RankWorld` (a rank's ``dist.get_rank()`` is its own);
* the C++ registry that maps group names to groups (used by functional collectives) is made
  per thread (``_set_thread_isolation_mode``);
* the rest of torch's process-wide state that ranks would otherwise share (DTensor's op
  handlers, the checkpoint executors, the profiler) is handled in :mod:`._torch_shared`;
* :func:`init_emulated` creates the rank's default group on the ``"emulated"`` backend
  (registered by :func:`register`; its constructor :func:`_create` maps torch's group ranks
  onto an emulator :class:`~labs.dist._emulator.Group`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import torch.distributed as tdist
from torch._C import _distributed_c10d as c10d
from torch.distributed import distributed_c10d as dc10d

from . import _emulator as _emu
from . import _torch_shared
from ._emulator import Group
from .backend import BACKEND, EmulatedProcessGroup

__all__ = ["installed", "register", "init_emulated"]


class _RankWorld(dc10d._World):
    """torch's ``_World`` whose tables belong to one emulated rank (torch's own keeps them in
    module globals, shared by every thread)."""

    def __init__(self) -> None:
        super().__init__()
        self._tables: dict[str, dict] = {
            k: {}
            for k in (
                "pg_map",
                "pg_names",
                "pg_group_ranks",
                "pg_backend_config",
                "tags_to_pg",
                "pg_to_tag",
            )  # fmt: skip
        }
        self._count = 0

    pg_map = property(lambda self: self._tables["pg_map"])
    pg_names = property(lambda self: self._tables["pg_names"])
    pg_group_ranks = property(lambda self: self._tables["pg_group_ranks"])
    pg_backend_config = property(lambda self: self._tables["pg_backend_config"])
    tags_to_pg = property(lambda self: self._tables["tags_to_pg"])
    pg_to_tag = property(lambda self: self._tables["pg_to_tag"])

    @property
    def group_count(self) -> int:
        return self._count

    @group_count.setter
    def group_count(self, value: int) -> None:
        self._count = value


_local = threading.local()


class _WorldByRank:
    """Stands in for ``distributed_c10d._world``: attribute access goes to the calling rank's
    :class:`_RankWorld` (made on first use), or to torch's own world outside emulated ranks."""

    def __init__(self, outside: Any):
        object.__setattr__(self, "_outside", outside)

    def _target(self) -> Any:
        try:  # torch reads _world several times per collective: the rank thread caches it
            return _local.world
        except AttributeError:
            pass
        ctx = _emu.current()
        if ctx is None:
            return self._outside
        w = ctx.c10d_world
        if w is None:
            w = ctx.c10d_world = _RankWorld()
        _local.world = w  # rank threads live for one launch, and so does this
        return w

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target(), name, value)


_install_lock = threading.Lock()
_install_depth = 0


def _init_anywhere(outside: Any):
    """``torch.distributed.init_process_group`` while ranks run: on an emulated rank, the
    emulated backend (:func:`labs.dist.compat.init_process_group`); elsewhere ``outside``."""

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> None:
        if _emu.current() is None:
            return outside(backend, *args, **kwargs)
        from .compat import init_process_group as emulated

        return emulated(backend, *args, **kwargs)

    init_process_group.__doc__ = outside.__doc__
    init_process_group.__wrapped_outside__ = outside  # type: ignore[attr-defined]
    return init_process_group


_ORIG_INIT = dc10d.init_process_group  # torch's own (init_emulated calls it)
_init_patched: list[Any] = []  # the modules whose init_process_group was replaced


def _patch_init() -> None:
    """Every loaded ``torch.distributed`` module's ``init_process_group`` (the package's, the
    ``distributed_c10d`` module's, and the names other modules imported, such as
    ``device_mesh``'s, which ``init_device_mesh`` calls when no group exists) goes to
    :func:`_init_anywhere`: on an emulated rank a real rendezvous would wait forever."""
    wrapped = _init_anywhere(_ORIG_INIT)
    for name, mod in list(sys.modules.items()):
        if (name == "torch.distributed" or name.startswith("torch.distributed.")) and getattr(
            mod, "init_process_group", None
        ) is _ORIG_INIT:
            mod.init_process_group = wrapped
            _init_patched.append(mod)


def _unpatch_init() -> None:
    while _init_patched:
        _init_patched.pop().init_process_group = _ORIG_INIT


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """While emulated ranks run: a torch world per rank, a group registry per thread, and
    ``torch.distributed.init_process_group`` that gives an emulated rank the emulated backend."""
    global _install_depth
    register()
    with _install_lock:
        _install_depth += 1
        if _install_depth == 1:
            saved = dc10d._world
            dc10d._world = _WorldByRank(saved)
            c10d._set_thread_isolation_mode(True)
            _patch_init()
            dc10d._new_process_group_helper = _helper_anywhere(dc10d._new_process_group_helper)
            _torch_shared.install()
    try:
        yield
    finally:
        with _install_lock:
            _install_depth -= 1
            if _install_depth == 0:
                _unpatch_init()
                helper = dc10d._new_process_group_helper
                dc10d._new_process_group_helper = helper.__wrapped_outside__
                _torch_shared.uninstall()
                c10d._set_thread_isolation_mode(False)
                dc10d._world = dc10d._world._outside


_registered = False


def register() -> None:
    """Register the ``"emulated"`` backend with ``torch.distributed`` (once per process)."""
    global _registered
    if not _registered:
        tdist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
        _registered = True


def _create(opts: Any, backend_options: Any) -> EmulatedProcessGroup:
    """The backend's constructor, called by ``init_process_group`` / ``new_group`` on one rank."""
    ctx = _emu.current()
    if ctx is None:
        raise RuntimeError(
            f"torch.distributed backend {BACKEND!r} runs only on emulated ranks (inside "
            "labs.dist.launch or python -m labs.dist.run); under torchrun use gloo or nccl"
        )
    ranks = list(opts.global_ranks_in_group) or list(range(ctx.world.size))
    if ranks == list(range(ctx.world.size)) and not opts.global_ranks_in_group:
        g = ctx.world.world_group  # the default group: the world of labs.dist
    else:
        g = _subgroup(ctx, ranks)
    if opts.timeout != dc10d.default_pg_timeout:  # chosen by the program: gloo's errors after it
        g.timeout = opts.timeout.total_seconds()
    return EmulatedProcessGroup(ctx, g)


def _subgroup(ctx: Any, ranks: list[int]) -> Group:
    """The emulator group of the k-th torch group this rank makes with these ranks (the members
    make their groups in the same order; non-members never call the backend)."""
    w = ctx.world
    key = tuple(ranks)
    with w.lock:
        k = ctx.pg_counts.get(key, 0)
        ctx.pg_counts[key] = k + 1
        g = w.pg_groups.get((key, k))
        if g is None:
            g = w.pg_groups[(key, k)] = Group(("pg", key, k), ranks)
        return g


def emu_group(group: Any) -> Any:
    """The emulator :class:`Group` behind a torch process group of this backend (else ``group``)."""
    return getattr(group, "_labs_group", group)


def init_emulated(ctx: Any, backend: Any, timeout: Any) -> None:
    """Create this emulated rank's torch default process group on the emulated backend.

    ``backend``: what the program asked for; gloo (or None, ``"cpu:gloo"``) and nccl (with a
    one-line notice) are mapped to ``"emulated"``; any other raises ``ValueError``.
    """
    check_backend(ctx, backend, "init_process_group")
    if dc10d._world.default_pg is not None:
        raise ValueError(
            f"rank {ctx.rank}: init_process_group: trying to initialize the default process "
            "group twice!"
        )
    with ctx.world.lock:
        if ctx.world.store is None:
            ctx.world.store = tdist.HashStore()
    kwargs = {} if timeout is None else {"timeout": timeout}
    _ORIG_INIT(BACKEND, store=ctx.world.store, rank=ctx.rank, world_size=ctx.world.size, **kwargs)


def check_backend(ctx: Any, backend: Any, fn: str) -> None:
    """Accept the backends that run on the emulated one: gloo (or None, ``"cpu:gloo"``) and
    nccl (with a one-line notice); any other raises ``ValueError``."""
    names = {part.rsplit(":", 1)[-1].strip().lower() for part in str(backend or "gloo").split(",")}
    if not names <= {"gloo", "nccl", "undefined", BACKEND}:
        raise ValueError(
            f"rank {ctx.rank}: {fn}: backend {backend!r} is not emulated; use "
            "'gloo' (or 'nccl', which runs as gloo on emulated CPU ranks)"
        )
    if "nccl" in names:
        notice_nccl(ctx.rank)


def _helper_anywhere(outside: Any):
    """torch's ``_new_process_group_helper`` (behind ``init_process_group`` and ``new_group``)
    while ranks run: on an emulated rank every group is made on the emulated backend (a real
    gloo group would block in C++ waiting for its peers, which are threads waiting for their
    turn), and registered as ``"gloo"``, whose collectives it runs: ``get_backend`` says
    ``"gloo"`` and torch's gloo-only functions (``monitored_barrier``) accept it."""

    def helper(group_size, group_rank, global_ranks_in_group, backend, *args, **kwargs):
        ctx = _emu.current()
        if ctx is None:
            return outside(group_size, group_rank, global_ranks_in_group, backend, *args, **kwargs)
        check_backend(ctx, backend, "new_group")
        pg, store = outside(group_size, group_rank, global_ranks_in_group, BACKEND, *args,
                            **kwargs)  # fmt: skip
        if isinstance(pg, EmulatedProcessGroup):  # it runs gloo's collectives: it says so
            dc10d._world.pg_map[pg] = (tdist.Backend("gloo"), store)
            dc10d._world.pg_backend_config[pg] = "cpu:gloo"
        return pg, store

    helper.__wrapped_outside__ = outside  # type: ignore[attr-defined]
    return helper


def notice_nccl(rank: int) -> None:
    """The one-line notice when a program asks for NCCL on emulated (CPU) ranks."""
    if rank == 0:
        where = "GPUs are not used by emulated ranks" if _has_cuda() else "no GPUs here"
        print(f"labs.dist: {where}; backend 'nccl' runs on the emulated backend (CPU tensors)",
              file=sys.stderr)  # fmt: skip


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()
