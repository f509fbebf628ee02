"""The model behind the service: load or train the tiny GPT, then generate for a batch of requests.

Requests in one batch have different prompt lengths. The GPT has no padding mask, but its
attention is causal, so *right* padding is harmless: the logits at a row's last real position
never look at the padding after it. One forward pass therefore serves every row of a batch::

    engine = Engine.load(None, train_steps=150)      # a few seconds of seeded training
    reqs = [GenRequest(engine.encode("The GPU"), max_new_tokens=8)]
    engine.run(reqs)                                 # fills reqs[0].output (token ids)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from labs import data, gpt
from labs.inference.sampling import sample

__all__ = ["GenRequest", "Engine", "train_tiny", "save_checkpoint", "load_checkpoint"]


@dataclass
class GenRequest:
    """One generation request as the engine sees it.

    Attributes:
        prompt: token ids, shape (T,), int64, T >= 1.
        max_new_tokens: how many tokens to generate at most.
        temperature: 0 for greedy decoding, otherwise the softmax temperature.
        seed: seed of this request's sampler (ignored when greedy).
        on_token: called as ``on_token(token_id)`` from the engine's thread after every token.
        cancelled: set it (from any thread) to stop this request at the next step.
        output: the generated token ids, filled in by :meth:`Engine.run`.
    """

    prompt: torch.Tensor
    max_new_tokens: int
    temperature: float = 0.0
    seed: int = 0
    on_token: Callable[[int], None] | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    output: list[int] = field(default_factory=list)


def train_tiny(steps: int = 150, seed: int = 0, block_size: int = 64) -> gpt.GPT:
    """Train the tiny GPT of :mod:`labs.gpt` for ``steps`` steps (seeded; seconds on a CPU)."""
    cfg = gpt.GPTConfig(block_size=block_size, seed=seed)
    model, _ = gpt.pretrain(cfg, steps=steps, batch_size=16, seed=seed)
    return model.eval()


def save_checkpoint(model: gpt.GPT, path: str | Path) -> Path:
    """Write the weights (safetensors) and the config (JSON) next to each other; return ``path``."""
    import dataclasses
    import json

    from safetensors.torch import save_model

    path = Path(path)
    save_model(model, str(path))
    path.with_suffix(".json").write_text(json.dumps(dataclasses.asdict(model.config)))
    return path


def load_checkpoint(path: str | Path) -> gpt.GPT:
    """Inverse of :func:`save_checkpoint`."""
    import json

    from safetensors.torch import load_model

    path = Path(path)
    cfg_path = path.with_suffix(".json")
    if not path.exists() or not cfg_path.exists():
        raise FileNotFoundError(
            f"load_checkpoint: expected {path.name} and {cfg_path.name} (written by "
            "save_checkpoint); one of them is missing"
        )
    model = gpt.GPT(gpt.GPTConfig(**json.loads(cfg_path.read_text())))
    load_model(model, str(path))
    return model.eval()


class Engine:
    """A model and a tokenizer, and :meth:`run`, which serves a batch of requests."""

    def __init__(self, model: gpt.GPT, tokenizer: data.CharTokenizer | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer or data.CharTokenizer()
        self.block_size = model.config.block_size
        self.forward_passes = 0  # how many batched forward passes have run (for metrics)

    @classmethod
    def load(cls, checkpoint: str | Path | None = None, train_steps: int = 150) -> Engine:
        """From a checkpoint written by :func:`save_checkpoint`, or train one quickly."""
        model = load_checkpoint(checkpoint) if checkpoint else train_tiny(train_steps)
        return cls(model)

    def encode(self, text: str) -> torch.Tensor:
        """Token ids (T,) of ``text``; ValueError names a character outside the vocabulary."""
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    @torch.no_grad()
    def step(self, contexts: list[torch.Tensor]) -> torch.Tensor:
        """Next-token logits of each context: list of (T_i,) ids -> (B, vocab) float32."""
        lengths = torch.tensor([len(c) for c in contexts])
        x = torch.zeros(len(contexts), int(lengths.max()), dtype=torch.long)
        for i, c in enumerate(contexts):  # right padding: causal attention never sees it
            x[i, : len(c)] = c
        logits = self.model(x)
        self.forward_passes += 1
        return logits[torch.arange(len(contexts)), lengths - 1].float()

    def run(self, requests: list[GenRequest]) -> list[GenRequest]:
        """Generate for every request together, one token per request per forward pass.

        A request leaves the batch when it has its ``max_new_tokens`` or is cancelled; the loop
        ends when none is left. Runs in the caller's thread (the server uses a worker thread).
        """
        gens = [torch.Generator().manual_seed(r.seed) for r in requests]
        seqs = [r.prompt.clone() for r in requests]
        while True:
            active = [
                i
                for i, r in enumerate(requests)
                if len(r.output) < r.max_new_tokens and not r.cancelled.is_set()
            ]
            if not active:
                return requests
            logits = self.step([seqs[i][-self.block_size :] for i in active])
            for row, i in enumerate(active):
                r = requests[i]
                nxt = int(sample(logits[row : row + 1], r.temperature, generator=gens[i])[0])
                seqs[i] = torch.cat([seqs[i], torch.tensor([nxt])])
                r.output.append(nxt)
                if r.on_token is not None:
                    r.on_token(nxt)
