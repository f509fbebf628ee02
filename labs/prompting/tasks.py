"""A family of in-context tasks: the mapping of each prompt is drawn at random.

Every task maps a three-letter input (distinct lower-case letters) to a three-letter output:

* ``copy``: ``abc -> abc``       * ``reverse``: ``abc -> cba``
* ``rotate``: ``abc -> bca``     * ``upper``: ``abc -> ABC``

A prompt is an optional instruction, ``shots`` solved examples and a query, for example::

    reverse: kfa>afk;oxe>exo;bmq>

The model must answer ``qmb;``. Without the instruction and without examples the task is
unknowable (one in four by guessing). During training a fraction of the examples is *noisy*
(solved with another task), so the model learns to trust the majority of its examples rather
than any single one -- the behaviour that makes more shots help.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["TASKS", "Format", "DEFAULT", "Prompt", "apply_task", "sample_prompt", "render"]

TASKS = {
    "copy": lambda s: s,
    "reverse": lambda s: s[::-1],
    "rotate": lambda s: s[1:] + s[:1],
    "upper": lambda s: s.upper(),
}
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Format:
    """How a prompt is written: the separator between input and output, the end of an example,
    and the text after an instruction."""

    arrow: str = ">"
    end: str = ";"
    colon: str = ": "


DEFAULT = Format()


@dataclass
class Prompt:
    """One evaluation item: the task, solved examples ``(input, output)``, the query, the
    instruction (or ``None``) and the expected answer."""

    task: str
    examples: list[tuple[str, str]]
    query: str
    instruction: str | None
    answer: str
    noisy: list[bool] = field(default_factory=list)


def apply_task(task: str, text: str) -> str:
    """The output of ``task`` on ``text``."""
    if task not in TASKS:
        raise ValueError(f"apply_task: unknown task {task!r}; choose from {sorted(TASKS)}")
    return TASKS[task](text)


def _word(rng: random.Random) -> str:
    return "".join(rng.sample(_LETTERS, 3))


def sample_prompt(
    rng: random.Random,
    shots: int,
    task: str | None = None,
    noise: float = 0.0,
    instruction: bool = False,
) -> Prompt:
    """A random prompt with ``shots`` examples of ``task`` (random if ``None``).

    Each example is solved with a different, random task with probability ``noise``.
    ``instruction=True`` names the true task at the start.
    """
    if shots < 0:
        raise ValueError(f"sample_prompt: shots must be >= 0, got {shots}")
    task = task or rng.choice(list(TASKS))
    examples, noisy = [], []
    words = set()
    while len(words) < shots + 1:  # all inputs distinct, the query included
        words.add(_word(rng))
    words = rng.sample(sorted(words), shots + 1)
    for w in words[:-1]:
        wrong = rng.random() < noise
        t = rng.choice([x for x in TASKS if x != task]) if wrong else task
        examples.append((w, apply_task(t, w)))
        noisy.append(wrong)
    query = words[-1]
    return Prompt(
        task, examples, query, task if instruction else None, apply_task(task, query), noisy
    )


def render(prompt: Prompt, fmt: Format = DEFAULT) -> str:
    """The prompt text up to and including the query's separator (the model continues it)."""
    head = f"{prompt.instruction}{fmt.colon}" if prompt.instruction else ""
    body = "".join(f"{x}{fmt.arrow}{y}{fmt.end}" for x, y in prompt.examples)
    return head + body + prompt.query + fmt.arrow
