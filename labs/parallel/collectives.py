"""Collective algorithms built from point-to-point messages (Chapter 12).

Each function runs on every rank of a group (the world by default), works in place on a
contiguous tensor or numpy array ``x`` and uses only ``labs.dist`` point-to-point calls -- so
the trace shows exactly what the algorithm sends, and the same code runs under torchrun.

Per rank, for a tensor of n bytes on p ranks (a = alpha, b = beta of the alpha-beta model):

* :func:`naive_broadcast` -- root sends p-1 messages, (p-1) n bytes; time (p-1)(a + n b);
* :func:`tree_broadcast` -- at most ceil(lg p) messages per rank; time ceil(lg p)(a + n b);
* :func:`ring_reduce_scatter`, :func:`ring_all_gather` -- p-1 messages, (p-1)/p n bytes;
  time (p-1) a + (p-1)/p n b;
* :func:`ring_all_reduce` -- 2(p-1) messages, 2(p-1)/p n bytes; time 2(p-1) a + 2(p-1)/p n b;
* :func:`recursive_doubling_all_reduce` -- lg p messages, n lg p bytes; time lg p (a + n b);
* :func:`rabenseifner_all_reduce` -- 2 lg p messages, 2(p-1)/p n bytes;
  time 2 lg p a + 2(p-1)/p n b;
* :func:`hierarchical_all_reduce` -- ring phases inside and across nodes;
* :func:`parameter_server_all_reduce` -- the server moves (p-1) n bytes each way.

Reductions are sums.
"""

from __future__ import annotations

from typing import Any

import torch

from labs import dist

__all__ = [
    "chunks",
    "naive_broadcast",
    "tree_broadcast",
    "ring_reduce_scatter",
    "ring_all_gather",
    "ring_all_reduce",
    "recursive_doubling_all_reduce",
    "rabenseifner_all_reduce",
    "hierarchical_all_reduce",
    "parameter_server_all_reduce",
]


def _flat(x: Any) -> torch.Tensor:
    """A 1-D torch view of ``x`` sharing its memory (numpy arrays included)."""
    t = torch.as_tensor(x)
    if not t.is_contiguous():
        raise ValueError(f"expected a contiguous buffer, got strides {t.stride()}")
    return t.view(-1)


def chunks(x: Any, p: int) -> list[torch.Tensor]:
    """``x`` (flattened) split into ``p`` contiguous views, sizes differing by at most 1."""
    return list(torch.tensor_split(_flat(x), p))


def _exchange(send: torch.Tensor, recv: torch.Tensor, peer_to: int, peer_from: int, group):
    """Send ``send`` to group rank ``peer_to`` while receiving ``recv`` from ``peer_from``."""
    work = dist.isend(send, group=group, group_dst=peer_to)
    dist.recv(recv, group=group, group_src=peer_from)
    work.wait()


def naive_broadcast(x: Any, src: int = 0, group: Any = None) -> None:
    """Group rank ``src`` sends the whole ``x`` to every other rank, one after another."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    t = _flat(x)
    if r == src:
        for d in range(p):
            if d != src:
                dist.send(t, group=group, group_dst=d)
    else:
        dist.recv(t, group=group, group_src=src)


def tree_broadcast(x: Any, src: int = 0, group: Any = None) -> None:
    """Binomial tree: in round k every rank that has the data sends it 2^k ranks further."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    t = _flat(x)
    v = (r - src) % p  # position relative to the root
    mask = 1
    while mask < p:
        if v < mask and v + mask < p:
            dist.send(t, group=group, group_dst=(v + mask + src) % p)
        elif mask <= v < 2 * mask:
            dist.recv(t, group=group, group_src=(v - mask + src) % p)
        mask <<= 1


def ring_reduce_scatter(x: Any, group: Any = None) -> int:
    """Ring reduce-scatter in p-1 steps; afterwards chunk ``r`` of ``x`` on rank r is the sum
    over ranks (other chunks hold partial sums).  Returns r, the index of the chunk owned."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    cs = chunks(x, p)
    buf = torch.empty_like(cs[0])
    for s in range(p - 1):
        out, inc = (r - s - 1) % p, (r - s - 2) % p
        b = buf[: cs[inc].numel()]
        _exchange(cs[out], b, (r + 1) % p, (r - 1) % p, group)
        cs[inc] += b
    return r


def ring_all_gather(x: Any, group: Any = None) -> None:
    """Ring all-gather in p-1 steps: rank r starts with chunk r of ``x``; all end with all."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    cs = chunks(x, p)
    for s in range(p - 1):
        out, inc = (r - s) % p, (r - s - 1) % p
        _exchange(cs[out], cs[inc], (r + 1) % p, (r - 1) % p, group)


def ring_all_reduce(x: Any, group: Any = None) -> None:
    """Sum ``x`` over the group: ring reduce-scatter then ring all-gather, 2(p-1) steps."""
    ring_reduce_scatter(x, group)
    ring_all_gather(x, group)


def _check_power_of_two(p: int, name: str) -> None:
    if p & (p - 1):
        raise ValueError(
            f"{name} needs a power-of-two number of ranks, got {p}; fold the extra ranks into "
            "partners first, or use ring_all_reduce"
        )


def recursive_doubling_all_reduce(x: Any, group: Any = None) -> None:
    """Butterfly: in round k, rank r swaps its whole vector with rank r XOR 2^k and adds."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    _check_power_of_two(p, "recursive_doubling_all_reduce")
    t = _flat(x)
    buf = torch.empty_like(t)
    d = 1
    while d < p:
        _exchange(t, buf, r ^ d, r ^ d, group)
        t += buf
        d <<= 1


def rabenseifner_all_reduce(x: Any, group: Any = None) -> None:
    """Recursive-halving reduce-scatter then recursive-doubling all-gather (Rabenseifner).

    Round k of the first phase swaps half of the current range with rank r XOR p/2^(k+1), so the
    messages halve: n/2, n/4, ..., n/p; the second phase retraces the steps in reverse.
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    _check_power_of_two(p, "rabenseifner_all_reduce")
    cs = chunks(x, p)
    lo, hi = 0, p  # the range of chunks this rank is responsible for
    history = []
    d = p // 2
    while d >= 1:
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if r & d == 0 else ((mid, hi), (lo, mid))
        send = torch.cat(cs[give[0] : give[1]])
        mine = torch.cat(cs[keep[0] : keep[1]])
        got = torch.empty_like(mine)
        _exchange(send, got, r ^ d, r ^ d, group)
        mine += got
        _scatter_into(cs[keep[0] : keep[1]], mine)
        history.append((d, keep, give))
        lo, hi = keep
        d //= 2
    for d, keep, give in reversed(history):
        send = torch.cat(cs[keep[0] : keep[1]])
        got = torch.empty(sum(c.numel() for c in cs[give[0] : give[1]]), dtype=send.dtype)
        _exchange(send, got, r ^ d, r ^ d, group)
        _scatter_into(cs[give[0] : give[1]], got)


def _scatter_into(views: list[torch.Tensor], flat: torch.Tensor) -> None:
    """Copy consecutive pieces of ``flat`` into ``views``."""
    k = 0
    for v in views:
        v.copy_(flat[k : k + v.numel()])
        k += v.numel()


def hierarchical_all_reduce(x: Any, local_group: Any, cross_group: Any) -> None:
    """Two-level all-reduce for ranks laid out as nodes x GPUs per node.

    1. ring reduce-scatter inside the node (``local_group``): local rank j owns chunk j;
    2. ring all-reduce of chunk j across nodes (``cross_group``: the ranks with local rank j);
    3. ring all-gather inside the node.
    Only 1/(GPUs per node) of the data crosses the slow inter-node links.
    """
    j = ring_reduce_scatter(x, local_group)
    own = chunks(x, dist.get_world_size(local_group))[j]
    ring_all_reduce(own, cross_group)
    ring_all_gather(x, local_group)


def parameter_server_all_reduce(x: Any, server: int = 0, group: Any = None) -> None:
    """Every worker pushes ``x`` to the ``server`` rank, which sums and sends the sum back.

    The server's link carries (p-1) n bytes in each direction: the bottleneck that ring
    all-reduce removes.  (Here the server is also a worker and adds its own ``x``.)
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    t = _flat(x)
    if r == server:
        buf = torch.empty_like(t)
        for w in range(p):
            if w != server:
                dist.recv(buf, group=group, group_src=w)
                t += buf
        works = [dist.isend(t, group=group, group_dst=w) for w in range(p) if w != server]
        for work in works:
            work.wait()
    else:
        dist.send(t, group=group, group_dst=server)
        dist.recv(t, group=group, group_src=server)
