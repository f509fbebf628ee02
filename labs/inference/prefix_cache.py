"""Prefix caching on the paged KV cache: blocks found by the hash of everything before them.

Requests to one service share beginnings: a system prompt, few-shot examples, the earlier turns
of a chat. The keys and values of a token depend only on the tokens up to it, so a block that one
request filled can serve any later request whose tokens agree *up to the end of that block*.
vLLM's automatic prefix caching (and nano-vllm) find such blocks by a hash that chains the
previous block's hash with the block's own tokens::

    h_0 = hash((-1, *tokens[0:16]))        h_i = hash((h_{i-1}, *tokens[16 i : 16 (i + 1)]))

Equal hashes mean equal prefixes, not just equal blocks: the same 16 tokens after a different
prefix get another hash, as they must, because their keys and values differ. Only *full* blocks
are hashed; a partly filled block is still being written. The last token of a prompt is never
taken from the cache, because its forward pass is what produces the first output token. A
block becomes findable once its keys and values are written (``mark_computed``), not when it is
reserved, so a request never reads a block that another is still prefilling::

    bm = PrefixCachingBlockManager(num_blocks=64, block_size=16)
    bm.allocate("a", len(ids), token_ids=ids)    # nothing cached yet: a computes every token
    bm.mark_computed("a", len(ids))              # ... then a's full blocks become findable
    bm.allocate("b", len(ids2), token_ids=ids2)  # shares a's blocks as far as the prefixes agree
    bm.num_cached["b"]                           # prompt tokens whose KV b does not recompute

A freed block keeps its contents and its hash: it goes to the back of the free list and is
overwritten (and its hash forgotten) only when the free list reaches it, so the blocks freed
longest ago are evicted first (LRU). A later hit takes it back off the free list.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

from labs.inference.paged import BlockManager, OutOfBlocks

__all__ = ["block_hash", "block_hashes", "PrefixCachingBlockManager"]


def block_hash(parent: int | None, tokens: Sequence[int]) -> int:
    """Hash of one full block: its tokens chained with the hash of the block before (or None).

    The first block's parent is written as ``-1``, a value CPython's ``hash`` never returns, so
    no real key can be mistaken for "no block before".  Python hashes tuples of ints the same way
    in every process (only ``str`` and ``bytes`` hashes are randomised; ``hash(None)`` also varies
    between processes before Python 3.12, which is why it is not used), so the keys are
    reproducible.
    """
    return hash((-1 if parent is None else parent, *(int(t) for t in tokens)))


def block_hashes(tokens: Sequence[int], block_size: int) -> list[int]:
    """Chained hashes of the *full* blocks of ``tokens``: ``len(tokens) // block_size`` of them."""
    if block_size < 1:
        raise ValueError(f"block_hashes: block_size must be >= 1, got {block_size}")
    hashes: list[int] = []
    parent = None
    for i in range(len(tokens) // block_size):
        parent = block_hash(parent, tokens[i * block_size : (i + 1) * block_size])
        hashes.append(parent)
    return hashes


class PrefixCachingBlockManager(BlockManager):
    """A :class:`~labs.inference.paged.BlockManager` that reuses the full blocks of earlier prompts.

    ``allocate(seq_id, n_tokens, token_ids=ids)`` looks the prompt's full blocks up by their
    chained hashes, shares every hit (reference count + 1, or taken back from the free list) and
    takes fresh blocks for the rest; ``num_cached[seq_id]`` is the number of leading prompt tokens
    whose keys and values are already in the pool. Without ``token_ids`` it behaves exactly like
    the plain manager. ``hit_rate`` counts looked-up blocks that were found.
    """

    def __init__(self, num_blocks: int, block_size: int):
        super().__init__(num_blocks, block_size)
        self.free_blocks = deque(range(num_blocks))  # popleft: the block freed longest ago
        self.hash_of: list[int | None] = [None] * num_blocks
        self.tokens_of: list[tuple[int, ...] | None] = [None] * num_blocks
        self.cached_blocks: dict[int, int] = {}  # hash -> block
        self.num_cached: dict[Hashable, int] = {}
        self._prompts: dict[Hashable, list[int]] = {}
        self.lookups = 0
        self.hits = 0

    @property
    def hit_rate(self) -> float:
        """Fraction of looked-up full prompt blocks that were found in the cache (0 if none)."""
        return self.hits / self.lookups if self.lookups else 0.0

    def _take(self) -> int:
        block = self.free_blocks.popleft()
        h = self.hash_of[block]
        if h is not None and self.cached_blocks.get(h) == block:  # evict: contents overwritten
            del self.cached_blocks[h]
        self.hash_of[block] = self.tokens_of[block] = None
        self.ref_count[block] = 1
        return block

    def _release(self, block: int) -> None:
        self.ref_count[block] -= 1
        if self.ref_count[block] == 0:
            if self.hash_of[block] is None:  # nothing worth keeping: reuse it first
                self.free_blocks.appendleft(block)
            else:
                self.free_blocks.append(block)

    def match(self, token_ids: Sequence[int]) -> list[int]:
        """Blocks holding the longest cached prefix of ``token_ids[:-1]``, in order (no side effects).

        A block matches when its chained hash is registered *and* its stored tokens are equal (a
        hash collision must not hand one request another's keys).
        """
        blocks = []
        lookup = list(token_ids[:-1])
        for i, h in enumerate(block_hashes(lookup, self.block_size)):
            block = self.cached_blocks.get(h)
            chunk = tuple(lookup[i * self.block_size : (i + 1) * self.block_size])
            if block is None or self.tokens_of[block] != chunk:
                break
            blocks.append(block)
        return blocks

    def can_allocate(self, n_tokens: int, token_ids: Sequence[int] | None = None) -> bool:
        """Whether a new sequence fits in the free blocks now, counting cache hits as free."""
        if token_ids is None:
            return super().can_allocate(n_tokens)
        hits = self.match(token_ids)
        revived = sum(1 for b in hits if self.ref_count[b] == 0)
        return self.blocks_for(n_tokens) - len(hits) + revived <= self.num_free

    def allocate(
        self, seq_id: Hashable, n_tokens: int, token_ids: Sequence[int] | None = None
    ) -> list[int]:
        """Blocks for a new sequence, sharing cached full blocks of ``token_ids`` (its prompt).

        Raises like :meth:`BlockManager.allocate`, and ``ValueError`` when ``token_ids`` does not
        have ``n_tokens`` entries. On success ``num_cached[seq_id]`` is set.
        """
        if token_ids is None:
            table = super().allocate(seq_id, n_tokens)
            self.num_cached[seq_id] = 0
            return table
        if len(token_ids) != n_tokens:
            raise ValueError(f"allocate: {len(token_ids)} token_ids for n_tokens={n_tokens}")
        need = self._check_new(seq_id, n_tokens)
        if not self.can_allocate(n_tokens, token_ids):
            raise OutOfBlocks(f"allocate: need up to {need} blocks, {self.num_free} free")
        hits = self.match(token_ids)
        self.lookups += (n_tokens - 1) // self.block_size
        self.hits += len(hits)
        table = []
        for block in hits:
            if self.ref_count[block] == 0:
                self.free_blocks.remove(block)
            self.ref_count[block] += 1
            table.append(block)
        table += [self._take() for _ in range(need - len(hits))]
        self.tables[seq_id] = table
        self.lengths[seq_id] = n_tokens
        self.num_cached[seq_id] = len(hits) * self.block_size
        self._prompts[seq_id] = [int(t) for t in token_ids]
        return list(table)

    def mark_computed(self, seq_id: Hashable, n_tokens: int) -> None:
        """Register the full blocks among the first ``n_tokens`` prompt tokens of a sequence.

        Call it once their keys and values are in the pool (after each prefill chunk); from then
        on other prompts can hit them. Blocks already registered (or hit) are left as they are.
        """
        prompt = self._prompts.get(seq_id)
        if prompt is None:
            return  # allocated without token_ids: nothing to register
        table = self._table(seq_id)
        hashes = block_hashes(prompt[: min(n_tokens, len(prompt))], self.block_size)
        for i, h in enumerate(hashes):
            block = table[i]
            if self.hash_of[block] is not None:
                continue
            self.hash_of[block] = h
            self.tokens_of[block] = tuple(prompt[i * self.block_size : (i + 1) * self.block_size])
            self.cached_blocks[h] = block  # a newer copy of the same prefix wins

    def free(self, seq_id: Hashable) -> None:
        """Drop a sequence; its registered blocks stay cached on the free list until evicted."""
        super().free(seq_id)
        self.num_cached.pop(seq_id, None)
        self._prompts.pop(seq_id, None)

    def check(self) -> None:
        """The plain invariants plus: every registered hash points to a block that holds it."""
        super().check()
        for h, block in self.cached_blocks.items():
            assert self.hash_of[block] == h, f"block {block} registered under a stale hash"
