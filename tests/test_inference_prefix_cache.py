"""Prefix caching: chained block hashes, reference counts, LRU eviction, same tokens as without."""

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from labs import gpt
from labs.inference.batching import Request
from labs.inference.chunked_prefill import ChunkedModelRunner, ChunkedScheduler, run_chunked
from labs.inference.paged import OutOfBlocks
from labs.inference.prefix_cache import PrefixCachingBlockManager, block_hash, block_hashes


def test_hashes_chain_the_prefix_and_skip_the_partial_block():
    a = block_hashes([1, 2, 3, 4, 5, 6, 7], 3)
    assert len(a) == 2  # the partial block (token 7) gets no hash
    assert a[1] == block_hash(a[0], [4, 5, 6])
    b = block_hashes([9, 9, 9, 4, 5, 6], 3)
    assert b[1] != a[1], "the same block after another prefix must not share a key"
    assert block_hashes([1, 2, 3, 4, 5, 6], 3) == a
    with pytest.raises(ValueError, match="block_size"):
        block_hashes([1], 0)


def test_hits_share_blocks_and_count_only_full_blocks_before_the_last_token():
    bm = PrefixCachingBlockManager(num_blocks=16, block_size=4)
    prompt = list(range(10))  # blocks [0..3] [4..7] and a partial [8, 9]
    ta = bm.allocate("a", 10, token_ids=prompt)
    assert bm.num_cached["a"] == 0  # nothing computed yet
    bm.mark_computed("a", 10)
    tb = bm.allocate("b", 11, token_ids=prompt + [99])
    assert tb[:2] == ta[:2] and tb[2] != ta[2]
    assert bm.num_cached["b"] == 8
    assert [bm.ref_count[x] for x in ta] == [2, 2, 1]
    # a prompt of exactly two full blocks: its last block holds the last token -> not a hit
    bm.allocate("c", 8, token_ids=list(range(8)))
    assert bm.num_cached["c"] == 4
    assert bm.hits == 1 + 2 and bm.lookups == 2 + 2 + 1
    bm.check()


def test_freed_blocks_stay_cached_until_evicted_least_recent_first():
    bm = PrefixCachingBlockManager(num_blocks=4, block_size=2)
    bm.allocate("a", 5, token_ids=[1, 2, 3, 4, 5])
    bm.mark_computed("a", 5)
    bm.free("a")
    assert bm.num_free == 4
    bm.allocate("b", 5, token_ids=[1, 2, 3, 4, 6])  # revives both cached blocks
    assert bm.num_cached["b"] == 4 and bm.num_free == 1
    bm.free("b")
    bm.allocate("x", 2, token_ids=[7, 8])  # takes the unhashed block first, not a cached one
    assert bm.allocate("c", 5, token_ids=[1, 2, 3, 4, 9]) and bm.num_cached["c"] == 4
    bm.free("c")
    bm.free("x")
    bm.allocate("big", 8, token_ids=list(range(20, 28)))  # needs all four blocks: evicts
    bm.mark_computed("big", 8)
    bm.free("big")
    bm.allocate("d", 5, token_ids=[1, 2, 3, 4, 5])
    assert bm.num_cached["d"] == 0, "evicted blocks must not be found"
    bm.check()


def test_can_allocate_counts_hits_and_failures_leave_state_unchanged():
    bm = PrefixCachingBlockManager(num_blocks=3, block_size=2)
    bm.allocate("a", 5, token_ids=[1, 2, 3, 4, 5])
    bm.mark_computed("a", 5)
    assert bm.num_free == 0
    assert not bm.can_allocate(3)  # without token ids: 2 fresh blocks
    assert not bm.can_allocate(3, [1, 2, 7])  # one hit, one fresh block: none free
    before = (list(bm.free_blocks), list(bm.ref_count), dict(bm.cached_blocks))
    with pytest.raises(OutOfBlocks):
        bm.allocate("b", 3, token_ids=[1, 2, 7])
    assert (list(bm.free_blocks), list(bm.ref_count), dict(bm.cached_blocks)) == before
    with pytest.raises(ValueError, match="token_ids"):
        bm.allocate("b", 4, token_ids=[1, 2, 7])
    bm.check()


def test_a_hash_collision_is_not_a_hit(monkeypatch):
    import labs.inference.prefix_cache as pc

    monkeypatch.setattr(pc, "block_hash", lambda parent, tokens: 0)  # every block collides
    bm = pc.PrefixCachingBlockManager(num_blocks=8, block_size=2)
    bm.allocate("a", 3, token_ids=[1, 2, 3])
    bm.mark_computed("a", 3)
    bm.allocate("b", 3, token_ids=[5, 6, 7])
    assert bm.num_cached["b"] == 0


class PrefixMachine(RuleBasedStateMachine):
    """Random prompts over a few shared prefixes; every slot must hold its own prefix's value."""

    PREFIXES = [[1, 2, 3, 4, 5], [1, 2, 3, 9, 9], [7, 7]]

    def __init__(self):
        super().__init__()
        self.bm = PrefixCachingBlockManager(num_blocks=10, block_size=2)
        self.values: dict[int, tuple] = {}  # block -> (token prefix it was written for, per slot)
        self.live: dict[int, list[int]] = {}
        self.next_id = 0

    @rule(p=st.integers(0, 2), tail=st.lists(st.integers(0, 3), max_size=4))
    def allocate(self, p, tail):
        tokens = self.PREFIXES[p] + tail
        seq = self.next_id
        try:
            table = self.bm.allocate(seq, len(tokens), token_ids=tokens)
        except OutOfBlocks:
            return
        self.next_id += 1
        cached = self.bm.num_cached[seq]
        for pos in range(len(tokens)):
            block, off = table[pos // 2], pos % 2
            if pos < cached:  # read from the cache: must be what this prefix wrote
                assert self.values[(block, off)] == tuple(tokens[: pos + 1])
            else:
                self.values[(block, off)] = tuple(tokens[: pos + 1])
        self.bm.mark_computed(seq, len(tokens))
        self.live[seq] = tokens

    @rule(data=st.data())
    def free(self, data):
        if self.live:
            seq = data.draw(st.sampled_from(sorted(self.live)))
            self.bm.free(seq)
            del self.live[seq]

    @invariant()
    def consistent(self):
        self.bm.check()


TestPrefixMachine = PrefixMachine.TestCase
TestPrefixMachine.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip


def _shared_prompt_trace(n=10, seed=0):
    rng = np.random.default_rng(seed)
    system = rng.integers(0, 64, 20).tolist()
    return [
        Request(i, 0.001 * i, system + rng.integers(0, 64, 3 + i % 4).tolist(), 4) for i in range(n)
    ]


def test_prefix_caching_gives_the_same_tokens_and_computes_fewer():
    model = gpt.GPT(gpt.GPTConfig(n_embd=32, n_head=4, n_layer=2, block_size=64, vocab_size=64))
    outs, computed = {}, {}
    for prefix in (False, True):
        trace = _shared_prompt_trace()
        runner = ChunkedModelRunner(model, num_blocks=64, block_size=4, prefix_caching=prefix)
        sched = ChunkedScheduler(max_batch=4, manager=runner.manager)
        n_tokens = []
        orig = runner.__call__

        def counting(chunks, decode, orig=orig, n_tokens=n_tokens):
            n_tokens.append(sum(c.length for c in chunks))
            return orig(chunks, decode)

        run_chunked(trace, sched, counting)
        runner.manager.check()
        outs[prefix], computed[prefix] = [r.generated for r in trace], sum(n_tokens)
    assert outs[True] == outs[False]
    assert computed[True] < computed[False]
