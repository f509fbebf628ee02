"""A few-shot evaluation harness with seeded test sets.

Every measurement in Chapter 7 is one call here: build a seeded list of prompts
(:func:`make_eval_set`), render them in some format, let the model answer greedily
(:func:`answers`) and count exact matches (:func:`accuracy`). The variations -- number of shots,
format, instruction, example order, majority voting over samples -- change only the prompts or
the decoding, never the items, so differences between settings are differences the prompt made.
"""

from __future__ import annotations

import random
from collections import Counter

import torch

from labs import data
from labs.prompting import tasks

__all__ = [
    "make_eval_set",
    "answers",
    "accuracy",
    "accuracy_by_shots",
    "with_noisy_example",
    "majority_vote",
    "self_consistency",
]

_TOK = data.CharTokenizer()


def make_eval_set(
    n: int, shots: int, seed: int = 0, instruction: bool = False, noise: float = 0.0
) -> list[tasks.Prompt]:
    """``n`` prompts with ``shots`` examples each; the same ``seed`` gives the same items."""
    if n <= 0:
        raise ValueError(f"make_eval_set: n must be positive, got {n}")
    rng = random.Random(f"eval-{seed}-{shots}")
    return [tasks.sample_prompt(rng, shots, noise=noise, instruction=instruction) for _ in range(n)]


@torch.no_grad()
def answers(
    model,
    prompts: list[tasks.Prompt],
    fmt: tasks.Format = tasks.DEFAULT,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> list[str]:
    """The model's answer to each prompt: its continuation up to the format's end marker.

    Prompts of equal length are decoded together in one batch; 4 new characters are enough for a
    three-letter answer and its end marker. The ids go to the model's device (so must
    ``generator``).
    """
    texts = [tasks.render(p, fmt) for p in prompts]
    out: list[str] = [""] * len(texts)
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(texts):
        groups.setdefault(len(t), []).append(i)
    for idx in groups.values():
        ids = torch.stack([_TOK.encode(texts[i]) for i in idx]).to(next(model.parameters()).device)
        gen = model.generate(ids, 4, temperature=temperature, generator=generator)
        for i, row in zip(idx, gen[:, ids.shape[1] :]):
            out[i] = _TOK.decode(row).split(fmt.end)[0]
    return out


def accuracy(model, prompts: list[tasks.Prompt], fmt: tasks.Format = tasks.DEFAULT) -> float:
    """Fraction of prompts answered exactly right (greedy decoding)."""
    if not prompts:
        raise ValueError("accuracy: prompts is empty")
    got = answers(model, prompts, fmt)
    return sum(g == p.answer for g, p in zip(got, prompts)) / len(prompts)


def accuracy_by_shots(
    model,
    shots: list[int],
    n: int = 200,
    seed: int = 0,
    instruction: bool = False,
    fmt: tasks.Format = tasks.DEFAULT,
) -> dict:
    """``{k: accuracy}`` on ``n`` seeded prompts for each number of shots ``k``."""
    return {k: accuracy(model, make_eval_set(n, k, seed, instruction), fmt) for k in shots}


def with_noisy_example(prompts: list[tasks.Prompt], position: int, seed: int = 0):
    """Copies of ``prompts`` where the example at ``position`` (0 = first, -1 = last) is solved
    with a wrong task -- the same wrong example, moved, isolates the effect of order."""
    rng = random.Random(f"noisy-{seed}")
    out = []
    for p in prompts:
        if not p.examples:
            raise ValueError("with_noisy_example: prompts need at least one example")
        wrong = rng.choice([t for t in tasks.TASKS if t != p.task])
        ex = list(p.examples)
        x = ex.pop(rng.randrange(len(ex)))
        bad = (x[0], tasks.apply_task(wrong, x[0]))
        ex.insert(position if position >= 0 else len(ex) + 1 + position, bad)
        out.append(tasks.Prompt(p.task, ex, p.query, p.instruction, p.answer))
    return out


def majority_vote(candidates: list[str]) -> str:
    """The most common answer (ties: the one seen first)."""
    if not candidates:
        raise ValueError("majority_vote: no candidates")
    counts = Counter(candidates)
    return max(candidates, key=lambda c: (counts[c], -candidates.index(c)))


def self_consistency(
    model,
    prompts: list[tasks.Prompt],
    samples: tuple[int, ...] = (1, 5, 9),
    temperature: float = 1.0,
    seed: int = 0,
) -> dict[int, float]:
    """Accuracy of the majority answer of the first ``k`` samples, for each ``k`` in ``samples``.

    ``max(samples)`` answers per prompt are drawn once at ``temperature`` (seeded) and reused for
    every ``k``, so the values differ only by how many votes were counted (``k = 1`` is a single
    sampled answer).
    """
    if not prompts or not samples or min(samples) < 1:
        raise ValueError(f"self_consistency: need prompts and sample counts >= 1, got {samples}")
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    draws = [
        answers(model, prompts, temperature=temperature, generator=gen) for _ in range(max(samples))
    ]
    out = {}
    for k in samples:
        voted = [majority_vote([d[i] for d in draws[:k]]) for i in range(len(prompts))]
        out[k] = sum(v == p.answer for v, p in zip(voted, prompts)) / len(prompts)
    return out
