"""Point-to-point operations, groups and argument checks on emulated ranks."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ._common import PeerError, Work, as_tensor, need_contiguous, shape_dtype
from ._emulator import Group, _Msg
from ._rank import RankContext


# -- argument checks ------------------------------------------------------------------------
class NotMember(Exception):
    """Raised by :func:`resolve_group` when the caller is not in the group; see
    :func:`members_only`."""


# torch's rule for a rank outside the group: warn and do nothing (recv returns -1), as torch
# does.  Set it to False to make such a call raise instead, which finds the bug at once.
TORCH_NON_MEMBER = True


def members_only(fn: Callable) -> Callable:
    """An operation on a group the calling rank does not belong to warns and returns None
    (``recv``: -1), as in torch; with :data:`TORCH_NON_MEMBER` False it raises ``ValueError``."""

    @functools.wraps(fn)
    def wrapper(ctx: RankContext, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(ctx, *args, **kwargs)
        except NotMember as err:
            if not TORCH_NON_MEMBER:
                raise ValueError(
                    f"rank {ctx.rank}: {err.args[0]}: this rank is not a member of "
                    f"{err.args[1]}; only its members may call collectives on it (torch would "
                    "warn and do nothing)"
                ) from None
            warnings.warn(
                f"Running {err.args[0]} on global rank {ctx.rank} which does not belong to the "
                "given group.",
                UserWarning,
                stacklevel=3,
            )
            return -1 if fn.__name__ == "recv" else None

    return wrapper


def resolve_group(ctx: RankContext, group: Any, fn: str) -> Group:
    """The :class:`Group` to use (the world when ``group`` is None); the caller must belong."""
    w = ctx.world
    if group is None:
        group = w.world_group
    group = getattr(group, "_labs_group", group)  # a torch process group of labs.dist.backend
    if not isinstance(group, Group):
        raise TypeError(
            f"rank {ctx.rank}: {fn}: group must come from labs.dist.new_group or "
            f"torch.distributed.new_group, got {type(group).__name__}"
        )
    if (group is not w.world_group and w.pg_groups.get(group.gid[1:]) is not group
            if isinstance(group.gid, tuple) else
            group is not w.world_group and w.groups.get(group.gid - 1) is not group):  # fmt: skip
        raise ValueError(f"rank {ctx.rank}: {fn}: {group} was made by a different launch")
    if ctx.rank not in group.index:
        raise NotMember(fn, group)
    if group.gid in w.broken:
        raise RuntimeError(f"rank {ctx.rank}: {fn}: {w.broken[group.gid]}")
    return group


def resolve_peer(ctx: RankContext, g: Group, peer: Any, group_peer: Any, fn: str, name: str) -> int:
    """Global rank of the peer given as ``peer`` (global) or ``group_<name>`` (group rank)."""
    if (peer is None) == (group_peer is None):
        raise ValueError(
            f"rank {ctx.rank}: {fn}: give exactly one of {name}= (a global rank) and "
            f"group_{name}= (a rank within the group); got {name}={peer}, group_{name}={group_peer}"
        )
    if group_peer is not None:
        if not isinstance(group_peer, int) or not 0 <= group_peer < g.size():
            raise PeerError(
                f"rank {ctx.rank}: {fn}: group_{name} must be in [0, {g.size() - 1}] for {g}, "
                f"got {group_peer!r}"
            )
        return g.ranks[group_peer]
    n = ctx.world.size
    if isinstance(peer, bool) or not isinstance(peer, int) or not 0 <= peer < n:
        raise PeerError(
            f"rank {ctx.rank}: {fn}: {name} must be a rank in [0, {n - 1}] (world size {n}), "
            f"got {peer!r}"
        )
    if peer not in g.index:
        raise ValueError(
            f"rank {ctx.rank}: {fn}: {name}={peer} is not a member of {g}; {name} is a global rank"
        )
    return peer


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


# -- point to point -------------------------------------------------------------------------
@members_only
def send(ctx, tensor, dst, group, tag, group_dst, op="send") -> int:
    t0 = ctx.now()
    g = resolve_group(ctx, group, op)
    d = resolve_peer(ctx, g, dst, group_dst, op, "dst")
    if d == ctx.rank:
        raise ValueError(
            f"rank {ctx.rank}: {op}: dst={d} is this rank; a rank cannot send to itself"
        )
    t = as_tensor(tensor, ctx.rank, op)
    need_contiguous(t, ctx.rank, op, "input tensor has to be contiguous")  # gloo's check
    nb = nbytes(t)
    msg_id = ctx.post_send(t.clone(), d, tag)
    ctx.record(op, (d,), nb, 0, t0, g.ranks, "p2p", nb, msg_id)
    return msg_id


@members_only
def isend(ctx, tensor, dst, group, tag, group_dst) -> Work:
    send(ctx, tensor, dst, group, tag, group_dst, op="isend")
    return Work()


def _deliver(ctx: RankContext, t: torch.Tensor, msg: _Msg, op: str, t0: float, g: Group) -> int:
    data = msg.data
    if data.numel() != t.numel() or data.dtype != t.dtype:
        raise ValueError(
            f"rank {ctx.rank}: {op}: the message from rank {msg.src} holds "
            f"{shape_dtype(data)} but the receive buffer is {shape_dtype(t)}; sender and receiver "
            "must agree on the number of elements and the dtype"
        )
    t.copy_(data.view(t.shape))
    nb = nbytes(t)
    ctx.record(op, (msg.src,), 0, nb, t0, g.ranks, "p2p", nb, msg.msg_id)
    return msg.src


def _recv_setup(ctx, tensor, src, group, tag, group_src, op):
    g = resolve_group(ctx, group, op)
    t = as_tensor(tensor, ctx.rank, op)
    need_contiguous(t, ctx.rank, op, "input tensor has to be contiguous")  # gloo's check
    if src is None and group_src is None:
        return g, t, None
    s = resolve_peer(ctx, g, src, group_src, op, "src")
    if s == ctx.rank:
        raise ValueError(
            f"rank {ctx.rank}: {op}: src={s} is this rank; a rank cannot receive from itself"
        )
    return g, t, s


@members_only
def recv(ctx, tensor, src, group, tag, group_src) -> int:
    t0 = ctx.now()
    g, t, s = _recv_setup(ctx, tensor, src, group, tag, group_src, "recv")
    if s is None:
        msg = ctx.take_any(tag, f"recv(src=any, tag={tag}) into {shape_dtype(t)}", g)
    else:
        ch, seq = ctx.reserve_recv(s, tag)
        msg = ctx.take(ch, seq, f"recv(src={s}, tag={tag}) into {shape_dtype(t)}", g)
    return _deliver(ctx, t, msg, "recv", t0, g)


@members_only
def irecv(ctx, tensor, src, group, tag, group_src) -> Work:
    t0 = ctx.now()
    g, t, s = _recv_setup(ctx, tensor, src, group, tag, group_src, "irecv")
    if s is None:  # any source: the message is chosen when wait() is called
        what = f"irecv(src=any, tag={tag}).wait() into {shape_dtype(t)}"
        return Work(lambda: _deliver(ctx, t, ctx.take_any(tag, what, g), "irecv", t0, g))
    ch, seq = ctx.reserve_recv(s, tag)
    what = f"irecv(src={s}, tag={tag}).wait() into {shape_dtype(t)}"
    return Work(lambda: _deliver(ctx, t, ctx.take(ch, seq, what, g), "irecv", t0, g))


def new_group(ctx, ranks) -> Group:
    n = ctx.world.size
    if ranks is None:
        ranks = list(range(n))
    try:
        ranks = [int(r) for r in ranks]
    except (TypeError, ValueError):
        raise ValueError(
            f"rank {ctx.rank}: new_group: ranks must be a list of ints, got {ranks!r}"
        ) from None
    bad = [r for r in ranks if not 0 <= r < n]
    if bad or len(set(ranks)) != len(ranks) or not ranks:
        raise ValueError(
            f"rank {ctx.rank}: new_group: ranks must be distinct ranks in [0, {n - 1}], got {ranks}"
        )
    return ctx.new_group(sorted(ranks))
