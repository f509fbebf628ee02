"""Sampling: temperature, top-k, top-p, seeded generators, and clear errors."""

import pytest
import torch

from labs.inference.sampling import sample, sampling_probs


def test_greedy_is_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 3.0, 0.0]])
    assert sample(logits, temperature=0).tolist() == [1, 0]  # ties go to the lowest id


def test_temperature_one_is_softmax():
    logits = torch.randn(3, 10, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(sampling_probs(logits), torch.softmax(logits, -1))


def test_top_k_keeps_k_largest():
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0, 0.0]])
    probs = sampling_probs(logits, top_k=2)
    assert (probs[0] > 0).tolist() == [False, True, True, False, False]
    torch.testing.assert_close(probs.sum(), torch.tensor(1.0))


def test_top_p_smallest_nucleus():
    probs_in = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs_in.log()
    kept = sampling_probs(logits, top_p=0.8)[0] > 0  # 0.5 + 0.3 reaches 0.8: two tokens
    assert kept.tolist() == [True, True, False, False]
    kept = sampling_probs(logits, top_p=0.81)[0] > 0
    assert kept.tolist() == [True, True, True, False]
    kept = sampling_probs(logits, top_p=0.1)[0] > 0  # the top token always survives
    assert kept.tolist() == [True, False, False, False]


def test_seeded_generator_repeats_and_matches_frequencies():
    logits = torch.tensor([[0.0, 1.0, 2.0]]).repeat(4000, 1)
    a = sample(logits, temperature=1.0, generator=torch.Generator().manual_seed(1))
    b = sample(logits, temperature=1.0, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    freq = torch.bincount(a, minlength=3).float() / len(a)
    torch.testing.assert_close(freq, torch.softmax(logits[0], -1), atol=0.03, rtol=0)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
    ],
)
def test_bad_parameter_is_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sample(torch.zeros(1, 5), **kwargs)


def test_non_finite_logits_rejected():
    logits = torch.zeros(3, 4)
    logits[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"row\(s\) \[1\]"):
        sample(logits)
