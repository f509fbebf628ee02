"""The rest of the ``torch.distributed`` API, so that ordinary programs run on emulated ranks:
process groups.

Process-group set-up (``init_process_group``, ``destroy_process_group``, ``is_available``,
``get_backend``, ``group.WORLD``), group queries and subgroups (``get_process_group_ranks``,
``get_global_rank``, ``get_group_rank``, ``new_subgroups``, ``new_subgroups_by_enumeration``) and
``monitored_barrier``; batched point-to-point, ``all_to_all_single`` and the object collectives
are in :mod:`labs.dist.compat_ops`.  Each function has torch's name, arguments and semantics.
On an emulated rank it runs on the emulator until ``init_process_group`` has made torch's
default group, and from then on it is torch's own function (which reaches the rank's groups of
the emulated backend); outside emulated ranks it is torch's.  ``python -m labs.dist.run`` uses
them to run an unmodified ``torch.distributed`` script on threads.
"""

from __future__ import annotations

from typing import Any

from torch.distributed import distributed_c10d as dc10d

from . import _emulator as _emu
from . import _ops, _torch_world

__all__ = [
    "init_process_group", "destroy_process_group", "is_available", "get_backend", "group",
    "get_process_group_ranks", "get_global_rank", "get_group_rank", "monitored_barrier",
    "new_subgroups", "new_subgroups_by_enumeration",
]  # fmt: skip


class group:  # noqa: N801 - torch's name
    """``group.WORLD``: the default group.  ``None`` means the world in every call, as in torch
    before ``init_process_group``."""

    WORLD = None


def is_available() -> bool:
    """True: the emulator is always there (torch's answer under torchrun)."""
    return True


def init_process_group(backend: Any = None, init_method: Any = None, timeout: Any = None,
                       world_size: int = -1, rank: int = -1, store: Any = None,
                       group_name: str = "", pg_options: Any = None,
                       device_id: Any = None) -> None:  # fmt: skip
    """Join the default process group.

    Emulated: the ranks already exist; ``rank`` and ``world_size`` (when given) must agree with
    them.  ``backend`` ``"gloo"`` (or None, or ``"cpu:gloo"``) and ``"nccl"`` (one notice: no
    GPUs here) create torch's default process group on the emulated backend
    (:mod:`labs.dist.backend`), so that PyTorch's own DDP, FSDP2 and DTensor work; the other
    arguments are ignored.
    """
    ctx = _emu.current()
    if ctx is None:
        dc10d.init_process_group(backend, init_method, timeout, world_size, rank, store,
                                 group_name, pg_options, device_id=device_id)  # fmt: skip
        return
    for name, given, actual in (("rank", rank, ctx.rank), ("world_size", world_size,
                                                           ctx.world.size)):  # fmt: skip
        if given not in (-1, None) and int(given) != actual:
            raise ValueError(
                f"rank {ctx.rank}: init_process_group: {name}={given} but this emulated rank has "
                f"{name} {actual}; leave {name} out or pass the launched value"
            )
    _torch_world.init_emulated(ctx, backend, timeout)
    ctx.initialized = True


def _torch_ready(ctx: Any) -> bool:
    """True when this emulated rank has torch's default process group (then torch's own
    functions answer, through the rank's tables: :mod:`labs.dist._torch_world`)."""
    return ctx.c10d_world is not None and ctx.c10d_world.default_pg is not None


def destroy_process_group(group: Any = None) -> None:
    """Destroy ``group``, or every group and the default one when None (torch's semantics)."""
    ctx = _emu.current()
    if ctx is None or _torch_ready(ctx):
        dc10d.destroy_process_group(group)
    if ctx is not None and group is None:
        ctx.initialized = False


def get_backend(group: Any = None) -> str:
    """``"gloo"``: emulated ranks run gloo's collectives on CPU tensors (torch's own answer once
    ``init_process_group`` made the group, :mod:`labs.dist.backend`).  A rank outside ``group``
    gets torch's ``ValueError``."""
    ctx = _emu.current()
    if ctx is None or _torch_ready(ctx):
        return dc10d.get_backend(group)
    if group is not None and ctx.rank not in getattr(group, "index", {}):
        raise ValueError("Invalid process group specified")
    return "gloo"


def get_process_group_ranks(group: Any) -> list[int]:
    """Global ranks of ``group`` in group-rank order."""
    ctx = _emu.current()
    if ctx is None or (_torch_ready(ctx) and group is None):
        return dc10d.get_process_group_ranks(group)
    if group is None:
        return list(range(ctx.world.size))
    labs_group = getattr(group, "_labs_group", group)
    if not hasattr(labs_group, "ranks"):  # GroupMember.NON_GROUP_MEMBER, a foreign group
        return dc10d.get_process_group_ranks(group)
    return list(labs_group.ranks)


def get_global_rank(group: Any, group_rank: int) -> int:
    """Global rank of group rank ``group_rank`` of ``group``."""
    ctx = _emu.current()
    if ctx is None or (_torch_ready(ctx) and group is not None):
        return dc10d.get_global_rank(group, group_rank)
    ranks = get_process_group_ranks(group)
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {ranks}")
    return ranks[group_rank]


def get_group_rank(group: Any, global_rank: int) -> int:
    """Rank of ``global_rank`` within ``group``."""
    ctx = _emu.current()
    if ctx is None or (_torch_ready(ctx) and group is not None):
        return dc10d.get_group_rank(group, global_rank)
    ranks = get_process_group_ranks(group)
    if global_rank not in ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {ranks}")
    return ranks.index(global_rank)


def monitored_barrier(group: Any = None, timeout: Any = None, wait_all_ranks: bool = False):
    """A barrier that names the ranks that did not arrive within ``timeout`` (gloo's
    ``RuntimeError`` on group rank 0; the others raise too); a rank outside ``group`` warns and
    returns.  Emulated, ranks that can never arrive are known at once: no waiting."""
    ctx = _emu.current()
    if ctx is None or _torch_ready(ctx):
        return dc10d.monitored_barrier(group, timeout, wait_all_ranks)
    return _ops.monitored_barrier(ctx, group, timeout, wait_all_ranks)


def new_subgroups(group_size: int | None = None, group: Any = None, timeout: Any = None,
                  backend: Any = None, pg_options: Any = None, group_desc: Any = None):  # fmt: skip
    """Split ``group`` (the world by default) into consecutive groups of ``group_size`` ranks;
    returns ``(this rank's subgroup, all subgroups)``, with torch's checks and messages."""
    ctx = _emu.current()
    if ctx is None or _torch_ready(ctx):
        return dc10d.new_subgroups(group_size, group, timeout, backend, pg_options, group_desc)
    if group_size is None:
        raise ValueError(
            "Default group size only takes effect when CUDA is available.If your subgroup using "
            "a backend that does not depend on CUDA,please pass in 'group_size' correctly."
        )
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    ranks = get_process_group_ranks(group)
    if len(ranks) < group_size:
        raise ValueError(
            f"The arg 'group_size' ({group_size}) must not exceed the world size ({len(ranks)})"
        )
    if len(ranks) % group_size:
        raise ValueError(f"The world size ({len(ranks)}) must be divisible by '{group_size=}'")
    lists = [ranks[i : i + group_size] for i in range(0, len(ranks), group_size)]
    return new_subgroups_by_enumeration(lists, timeout, backend, pg_options, group_desc)


def new_subgroups_by_enumeration(ranks_per_subgroup_list: list[list[int]], timeout: Any = None,
                                 backend: Any = None, pg_options: Any = None,
                                 group_desc: Any = None):  # fmt: skip
    """One group per list of ranks (disjoint); returns ``(this rank's subgroup or None, all)``,
    with torch's checks and messages."""
    from . import new_group

    ctx = _emu.current()
    if ctx is None or _torch_ready(ctx):
        return dc10d.new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout, backend,
                                                  pg_options, group_desc)  # fmt: skip
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    subgroups, mine, owner = [], None, {}
    for ranks in ranks_per_subgroup_list:
        subgroups.append(new_group(ranks))
        for r in ranks:
            if r in owner:
                raise ValueError(f"Rank {r} has appeared in both subgroup {owner[r]} and {ranks}")
            owner[r] = ranks
            if r == ctx.rank:
                mine = subgroups[-1]
    return mine, subgroups
