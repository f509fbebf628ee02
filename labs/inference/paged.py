"""The paged KV cache of vLLM (Kwon et al., 2023): fixed-size blocks, a free list, block tables.

Instead of reserving ``max_len`` slots per sequence, the cache is a pool of ``num_blocks`` blocks of
``block_size`` tokens. A sequence owns a *block table* (the list of its blocks, in order); token
``p`` lives in block ``table[p // block_size]`` at offset ``p % block_size``. Blocks carry reference
counts so that sequences forked from one prompt (parallel sampling) share the prompt's blocks; the
first write into a shared block copies it (copy-on-write)::

    bm = BlockManager(num_blocks=64, block_size=16)
    bm.allocate("a", n_tokens=40)          # 3 blocks for the prompt
    bm.fork("a", "b")                      # "b" shares them (reference count 2)
    block, offset, copy = bm.append_slot("b")   # token 40 of "b": copies the shared last block
    bm.free("a")

:class:`PagedKVCache` adds the tensors (one pool per layer) and :func:`paged_attention` attends
through the block tables; :func:`static_waste` and :func:`paged_waste` measure the memory that
contiguous pre-allocation and paging leave unused.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import torch

from labs.inference.attention import causal_attention

__all__ = [
    "OutOfBlocks",
    "BlockManager",
    "PagedKVCache",
    "paged_attention",
    "static_waste",
    "paged_waste",
]


class OutOfBlocks(RuntimeError):
    """The pool has too few free blocks right now; free or preempt a sequence and retry."""


class BlockManager:
    """Bookkeeping of a paged KV cache: free list, reference counts, per-sequence block tables.

    Every method either succeeds or raises leaving the state unchanged.
    """

    def __init__(self, num_blocks: int, block_size: int):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(
                f"BlockManager: num_blocks and block_size must be >= 1, got {num_blocks}, "
                f"{block_size}"
            )
        self.num_blocks, self.block_size = num_blocks, block_size
        self.free_blocks: list[int] = list(range(num_blocks - 1, -1, -1))  # pop() gives 0, 1, ...
        self.ref_count = [0] * num_blocks
        self.tables: dict[Hashable, list[int]] = {}
        self.lengths: dict[Hashable, int] = {}

    @property
    def num_free(self) -> int:
        """Number of blocks on the free list."""
        return len(self.free_blocks)

    def blocks_for(self, n_tokens: int) -> int:
        """Blocks needed to hold ``n_tokens`` tokens: ``ceil(n_tokens / block_size)``."""
        return math.ceil(n_tokens / self.block_size)

    def can_allocate(self, n_tokens: int) -> bool:
        """Whether a new sequence of ``n_tokens`` tokens fits in the free blocks now."""
        return self.blocks_for(n_tokens) <= self.num_free

    def _take(self) -> int:
        block = self.free_blocks.pop()
        self.ref_count[block] = 1
        return block

    def _release(self, block: int) -> None:
        self.ref_count[block] -= 1
        if self.ref_count[block] == 0:
            self.free_blocks.append(block)

    def _check_new(self, seq_id: Hashable, n_tokens: int) -> int:
        """Blocks a new sequence of ``n_tokens`` needs; ``ValueError`` if it can never be given."""
        if seq_id in self.tables:
            raise ValueError(f"allocate: sequence {seq_id!r} already has blocks; free it first")
        if n_tokens < 1:
            raise ValueError(f"allocate: n_tokens must be >= 1, got {n_tokens}")
        need = self.blocks_for(n_tokens)
        if need > self.num_blocks:
            raise ValueError(
                f"allocate: {n_tokens} tokens need {need} blocks but the pool has only "
                f"{self.num_blocks} blocks of {self.block_size} tokens; it can never fit"
            )
        return need

    def allocate(self, seq_id: Hashable, n_tokens: int) -> list[int]:
        """Give a new sequence blocks for its first ``n_tokens`` tokens; returns its block table.

        Raises ``ValueError`` if ``seq_id`` exists, ``n_tokens < 1``, or the request is larger
        than the whole pool (it could never run); :class:`OutOfBlocks` if it does not fit *now*.
        """
        need = self._check_new(seq_id, n_tokens)
        if need > self.num_free:
            raise OutOfBlocks(f"allocate: need {need} blocks, {self.num_free} free")
        self.tables[seq_id] = [self._take() for _ in range(need)]
        self.lengths[seq_id] = n_tokens
        return list(self.tables[seq_id])

    def append_slot(self, seq_id: Hashable) -> tuple[int, int, tuple[int, int] | None]:
        """Reserve the slot of the sequence's next token.

        Returns ``(block, offset, copy)`` where ``copy`` is ``(src, dst)`` when a shared block was
        copied on write (the caller copies the tensor data), else None. Raises
        :class:`OutOfBlocks` (state unchanged) when a new block is needed and none is free.
        """
        table = self._table(seq_id)
        pos = self.lengths[seq_id]
        copy = None
        if pos % self.block_size == 0:  # the last block is full: start a new one
            if not self.free_blocks:
                raise OutOfBlocks(f"append_slot: sequence {seq_id!r} needs a block, none free")
            table.append(self._take())
        elif self.ref_count[table[-1]] > 1:  # shared partial block: copy on write
            if not self.free_blocks:
                raise OutOfBlocks(f"append_slot: sequence {seq_id!r} needs a copy, none free")
            src, dst = table[-1], self._take()
            self._release(src)
            table[-1] = dst
            copy = (src, dst)
        self.lengths[seq_id] = pos + 1
        return table[-1], pos % self.block_size, copy

    def fork(self, parent: Hashable, child: Hashable) -> None:
        """Let ``child`` share every block of ``parent`` (reference counts go up by one)."""
        table = self._table(parent)
        if child in self.tables:
            raise ValueError(f"fork: sequence {child!r} already exists")
        for block in table:
            self.ref_count[block] += 1
        self.tables[child] = list(table)
        self.lengths[child] = self.lengths[parent]

    def free(self, seq_id: Hashable) -> None:
        """Drop a sequence; blocks whose reference count reaches zero return to the free list."""
        for block in self._table(seq_id):
            self._release(block)
        del self.tables[seq_id], self.lengths[seq_id]

    def slot(self, seq_id: Hashable, pos: int) -> tuple[int, int]:
        """(block, offset) of token ``pos`` of a sequence."""
        if not 0 <= pos < self.lengths.get(seq_id, 0):
            raise IndexError(f"slot: position {pos} is outside sequence {seq_id!r}")
        return self.tables[seq_id][pos // self.block_size], pos % self.block_size

    def _table(self, seq_id: Hashable) -> list[int]:
        if seq_id not in self.tables:
            raise KeyError(f"unknown sequence {seq_id!r}; allocate it first")
        return self.tables[seq_id]

    def check(self) -> None:
        """Assert the invariants: no leak, no double free, reference counts match the tables."""
        counts = [0] * self.num_blocks
        for table in self.tables.values():
            for block in table:
                counts[block] += 1
        assert counts == self.ref_count, "reference counts differ from the block tables"
        assert len(set(self.free_blocks)) == len(self.free_blocks), "a block is freed twice"
        free = set(self.free_blocks)
        assert free == {b for b in range(self.num_blocks) if counts[b] == 0}, "leaked block"
        for seq_id, table in self.tables.items():
            assert len(table) == self.blocks_for(self.lengths[seq_id]), f"{seq_id!r} table size"


class PagedKVCache:
    """Key and value pools of shape (n_layer, num_blocks, block_size, H_kv, D) + a BlockManager.

    The pools are in ``dtype`` on ``device``; so are the block tables it hands to attention.
    """

    def __init__(self, n_layer, num_blocks, block_size, n_kv_heads, head_dim, dtype=torch.float32,
                 device=None):  # fmt: skip
        shape = (n_layer, num_blocks, block_size, n_kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.manager = BlockManager(num_blocks, block_size)

    def write(self, layer: int, blocks, offsets, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store N tokens' keys/values (N, H_kv, D) at slots ``(blocks[i], offsets[i])``."""
        self.k[layer, blocks, offsets] = k
        self.v[layer, blocks, offsets] = v

    def copy_block(self, src: int, dst: int) -> None:
        """Copy one block in every layer (the data half of copy-on-write)."""
        self.k[:, dst] = self.k[:, src]
        self.v[:, dst] = self.v[:, src]

    def block_tables(self, seq_ids: Sequence[Hashable]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded block tables (B, max_blocks) int64 and lengths (B,) of some sequences."""
        tables = [self.manager.tables[s] for s in seq_ids]
        width = max(len(t) for t in tables)
        padded = [t + [0] * (width - len(t)) for t in tables]
        lengths = [self.manager.lengths[s] for s in seq_ids]
        device = self.k.device
        return (torch.tensor(padded, dtype=torch.long, device=device),
                torch.tensor(lengths, dtype=torch.long, device=device))  # fmt: skip


def gather_kv(pool: torch.Tensor, block_tables: torch.Tensor) -> torch.Tensor:
    """(num_blocks, bs, H_kv, D) pool + (B, n) tables -> (B, H_kv, n * bs, D) keys in order."""
    b, n = block_tables.shape
    blocks = pool[block_tables]  # (B, n, bs, H_kv, D)
    return blocks.reshape(b, n * pool.shape[1], *pool.shape[2:]).transpose(1, 2)


def paged_attention(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    block_tables: torch.Tensor,
    lengths: torch.Tensor,
    q_start: torch.Tensor | int,
) -> torch.Tensor:
    """Causal attention whose keys and values are read through block tables.

    Args:
        q: queries (B, H, Tq, D) of tokens at positions ``q_start .. q_start + Tq - 1``.
        k_pool, v_pool: one layer's pools, (num_blocks, block_size, H_kv, D).
        block_tables: (B, max_blocks) int64, padded with any valid block id.
        lengths: (B,) number of cached tokens per sequence (including the new ones).
        q_start: (B,) or int, position of each sequence's first query.

    Returns:
        (B, H, Tq, D), equal to contiguous attention over each sequence's first ``lengths`` tokens.
    """
    k = gather_kv(k_pool, block_tables)
    v = gather_kv(v_pool, block_tables)
    return causal_attention(q, k, v, q_start=q_start, key_lengths=lengths)


def static_waste(lengths: Sequence[int], max_len: int) -> float:
    """Fraction of reserved KV slots left empty when every sequence reserves ``max_len`` slots."""
    if any(n > max_len for n in lengths):
        raise ValueError(f"static_waste: a length exceeds max_len={max_len}")
    return 1.0 - sum(lengths) / (len(lengths) * max_len)


def paged_waste(lengths: Sequence[int], block_size: int) -> float:
    """Fraction of slots left empty when each sequence holds ``ceil(length / block_size)`` blocks."""
    reserved = sum(math.ceil(n / block_size) * block_size for n in lengths)
    return 1.0 - sum(lengths) / reserved
