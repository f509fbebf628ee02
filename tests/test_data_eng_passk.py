"""pass@k estimator and the sandboxed candidate runner."""

import math
import os
from itertools import combinations

import numpy as np
import pytest

from labs.data_eng.passk import evaluate_candidates, naive_pass_at_k, pass_at_k, run_candidate


@pytest.mark.parametrize("n,c,k", [(10, 3, 1), (10, 3, 5), (20, 0, 4), (5, 5, 2), (7, 6, 3)])
def test_pass_at_k_equals_binomial_formula_and_enumeration(n, c, k):
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)
    samples = [1] * c + [0] * (n - c)  # the probability over all k-subsets, counted directly
    subsets = list(combinations(range(n), k))
    assert exact == pytest.approx(np.mean([any(samples[i] for i in s) for s in subsets]))


def test_naive_estimator_is_biased_low():
    # Expected value over the binomial draw of c: the unbiased estimator recovers the truth.
    p, n, k = 0.2, 10, 5
    truth = 1 - (1 - p) ** k
    probs = [math.comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)]
    unbiased = sum(q * pass_at_k(n, c, k) for c, q in enumerate(probs))
    naive = sum(q * naive_pass_at_k(n, c, k) for c, q in enumerate(probs))
    assert unbiased == pytest.approx(truth, abs=1e-12)
    assert naive < truth - 0.01


def test_bad_arguments():
    for args in [(5, 6, 1), (5, 2, 0), (5, 2, 6), (5, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*args)


def test_runner_statuses(tmp_path):
    tests = "assert add(2, 3) == 5"
    slow_ok = 30.0  # generous: a loaded CI machine can take seconds to start Python
    assert run_candidate("def add(a, b):\n    return a + b", tests, timeout=slow_ok).passed
    assert (
        run_candidate("def add(a, b):\n    return a - b", tests, timeout=slow_ok).status == "failed"
    )
    assert run_candidate("def add(a, b) return", tests, timeout=slow_ok).status == "error"
    loop = run_candidate("def add(a, b):\n    while True:\n        pass", tests, timeout=1)
    assert loop.status == "timeout"


def test_runner_cannot_delete_or_write_files(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    code = f"import os\nos.remove({str(victim)!r})\ndef add(a, b):\n    return a + b"
    assert not run_candidate(code, "assert add(1, 1) == 2").passed
    code = f"open({str(victim)!r}, 'w').write('gone')"
    assert not run_candidate(code, "").passed
    code = "import shutil\nshutil.rmtree(" + repr(str(tmp_path)) + ")"
    assert not run_candidate(code, "").passed
    assert victim.read_text() == "keep me"
    assert not run_candidate("import subprocess\nsubprocess.run(['true'])", "").passed
    assert os.getcwd()  # the caller's process is untouched


def test_evaluate_candidates():
    cands = {"add": ["def add(a, b):\n    return a + b", "def add(a, b):\n    return a * b"]}
    out = evaluate_candidates(cands, {"add": "assert add(2, 3) == 5"}, ks=(1, 2), timeout=30.0)
    assert out["correct"] == {"add": 1}
    assert out["pass@k"] == {1: 0.5, 2: 1.0}
    with pytest.raises(ValueError):
        evaluate_candidates(cands, {})
