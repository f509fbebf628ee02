"""The project's own text corpus, a character tokenizer, and an instruction-following task.

Nothing here downloads anything: the corpus is ``labs/text/corpus.txt``, original prose about deep
learning systems shipped inside the package, so results never drift when the book changes.

* :func:`load_corpus` -- the corpus as one string (printable ASCII and newlines).
* :class:`CharTokenizer` -- one token per character; 96 ids (newline + printable ASCII).
* :func:`split`, :func:`batches` -- a train/validation split and a deterministic stream of
  ``(inputs, targets)`` windows for next-token training.
* :func:`make_instructions`, :func:`format_prompt`, :func:`instruction_batches`,
  :func:`score_instructions` -- a small fine-tuning task in the instruction schema::

      ### Instruction
      Last letter.

      ### Input
      cache

      ### Response
      e

  Its score is the exact-match accuracy of greedy answers on words never seen in training.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from importlib import resources

import torch

__all__ = [
    "load_corpus",
    "CharTokenizer",
    "split",
    "batches",
    "TASKS",
    "WORDS",
    "make_instructions",
    "format_prompt",
    "format_example",
    "instruction_batches",
    "score_instructions",
]

_VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))


def load_corpus() -> str:
    """The project's corpus (about 26 KB of original prose about deep learning systems)."""
    return resources.files("labs").joinpath("text/corpus.txt").read_text(encoding="ascii")


class CharTokenizer:
    """Map each character to an id: newline is 0, printable ASCII 32..126 are 1..95.

    The vocabulary is fixed (not learned from the corpus), so every text the book uses shares it.
    """

    def __init__(self) -> None:
        self.chars = _VOCAB
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.vocab_size = len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """Token ids of ``text``, shape (len(text),), dtype int64."""
        try:
            return torch.tensor([self.stoi[ch] for ch in text], dtype=torch.long)
        except KeyError as err:
            raise ValueError(
                f"CharTokenizer: character {err.args[0]!r} is not in the vocabulary "
                "(newline and printable ASCII); replace or drop it before encoding"
            ) from None

    def decode(self, ids: torch.Tensor | list[int]) -> str:
        """The text of a 1-D sequence of ids."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else ids
        return "".join(self.chars[i] for i in ids)


def split(ids: torch.Tensor, train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a 1-D id sequence into a leading training part and a trailing validation part."""
    n = int(len(ids) * train_fraction)
    return ids[:n], ids[n:]


def batches(
    ids: torch.Tensor, batch_size: int, block_size: int, seed: int = 0
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """An endless, deterministic stream of random windows for next-token prediction.

    Args:
        ids: 1-D token ids (the corpus).
        batch_size: windows per batch (B).
        block_size: window length in tokens (T).
        seed: seed of the window positions; the same seed gives the same stream.

    Yields:
        ``(x, y)``, both (B, T) int64, with ``y[:, t] == ids[start + t + 1]``.
    """
    if len(ids) <= block_size:
        raise ValueError(
            f"batches: {len(ids)} tokens cannot fill a window of block_size={block_size}"
        )
    gen = torch.Generator().manual_seed(seed)
    offsets = torch.arange(block_size)
    while True:
        starts = torch.randint(len(ids) - block_size, (batch_size, 1), generator=gen)
        yield ids[starts + offsets], ids[starts + offsets + 1]


# --------------------------------------------------------------------------- instruction task

TASKS: dict[str, Callable[[str], str]] = {
    "Is it upper or lower case?": lambda w: "upper" if w.isupper() else "lower",
    "Is it a word or a number?": lambda w: "number" if w.isdigit() else "word",
    "First letter.": lambda w: w[0],
    "Last letter.": lambda w: w[-1],
}
"""The instructions of the task and the answer each one asks for, given the input."""

WORDS = sorted(
    set(
        """adamw alpha array batch bytes cache chips clock cloud cores crash debug decay dense
        depth disks dtype epoch error fetch flops float frame fused gains gates gemms graph
        grids group heads hosts index input joins label large latch layer lease limit links
        loads local logit loops masks merge mixes modes model nodes norms order pages pairs
        param peaks pipes pools ports power queue ranks rates ratio relus rings route scale
        scans seeds shard shape sizes slice slots speed stage state steps store swaps syncs
        table tasks tiles token topks trace train trees units value warps width words world
        write zeros""".split()
    )
)
"""Five-letter words used as task inputs; every fifth one is held out for testing.

Equal lengths give every prompt of one instruction the same layout, which a tiny model learns
quickly."""


def make_instructions(n: int, split: str = "train", seed: int = 0) -> list[dict[str, str]]:
    """``n`` examples ``{"instruction", "input", "output"}`` of :data:`TASKS` on :data:`WORDS`.

    Inputs are five characters: a word, for the case question a word in capitals half of the
    time, for the word-or-number question a five-digit number half of the time.
    ``split="train"`` draws from four fifths of the words, ``split="test"`` from the rest, so
    the score measures whether the skill transfers to unseen inputs.
    """
    if split not in ("train", "test"):
        raise ValueError(f"make_instructions: split must be 'train' or 'test', got {split!r}")
    pool = [w for i, w in enumerate(WORDS) if (i % 5 == 0) == (split == "test")]
    rng = random.Random(f"{split}-{seed}")
    names = list(TASKS)
    out = []
    for _ in range(n):
        task, word = rng.choice(names), rng.choice(pool)
        if task.startswith("Is it upper") and rng.random() < 0.5:
            word = word.upper()
        if task.startswith("Is it a word") and rng.random() < 0.5:
            word = str(rng.randrange(10_000, 100_000))
        out.append({"instruction": task, "input": word, "output": TASKS[task](word)})
    return out


def format_prompt(example: dict[str, str]) -> str:
    """The prompt of an example: instruction and input sections, ending with ``### Response``."""
    return (
        f"### Instruction\n{example['instruction']}\n\n"
        f"### Input\n{example['input']}\n\n### Response\n"
    )


def format_example(example: dict[str, str]) -> str:
    """Prompt, answer and a closing newline (the model learns to stop there)."""
    return format_prompt(example) + example["output"] + "\n"


def instruction_batches(
    examples: list[dict[str, str]],
    tokenizer: CharTokenizer,
    batch_size: int,
    block_size: int,
    seed: int = 0,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """An endless, deterministic stream of padded examples; only answer tokens carry a target.

    Yields:
        ``(x, y)``, both (B, block_size) int64; ``y`` is -100 on prompt and padding positions,
        so :meth:`labs.gpt.GPT.loss` scores the response (and its closing newline) only.
    """
    xs, ys = [], []
    for ex in examples:
        prompt, full = tokenizer.encode(format_prompt(ex)), tokenizer.encode(format_example(ex))
        if len(full) - 1 > block_size:
            raise ValueError(
                f"instruction_batches: an example needs {len(full) - 1} tokens, "
                f"more than block_size={block_size}"
            )
        x = torch.zeros(block_size, dtype=torch.long)
        y = torch.full((block_size,), -100, dtype=torch.long)
        x[: len(full) - 1] = full[:-1]
        y[len(prompt) - 1 : len(full) - 1] = full[len(prompt) :]
        xs.append(x)
        ys.append(y)
    x_all, y_all = torch.stack(xs), torch.stack(ys)
    gen = torch.Generator().manual_seed(seed)
    while True:
        pick = torch.randint(len(examples), (batch_size,), generator=gen)
        yield x_all[pick], y_all[pick]


@torch.no_grad()
def score_instructions(model, tokenizer: CharTokenizer, examples: list[dict[str, str]]) -> float:
    """Fraction of examples whose greedy answer (up to the first newline) is exactly right.

    Args:
        model: a :class:`labs.gpt.GPT` (anything with ``generate``).
        examples: from :func:`make_instructions`.
    """
    groups: dict[int, list[dict[str, str]]] = {}
    for ex in examples:  # prompts of equal length decode together in one batch
        groups.setdefault(len(format_prompt(ex)), []).append(ex)
    newline = tokenizer.stoi["\n"]
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    device = params[0].device if params else torch.device("cpu")
    correct = 0
    for group in groups.values():
        idx = torch.stack([tokenizer.encode(format_prompt(ex)) for ex in group]).to(device)
        longest = max(len(ex["output"]) for ex in group) + 1
        out = model.generate(idx, longest, temperature=0.0, stop_token=newline)
        for ex, row in zip(group, out[:, idx.shape[1] :]):
            answer = tokenizer.decode(row).split("\n")[0]
            correct += answer == ex["output"]
    return correct / len(examples)
