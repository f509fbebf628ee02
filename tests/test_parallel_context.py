"""Ring attention (contiguous and zig-zag) and Ulysses against full attention."""

import pytest
import torch

from labs import dist
from labs.attention.flash import naive_attention
from labs.parallel import ring_attention as ra
from labs.parallel import ulysses


@pytest.mark.parametrize(
    "p, s, causal, layout",
    [(4, 16, True, "contiguous"), (4, 19, True, "zigzag"), (3, 10, False, "contiguous"),
     (2, 9, True, "zigzag"), (3, 13, False, "zigzag"), (1, 5, True, "contiguous")],
)  # fmt: skip
def test_ring_attention_equals_full_attention(p, s, causal, layout):
    gen = torch.Generator().manual_seed(s)
    q, k, v = (torch.randn(2, 3, s, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    k[..., -1, :] += 5.0  # a large score late in the sequence
    for z in (q, k, v):
        z.requires_grad_()
    ref = naive_attention(q, k, v, causal=causal)
    go = torch.randn_like(ref)
    grads = torch.autograd.grad(ref, (q, k, v), go)

    def program():
        r = dist.get_rank()
        qs, ks, vs = (ra.shard(z.detach(), r, p, layout).requires_grad_() for z in (q, k, v))
        o = ra.ring_attention(qs, ks, vs, causal=causal, layout=layout, seq_len=s)
        o.backward(ra.shard(go, r, p, layout))
        return o.detach(), qs.grad, ks.grad, vs.grad

    res = dist.launch(program, p)
    for i, want in enumerate((ref, *grads)):
        torch.testing.assert_close(ra.unshard([x[i] for x in res], layout), want)


def test_without_overlap_same_result_and_the_wait_comes_before_the_compute():
    """overlap=False waits for each shard before computing (same numbers); with the overlap, a
    rank's irecv of the next shard completes after the step's compute (trace order)."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 12, 4, generator=gen) for _ in range(3))

    def program(overlap):
        r = dist.get_rank()
        qs, ks, vs = (ra.shard(z, r, 3, "zigzag") for z in (q, k, v))
        return ra.ring_attention(qs, ks, vs, causal=True, layout="zigzag", overlap=overlap)

    orders = {}
    for overlap in (True, False):
        out = dist.launch(program, 3, overlap)
        torch.testing.assert_close(ra.unshard(out, "zigzag"), naive_attention(q, k, v, causal=True))
        ops = [x.op for x in dist.last_trace()[0] if x.op in ("irecv", "attention")]
        orders[overlap] = ops
    assert orders[True] == ["attention", "irecv", "attention", "irecv", "attention"]
    assert orders[False] == ["irecv", "attention", "irecv", "attention", "attention"]


def test_layouts_and_work():
    assert ra.shard_ranges(8, 2, "zigzag") == [[(0, 2), (6, 8)], [(2, 4), (4, 6)]]
    assert [x.tolist() for x in ra.shard_index(5, 2)] == [[0, 1, 2], [3, 4]]
    x = torch.arange(19.0).view(1, 1, 19, 1)
    parts = [ra.shard(x, r, 4, "zigzag") for r in range(4)]
    assert torch.equal(ra.unshard(parts, "zigzag"), x)
    p = 4
    w = ra.ring_work(64, p, "contiguous")
    assert sum(w) / (p * max(w)) == pytest.approx((p + 1) / (2 * p))
    z = ra.ring_work(64, p, "zigzag")
    assert max(z) == min(z)
    assert ra.ring_work(10, 2, "contiguous", causal=False) == [50, 50]
    with pytest.raises(ValueError, match="layout"):
        ra.shard_ranges(8, 2, "striped")
    with pytest.raises(ValueError, match="too short"):
        ra.shard_ranges(3, 2, "zigzag")


def test_ring_attention_rejects_wrong_shard_length():
    def program():
        q = torch.randn(1, 1, 3, 2)
        ra.ring_attention(q, q, q, seq_len=8)

    with pytest.raises(ValueError, match="holds 4 tokens"):
        dist.launch(program, 2)


def test_ulysses_equals_full_attention_and_checks_heads():
    p, b, s, h, d = 4, 2, 8, 4, 3
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(b, s, h, d, generator=gen, dtype=torch.float64) for _ in range(3))
    for z in (q, k, v):
        z.requires_grad_()
    ref = naive_attention(*(z.transpose(1, 2) for z in (q, k, v)), causal=True).transpose(1, 2)
    go = torch.randn_like(ref)
    grads = torch.autograd.grad(ref, (q, k, v), go)
    n = s // p

    def program():
        r = dist.get_rank()
        qs, ks, vs = (
            z.detach()[:, r * n : (r + 1) * n].clone().requires_grad_() for z in (q, k, v)
        )
        o = ulysses.ulysses_attention(qs, ks, vs, causal=True)
        o.backward(go[:, r * n : (r + 1) * n])
        return o.detach(), qs.grad, ks.grad, vs.grad

    res = dist.launch(program, p)
    for i, want in enumerate((ref, *grads)):
        torch.testing.assert_close(torch.cat([x[i] for x in res], 1), want)
    sent = dist.last_trace().bytes_sent()
    assert sent == [2 * 8 * ulysses.comm_elements(b, s, h * d, p, "ulysses")] * p  # fwd + bwd
    with pytest.raises(ValueError, match="divisible by the sequence-parallel degree"):
        dist.launch(program, 3)
    with pytest.raises(ValueError, match="method"):
        ulysses.comm_elements(1, 1, 1, 2, "tree")
