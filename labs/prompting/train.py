"""Train the tiny GPT of :mod:`labs.gpt` on the in-context task family of
:mod:`labs.prompting.tasks`, and save or load the small checkpoint the book ships.

Run ``python -m labs.prompting.train`` to regenerate ``labs/prompting/icl_gpt.pt`` (seeded and
deterministic on one CPU thread; a few minutes on a laptop core). The chapter loads the file
when it is there and trains the model itself when it is not.
"""

from __future__ import annotations

import random
from importlib import resources
from pathlib import Path

import torch

from labs import data, gpt
from labs.prompting import tasks
from labs.training import loop

__all__ = [
    "CONFIG",
    "TRAIN",
    "encode_example",
    "training_batch",
    "train_icl",
    "load_or_train",
    "CHECKPOINT",
]

CONFIG = gpt.GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=72, seed=0)
"""Model size: 2 blocks, width 64, 72-character context (six shots plus an instruction)."""

TRAIN = {
    "steps": 4000,
    "batch_size": 32,
    "lr": 3e-3,
    "max_shots": 6,
    "noise": 0.15,
    "p_instruction": 0.3,
    "seed": 0,
}
"""Training recipe: shots uniform in 0..max_shots, a fraction ``noise`` of examples solved with
the wrong task, an instruction on a fraction ``p_instruction`` of prompts."""

CHECKPOINT = "icl_gpt.pt"
_TOK = data.CharTokenizer()


def encode_example(prompt: tasks.Prompt, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets (both (block_size,) int64) of one training sequence.

    Targets are -100 everywhere except on the characters of every *output* and its end marker:
    inputs are random letters no model can predict, so they carry no loss.
    """
    text = tasks.render(prompt) + prompt.answer + tasks.DEFAULT.end
    learn = [False] * len(text)
    pos = len(f"{prompt.instruction}{tasks.DEFAULT.colon}") if prompt.instruction else 0
    for x, y in [*prompt.examples, (prompt.query, prompt.answer)]:
        pos += len(x) + len(tasks.DEFAULT.arrow)
        for i in range(pos, pos + len(y) + len(tasks.DEFAULT.end)):
            learn[i] = True
        pos += len(y) + len(tasks.DEFAULT.end)
    ids = _TOK.encode(text)
    if len(ids) - 1 > block_size:
        raise ValueError(f"encode_example: {len(ids)} characters exceed block_size={block_size}")
    x = torch.zeros(block_size, dtype=torch.long)
    y = torch.full((block_size,), -100, dtype=torch.long)
    x[: len(ids) - 1] = ids[:-1]
    keep = torch.tensor(learn[1:])
    y[: len(ids) - 1] = torch.where(keep, ids[1:], torch.full_like(ids[1:], -100))
    return x, y


def training_batch(
    rng: random.Random,
    batch_size: int,
    block_size: int,
    max_shots: int,
    noise: float,
    p_instruction: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch (B, block_size) of random prompts of the task family."""
    pairs = [
        encode_example(
            tasks.sample_prompt(
                rng,
                rng.randint(0, max_shots),
                noise=noise,
                instruction=rng.random() < p_instruction,
            ),
            block_size,
        )
        for _ in range(batch_size)
    ]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def train_icl(config: gpt.GPTConfig = CONFIG, **overrides) -> tuple[gpt.GPT, list[float]]:
    """Train a GPT on the task family with the book's training loop; deterministic.

    :func:`labs.training.loop.train` runs the steps (AdamW, linear warm-up over the first 5 % of
    the steps, then a cosine down to zero, gradients clipped at norm 1); this function only supplies
    the model, the optimiser settings and an endless stream of freshly sampled prompt batches.

    Returns:
        ``(model, losses)``: the trained model in eval mode and the loss of every step (nats per
        target character).
    """
    hp = {**TRAIN, **overrides}
    torch.manual_seed(hp["seed"])
    rng = random.Random(hp["seed"])
    model = gpt.GPT(config)
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], weight_decay=0.01)

    def batches():
        while True:
            yield training_batch(
                rng,
                hp["batch_size"],
                config.block_size,
                hp["max_shots"],
                hp["noise"],
                hp["p_instruction"],
            )

    steps = hp["steps"]
    losses = loop.train(
        model,
        batches(),
        steps=steps,
        lr=hp["lr"],
        warmup_steps=max(1, steps // 20),
        final_lr_ratio=0.0,
        grad_clip=1.0,
        optimizer=opt,
    )
    model.eval()
    return model, losses


def load_or_train(path: str | Path | None = None) -> tuple[gpt.GPT, str]:
    """The shipped checkpoint if it exists, else a freshly trained model.

    Returns:
        ``(model, source)`` with ``source`` "checkpoint" or "trained".
    """
    path = Path(path) if path else Path(str(resources.files("labs.prompting").joinpath(CHECKPOINT)))
    model = gpt.GPT(CONFIG)
    if path.exists():
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        model.eval()
        return model, "checkpoint"
    model, _ = train_icl()
    return model, "trained"


def main() -> None:
    torch.set_num_threads(1)
    model, losses = train_icl()
    out = Path(__file__).with_name(CHECKPOINT)
    state = {k: v.to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    torch.save(state, out)
    print(
        f"trained {TRAIN['steps']} steps, final loss {sum(losses[-50:]) / 50:.4f}; "
        f"wrote {out.name} ({out.stat().st_size / 1024:.0f} KiB)"
    )


if __name__ == "__main__":
    main()
