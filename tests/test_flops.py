"""Counting and timing matrix products (labs.basics.flops)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from labs.basics import flops


def test_matmul_flops_counts_two_per_multiply_add():
    assert flops.matmul_flops(2, 3, 4) == 48
    mults, adds = flops.exact_matmul_ops(2, 3, 4)
    assert (mults, adds) == (24, 16)
    assert flops.matmul_flops(2, 3, 4) - (mults + adds) == 2 * 4  # one extra add per entry


def test_chain_orders_agree_with_a_brute_force_count():
    shapes = [(10, 100), (100, 5), (5, 50)]
    assert flops.chain_flops(shapes, "left") == 2 * (10 * 100 * 5 + 10 * 5 * 50)
    assert flops.chain_flops(shapes, "right") == 2 * (100 * 5 * 50 + 10 * 100 * 50)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s) for s in shapes)
    np.testing.assert_allclose((a @ b) @ c, a @ (b @ c), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: flops.matmul_flops(-1, 2, 3), "m must be a non-negative integer"),
        (lambda: flops.chain_flops([(2, 3)]), "at least two"),
        (lambda: flops.chain_flops([(2, 3), (4, 5)]), "inner sizes differ"),
        (lambda: flops.chain_flops([(2, 3), (3, 5)], "middle"), "order must be"),
        (lambda: flops.time_fn(lambda: None, repeats=0), "repeats >= 1"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_time_fn_returns_the_median_after_warmup(monkeypatch):
    calls = []
    # perf_counter readings (start, end) of the three timed calls: durations 0, 1 and 3 seconds.
    readings = iter([0.0, 0.0, 0.0, 1.0, 1.0, 4.0])
    monkeypatch.setattr(flops.time, "perf_counter", lambda: next(readings))
    assert flops.time_fn(lambda: calls.append(1), warmup=2, repeats=3) == 1.0
    assert len(calls) == 5  # two untimed warm-up calls, three timed ones


def test_measure_matmul_reports_consistent_units():
    t = flops.measure_matmul(64, torch.float32, repeats=2)
    assert t.flops == 2 * 64**3
    assert t.seconds > 0
    assert t.flop_per_s == pytest.approx(t.flops / t.seconds)
    assert t.dtype == "float32"
