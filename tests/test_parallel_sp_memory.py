"""Sequence parallelism and activation memory (labs.parallel.sequence_parallel, act_memory)."""

import pytest
import torch

from labs import dist, gpt
from labs.parallel import act_memory
from labs.parallel import sequence_parallel as sp
from labs.training.activations import korthikanti_layer_bytes


def _block():
    torch.manual_seed(0)
    return gpt.Block(gpt.GPTConfig(n_head=4, n_embd=32)).double()


@pytest.mark.parametrize("t", [2, 4])
@pytest.mark.parametrize("kind", ["tp", "sp"])
def test_tp_and_sp_blocks_equal_the_unsplit_block(t, kind):
    block = _block()
    x = torch.randn(2, 8, 32, dtype=torch.float64, requires_grad=True)
    y = block(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    n = 8 // t

    def program():
        r = dist.get_rank()
        part = (sp.SPBlock if kind == "sp" else sp.TPBlock)(block, r, t)
        xi = x.detach()[:, r * n : (r + 1) * n] if kind == "sp" else x.detach()
        xi = xi.clone().requires_grad_()
        out = part(xi)
        out.backward(dy[:, r * n : (r + 1) * n] if kind == "sp" else dy)
        ln = part.ln_2.weight.grad.clone()
        if kind == "sp":
            dist.all_reduce(ln)  # replicated layer norm, per-token-shard gradients
        return out.detach(), xi.grad, ln

    res = dist.launch(program, t)
    if kind == "sp":
        out, dx = torch.cat([o for o, _, _ in res], 1), torch.cat([g for _, g, _ in res], 1)
    else:
        out, dx = res[0][:2]  # TP: every rank holds the full output and input gradient
    torch.testing.assert_close(out, y)
    torch.testing.assert_close(dx, x.grad)
    torch.testing.assert_close(res[0][2], block.ln_2.weight.grad)
    ops = dist.last_trace().op_counts(0)
    if kind == "sp":
        assert "all_reduce" in ops and ops["all_reduce"] == 1  # only the test's own
        assert ops["all_gather_into_tensor"] == 6 and ops["reduce_scatter_tensor"] == 4
    else:
        assert "all_gather_into_tensor" not in ops


@pytest.mark.parametrize("t", [1, 2, 4])
@pytest.mark.parametrize("use_sp", [False, True])
def test_measured_bytes_equal_the_formula(t, use_sp):
    block = gpt.Block(gpt.GPTConfig(n_head=4, n_embd=32))
    s, b = 16, 2
    measured = act_memory.measure_block_bytes(block, torch.randn(b, s, 32), t, use_sp)
    assert measured == [4 * act_memory.tiny_block_numbers(s, b, 32, 4, t, use_sp)] * t


def test_sp_removes_the_replicated_floor():
    s, b, h, a = 2048, 1, 12288, 96
    tp = korthikanti_layer_bytes(s, b, h, a, 8)
    tpsp = korthikanti_layer_bytes(s, b, h, a, 8, sequence_parallel=True)
    assert tp - tpsp == pytest.approx(10 * s * b * h * (1 - 1 / 8))
    with pytest.raises(ValueError, match="positive"):
        act_memory.tiny_block_numbers(0, 1, 1, 1)
    with pytest.raises(ValueError, match="divisible"):
        act_memory.measure_block_bytes(_block().float(), torch.randn(1, 5, 32), 2, True)
