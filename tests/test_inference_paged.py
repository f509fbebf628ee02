"""The paged KV cache: block manager (fuzzed with hypothesis), paged attention, memory waste."""

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from labs.inference.attention import causal_attention
from labs.inference.paged import (
    BlockManager,
    OutOfBlocks,
    PagedKVCache,
    paged_attention,
    paged_waste,
    static_waste,
)


class BlockManagerMachine(RuleBasedStateMachine):
    """Random allocate / append / fork / free / preempt; every token keeps its own value."""

    def __init__(self):
        super().__init__()
        self.cache = PagedKVCache(1, num_blocks=12, block_size=4, n_kv_heads=1, head_dim=1)
        self.bm = self.cache.manager
        self.expected: dict[int, list[float]] = {}  # token values each sequence must read back
        self.next_id, self.counter = 0, 0.0

    def _write(self, seq, block, offset):
        self.counter += 1.0
        val = torch.tensor([[[self.counter]]])
        self.cache.write(0, torch.tensor([block]), torch.tensor([offset]), val, val)
        self.expected[seq].append(self.counter)

    @rule(n=st.integers(1, 20))
    def allocate(self, n):
        seq, before = self.next_id, (list(self.bm.free_blocks), list(self.bm.ref_count))
        try:
            self.bm.allocate(seq, n)
        except OutOfBlocks:
            assert (self.bm.free_blocks, self.bm.ref_count) == before  # untouched on failure
            return
        except ValueError:
            assert n > 48
            return
        self.next_id += 1
        self.expected[seq] = []
        for pos in range(n):
            self._write(seq, *self.bm.slot(seq, pos))

    @precondition(lambda self: self.expected)
    @rule(data=st.data())
    def append(self, data):
        seq = data.draw(st.sampled_from(sorted(self.expected)))
        try:
            block, offset, copy = self.bm.append_slot(seq)
        except OutOfBlocks:
            return
        if copy is not None:
            self.cache.copy_block(*copy)
        assert self.bm.ref_count[block] == 1, "writing into a shared block"
        self._write(seq, block, offset)

    @precondition(lambda self: self.expected)
    @rule(data=st.data())
    def fork(self, data):
        parent = data.draw(st.sampled_from(sorted(self.expected)))
        self.bm.fork(parent, self.next_id)
        self.expected[self.next_id] = list(self.expected[parent])
        self.next_id += 1

    @precondition(lambda self: self.expected)
    @rule(data=st.data(), preempt=st.booleans())
    def free(self, data, preempt):
        seq = data.draw(st.sampled_from(sorted(self.expected)))
        self.bm.free(seq)  # preemption by recomputation frees the blocks the same way
        del self.expected[seq]
        if preempt:  # ... and re-admits the sequence later, rebuilding its cache
            self.allocate(1)

    @invariant()
    def consistent(self):
        self.bm.check()
        for seq, values in self.expected.items():
            got = [
                float(self.cache.k[0, b, o, 0, 0])
                for b, o in (self.bm.slot(seq, p) for p in range(len(values)))
            ]
            assert got == values, f"sequence {seq} reads {got}, wrote {values}"

    def teardown(self):
        for seq in list(self.expected):
            self.bm.free(seq)
        assert self.bm.num_free == self.bm.num_blocks


TestBlockManager = BlockManagerMachine.TestCase
TestBlockManager.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_copy_on_write_after_fork():
    bm = BlockManager(8, 4)
    bm.allocate("a", 6)  # blocks 0, 1 (second half full)
    bm.fork("a", "b")
    assert bm.ref_count[:2] == [2, 2]
    block, offset, copy = bm.append_slot("b")
    assert copy == (1, 2) and (block, offset) == (2, 2)
    assert bm.ref_count[:3] == [2, 1, 1]
    bm.free("a")
    bm.free("b")
    bm.check()
    assert bm.num_free == 8


def test_errors_name_the_problem():
    bm = BlockManager(4, 16)
    with pytest.raises(ValueError, match="need 5 blocks but the pool has only 4"):
        bm.allocate("x", 65)
    bm.allocate("x", 60)
    with pytest.raises(OutOfBlocks):
        bm.allocate("y", 10)
    with pytest.raises(ValueError, match="already"):
        bm.allocate("x", 1)
    with pytest.raises(KeyError, match="unknown sequence"):
        bm.free("z")
    bm.check()


@pytest.mark.parametrize("seed", range(4))
def test_paged_attention_equals_contiguous(seed):
    gen = torch.Generator().manual_seed(seed)
    h, h_kv, d, bs = 4, 2, 8, 5
    lengths = torch.randint(1, 30, (3,), generator=gen).tolist()
    cache = PagedKVCache(1, num_blocks=40, block_size=bs, n_kv_heads=h_kv, head_dim=d)
    bm = cache.manager
    ks, vs = [], []
    for s, n in enumerate(lengths):
        bm.allocate(s, 1)
        for _ in range(n - 1):
            bm.append_slot(s)
        k, v = torch.randn(n, h_kv, d, generator=gen), torch.randn(n, h_kv, d, generator=gen)
        slots = [bm.slot(s, p) for p in range(n)]
        cache.write(
            0, torch.tensor([b for b, _ in slots]), torch.tensor([o for _, o in slots]), k, v
        )
        ks.append(k)
        vs.append(v)
    tables, lens = cache.block_tables(range(3))
    q = torch.randn(3, h, 1, d, generator=gen)
    out = paged_attention(q, cache.k[0], cache.v[0], tables, lens, lens - 1)
    for s, n in enumerate(lengths):
        ref = causal_attention(
            q[s : s + 1], ks[s].transpose(0, 1)[None], vs[s].transpose(0, 1)[None], n - 1
        )
        torch.testing.assert_close(out[s : s + 1], ref, atol=1e-6, rtol=1e-5)


def test_waste():
    assert static_waste([10, 30], 40) == pytest.approx(0.5)
    assert paged_waste([10, 30], 16) == pytest.approx(1 - 40 / 48)  # 16 + 32 slots reserved
    with pytest.raises(ValueError, match="max_len"):
        static_waste([50], 40)
