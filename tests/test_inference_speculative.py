"""Speculative decoding is exact: greedy equality and a statistical test of the sampled token."""

import pytest
import torch

from labs import gpt
from labs.inference import speculative as spec
from labs.inference.kv_cache import generate

torch.set_num_threads(1)


def first_token_tv(p, q, n, accept_reject, seed=0, gamma=2):
    """TV distance between the first emitted token's empirical distribution and the target p."""
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(p.shape[-1])
    for _ in range(n):
        draft = torch.multinomial(q, gamma, replacement=True, generator=gen)
        n_acc, nxt = accept_reject(p.expand(gamma + 1, -1), q.expand(gamma, -1), draft, gen)
        counts[int(draft[0]) if n_acc > 0 else nxt] += 1
    return 0.5 * float((counts / n - p).abs().sum())


P = torch.tensor([0.55, 0.2, 0.1, 0.1, 0.05])
Q = torch.tensor([0.1, 0.2, 0.5, 0.05, 0.15])
TV_BOUND = 0.03  # 4000 samples of 5 outcomes: sampling noise is about 0.01


def test_sampled_first_token_has_target_distribution():
    assert first_token_tv(P, Q, 4000, spec.accept_reject) < TV_BOUND


def test_statistical_test_catches_wrong_residual(monkeypatch):
    monkeypatch.setattr(spec, "residual_distribution", lambda p, q: q / q.sum())
    assert first_token_tv(P, Q, 4000, spec.accept_reject) > 3 * TV_BOUND
    monkeypatch.setattr(spec, "residual_distribution", lambda p, q: p)  # resample from p: biased
    assert first_token_tv(P, Q, 4000, spec.accept_reject) > TV_BOUND


def test_acceptance_and_formula():
    assert float(spec.acceptance_rate(P, Q)) == pytest.approx(0.1 + 0.2 + 0.1 + 0.05 + 0.05)
    assert spec.expected_tokens_per_round(0.0, 4) == 1.0
    assert spec.expected_tokens_per_round(0.5, 2) == pytest.approx(1.75)
    assert spec.expected_tokens_per_round(1.0, 3) == 4.0


@pytest.fixture(scope="module")
def models():
    target = gpt.GPT(gpt.GPTConfig(n_embd=32, block_size=96)).eval()
    draft = gpt.GPT(gpt.GPTConfig(n_embd=16, n_head=2, n_layer=1, block_size=96, seed=5)).eval()
    return target, draft


@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_greedy_speculative_equals_target(models, gamma):
    target, draft = models
    prompt = torch.randint(0, 96, (1, 7), generator=torch.Generator().manual_seed(gamma))
    out, stats = spec.speculative_generate(target, draft, prompt, 50, gamma=gamma)
    assert torch.equal(out, generate(target, prompt, 50))
    assert stats["accepted"] <= stats["drafted"]


def test_sampled_speculative_runs_and_is_seeded(models):
    target, draft = models
    prompt = torch.zeros(1, 4, dtype=torch.long)
    a = spec.speculative_generate(
        target, draft, prompt, 30, 3, 1.0, generator=torch.Generator().manual_seed(0)
    )
    b = spec.speculative_generate(
        target, draft, prompt, 30, 3, 1.0, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(a[0], b[0]) and a[0].shape == (1, 34)


def test_bad_arguments(models):
    target, draft = models
    with pytest.raises(ValueError, match="gamma"):
        spec.speculative_generate(target, draft, torch.zeros(1, 3, dtype=torch.long), 5, gamma=0)
    with pytest.raises(ValueError, match="exceeds the model's context"):
        spec.speculative_generate(target, draft, torch.zeros(1, 90, dtype=torch.long), 10)
