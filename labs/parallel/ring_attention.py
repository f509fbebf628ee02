"""Context parallelism: ring attention (Liu et al. 2023) on a group of ranks.

Each of the ``P`` ranks holds a shard of the sequence: its queries, keys and values.  The K/V
shards travel round a ring: at step ``i`` rank ``r`` attends its queries to the K/V shard of rank
``(r - i) mod P`` while it already sends that shard on to rank ``r + 1`` and receives the next one
from ``r - 1`` (send/recv overlapped with the compute).  The partial results are merged with the
online softmax of Chapter 11 (:func:`labs.attention.flash.online_softmax_update`), so after ``P`` steps
every rank holds exactly full attention for its queries, without ever holding all keys.

Layouts (:func:`shard_ranges`): ``"contiguous"`` gives rank ``r`` the ``r``-th slice of the
sequence; under a causal mask the last rank then does ``P`` times the work of the first.
``"zigzag"`` cuts the sequence into ``2P`` chunks and gives rank ``r`` chunks ``r`` and
``2P - 1 - r`` (an early and a late one), which balances the causal work.  Lengths need not be
divisible by ``P``: the first ranks (chunks) get one token more.

The backward pass is a second ring: K, V and their gradient accumulators travel together; each
rank adds the contribution of its queries, and after ``P`` shifts every ``dK``, ``dV`` is back on
its owner.  Probabilities are recomputed from the saved log-sum-exp, as in FlashAttention.
"""

from __future__ import annotations

import math

import torch

from labs import dist
from labs.attention.flash import online_softmax_update

__all__ = ["shard_ranges", "shard_index", "shard", "unshard", "ring_work", "ring_attention"]

LAYOUTS = ("contiguous", "zigzag")


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive ranges covering ``range(n)``, the first ``n % parts`` one longer."""
    base, extra = divmod(n, parts)
    out, at = [], 0
    for i in range(parts):
        size = base + (i < extra)
        out.append((at, at + size))
        at += size
    return out


def shard_ranges(seq_len: int, world: int, layout: str = "contiguous") -> list[list[tuple]]:
    """Per rank, the ``(start, end)`` token ranges it holds, in the order stored locally.

    >>> shard_ranges(8, 2, "zigzag")
    [[(0, 2), (6, 8)], [(2, 4), (4, 6)]]
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if world < 1 or seq_len < world * (2 if layout == "zigzag" else 1):
        raise ValueError(
            f"seq_len={seq_len} is too short for {world} ranks with layout {layout!r}: every rank "
            f"needs at least {2 if layout == 'zigzag' else 1} token(s) per chunk"
        )
    if layout == "contiguous":
        return [[r] for r in _split(seq_len, world)]
    chunks = _split(seq_len, 2 * world)
    return [[chunks[r], chunks[2 * world - 1 - r]] for r in range(world)]


def shard_index(seq_len: int, world: int, layout: str = "contiguous") -> list[torch.Tensor]:
    """Per rank, the global token positions it holds (int64), e.g. to slice a batch."""
    return [
        torch.cat([torch.arange(s, e) for s, e in ranges])
        for ranges in shard_ranges(seq_len, world, layout)
    ]


def shard(x: torch.Tensor, rank: int, world: int, layout: str = "contiguous", dim: int = 2):
    """Rank ``rank``'s part of the full tensor ``x`` along ``dim`` (a copy)."""
    idx = shard_index(x.shape[dim], world, layout)[rank]
    return x.index_select(dim, idx.to(x.device))


def unshard(parts: list[torch.Tensor], layout: str = "contiguous", dim: int = 2) -> torch.Tensor:
    """Reassemble the full tensor from every rank's part (inverse of :func:`shard`)."""
    n = sum(p.shape[dim] for p in parts)
    idx = torch.cat(shard_index(n, len(parts), layout))
    cat = torch.cat(list(parts), dim=dim)
    out = torch.empty_like(cat)
    out.index_copy_(dim, idx.to(cat.device), cat)
    return out


def _pairs(mine: list[tuple], theirs: list[tuple], causal: bool):
    """(local query rows, local key rows, needs a mask) of every chunk pair that is not fully
    masked; rows are slices into the locally stored shards."""
    q_at = 0
    for qs, qe in mine:
        k_at = 0
        for ks, ke in theirs:
            if not causal or ks <= qe - 1:  # some key is not after some query
                masked = causal and ke - 1 > qs
                yield slice(q_at, q_at + qe - qs), slice(k_at, k_at + ke - ks), masked, (qs, ks)
            k_at += ke - ks
        q_at += qe - qs


def ring_work(seq_len: int, world: int, layout: str = "contiguous", causal: bool = True):
    """Per rank, the number of query-key scores it computes in ring attention (chunk pairs that
    are entirely masked are skipped; a partly masked pair is computed whole)."""
    ranges = shard_ranges(seq_len, world, layout)
    return [
        sum((q.stop - q.start) * (k.stop - k.start) for j in range(world)
            for q, k, _, _ in _pairs(ranges[r], ranges[j], causal))
        for r in range(world)
    ]  # fmt: skip


def _block_scores(q, k, qpos, kpos, masked, scale):
    s = (q @ k.transpose(-1, -2)) * scale
    if masked:
        s = s.masked_fill(kpos[None, :] > qpos[:, None], float("-inf"))
    return s


def _shift(t: torch.Tensor, recv_shape, group, me: int, p: int):
    """Start sending ``t`` to the next rank of the ring and receiving a ``recv_shape`` tensor
    from the previous one; returns (receive buffer, works)."""
    buf = torch.empty(recv_shape, dtype=t.dtype, device=t.device)
    works = [
        dist.isend(t, group=group, group_dst=(me + 1) % p),
        dist.irecv(buf, group=group, group_src=(me - 1) % p),
    ]
    return buf, works


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, ranges, group, overlap):
        p, me = dist.get_world_size(group), dist.get_rank(group)
        scale = 1.0 / math.sqrt(q.shape[-1])
        acc_t = torch.float64 if q.dtype == torch.float64 else torch.float32
        b, h, n, dv = v.shape
        m = torch.full((b, h, n), float("-inf"), dtype=acc_t)
        l = torch.zeros(b, h, n, dtype=acc_t)
        acc = torch.zeros(b, h, n, dv, dtype=acc_t)
        qa = q.to(acc_t)
        kv = torch.stack([k.to(acc_t), v.to(acc_t)]).contiguous()  # (2, b, h, n_src, d)
        pos = [torch.cat([torch.arange(s, e) for s, e in rs]) for rs in ranges]
        for step in range(p):
            src = (me - step) % p
            works = []
            if step < p - 1:  # start passing the block on before computing with it
                n_next = pos[(me - step - 1) % p].numel()
                nxt, works = _shift(kv, (2, b, h, n_next, kv.shape[-1]), group, me, p)
                if not overlap:  # for comparison: finish the transfer before computing
                    for w in works:
                        w.wait()
            with dist.region("attention"):
                for qr, kr, masked, _ in _pairs(ranges[me], ranges[src], causal):
                    s = _block_scores(qa[:, :, qr], kv[0][:, :, kr], pos[me][qr], pos[src][kr],
                                      masked, scale)  # fmt: skip
                    m[:, :, qr], l[:, :, qr], acc[:, :, qr] = online_softmax_update(
                        m[:, :, qr], l[:, :, qr], acc[:, :, qr], s, kv[1][:, :, kr]
                    )
            for w in works:
                w.wait()
            if works:
                kv = nxt
        o = acc / l.unsqueeze(-1)
        lse = m + torch.log(l)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.ranges, ctx.group, ctx.scale = causal, ranges, group, scale
        return o.to(q.dtype)

    @staticmethod
    def backward(ctx, grad_o):
        q, k, v, o, lse = ctx.saved_tensors
        ranges, group, scale = ctx.ranges, ctx.group, ctx.scale
        p, me = dist.get_world_size(group), dist.get_rank(group)
        acc_t = o.dtype
        qa, ga = q.to(acc_t), grad_o.to(acc_t)
        d_rows = (ga * o).sum(-1)
        dq = torch.zeros_like(qa)
        # what travels: K, V and the gradients of K, V accumulated so far (4, b, h, n_src, d)
        zeros = torch.zeros(k.shape, dtype=acc_t)
        pack = torch.stack([k.to(acc_t), v.to(acc_t), zeros, zeros.clone()]).contiguous()
        pos = [torch.cat([torch.arange(s, e) for s, e in rs]) for rs in ranges]
        for step in range(p):
            src = (me - step) % p
            kb, vb, dkb, dvb = pack
            for qr, kr, masked, _ in _pairs(ranges[me], ranges[src], ctx.causal):
                s = _block_scores(qa[:, :, qr], kb[:, :, kr], pos[me][qr], pos[src][kr], masked,
                                  scale)  # fmt: skip
                pr = torch.exp(s - lse[:, :, qr].unsqueeze(-1))
                g = ga[:, :, qr]
                dvb[:, :, kr] += pr.transpose(-1, -2) @ g
                ds = pr * (g @ vb[:, :, kr].transpose(-1, -2) - d_rows[:, :, qr].unsqueeze(-1))
                dq[:, :, qr] += (ds @ kb[:, :, kr]) * scale
                dkb[:, :, kr] += (ds.transpose(-1, -2) @ qa[:, :, qr]) * scale
            if p == 1:
                break
            # shift on; at the last step only dK, dV travel (home to their owner)
            send = pack if step < p - 1 else pack[2:].contiguous()
            n_in = pos[(me - step - 1) % p].numel()
            shape = (send.shape[0], *pack.shape[1:3], n_in, pack.shape[-1])
            nxt, works = _shift(send, shape, group, me, p)
            for w in works:
                w.wait()
            pack = nxt  # after the last shift: only this rank's own dK, dV
        dk, dv = pack[-2], pack[-1]
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None


def ring_attention(q, k, v, causal: bool = False, layout: str = "contiguous",
                   seq_len: int | None = None, group=None, overlap: bool = True) -> torch.Tensor:  # fmt: skip
    """Attention of this rank's queries to the keys/values of all ranks of ``group``.

    Args:
        q, k, v: this rank's shard ``(batch, heads, n_local, head_dim)``, tokens in the order of
            :func:`shard_index` for ``layout``.
        causal: token ``i`` attends to tokens ``j <= i`` (global positions).
        layout: ``"contiguous"`` or ``"zigzag"`` (how the sequence was sharded).
        seq_len: total sequence length; by default inferred as ``n_local`` times the group size
            (pass it when the length is not divisible by the group size).
        group: the context-parallel group (the world by default).
        overlap: start each forward step's send/recv before its compute and wait after it
            (default); ``False`` waits first, to measure what the overlap saves
            (``benchmarks/bench_ring_attention.py``).  The backward pass sends the gradient
            accumulators after computing them, so it does not overlap either way.

    Returns:
        This rank's attention output ``(batch, heads, n_local, head_dim)``; differentiable
        (gradients of q, k, v equal those of full attention restricted to this shard).
    """
    p, me = dist.get_world_size(group), dist.get_rank(group)
    seq_len = q.shape[2] * p if seq_len is None else seq_len
    ranges = shard_ranges(seq_len, p, layout)
    n_me = sum(e - s for s, e in ranges[me])
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4 or t.shape[2] != n_me:
            raise ValueError(
                f"ring_attention: rank {me} holds {n_me} tokens of {seq_len} ({layout}, {p} "
                f"ranks), so {name} must be (batch, heads, {n_me}, head_dim); got "
                f"{tuple(t.shape)}"
            )
    return _RingAttention.apply(q, k, v, causal, ranges, group, overlap)
