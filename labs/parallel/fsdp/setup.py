"""What the training program of :mod:`labs.parallel.fsdp.train` shares between its three ways to run.

:class:`TrainConfig` (model size, steps, optimizer, checkpoints), the data (:func:`global_batch`:
the same global batch for a given seed and step in every mode; :func:`local_rows`: a rank's rows of
it) and the helpers that read and write AdamW's state by parameter name for checkpoints.  The runs
themselves are in :mod:`labs.parallel.fsdp.runs`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn as nn

from labs import data, gpt
from labs.training import checkpoint as ckpt

__all__ = ["TrainConfig", "global_batch", "local_rows"]


@dataclass
class TrainConfig:
    """What to train and for how long.  ``steps`` is the last step (1-based) to reach."""

    steps: int = 10
    batch_size: int = 8
    seq_len: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.0
    seed: int = 0
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    save_at: list[int] = field(default_factory=list)
    ckpt_dir: str | None = None
    ckpt_format: str = "full"
    resume: bool = False

    def model_config(self) -> gpt.GPTConfig:
        return gpt.GPTConfig(
            block_size=self.seq_len,
            n_layer=self.n_layer,
            n_head=self.n_head,
            n_embd=self.n_embd,
            seed=self.seed,
        )


_IDS: torch.Tensor | None = None


def _corpus_ids() -> torch.Tensor:
    global _IDS
    if _IDS is None:
        _IDS = data.CharTokenizer().encode(data.load_corpus())
    return _IDS


def global_batch(cfg: TrainConfig, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step`` (1-based): ``(x, y)`` of shape (batch_size, seq_len), int64.

    Depends only on ``cfg.seed`` and ``step``, so a resumed run sees the same data.
    """
    ids = _corpus_ids()
    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    starts = torch.randint(len(ids) - cfg.seq_len - 1, (cfg.batch_size, 1), generator=gen)
    pos = starts + torch.arange(cfg.seq_len)
    return ids[pos], ids[pos + 1]


def local_rows(cfg: TrainConfig, rank: int, world: int) -> slice:
    """The rows of the global batch that ``rank`` trains on."""
    if cfg.batch_size % world:
        raise ValueError(
            f"batch_size={cfg.batch_size} is not divisible by the world size {world}; every rank "
            "needs the same number of rows for the average of the gradients to be the global one"
        )
    b = cfg.batch_size // world
    return slice(rank * b, (rank + 1) * b)


def _checkpoint_meta(cfg: TrainConfig, step: int) -> dict[str, Any]:
    return {"config": {k: v for k, v in asdict(cfg).items() if k.startswith(("n_", "seq"))}}


def _check_model_cfg(cfg: TrainConfig, manifest: dict, path: str) -> None:
    want = _checkpoint_meta(cfg, 0)["config"]
    got = manifest.get("config", {})
    if got and got != want:
        diff = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
        raise ckpt.CheckpointError(
            f"{path}: saved for model {got}, this run builds {want} (checkpoint vs run: {diff}); "
            "nothing was loaded"
        )


# ----------------------------------------------------------------------------------- single
def _adam_state_by_name(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, dict]:
    names = {p: n for n, p in model.named_parameters()}
    return {
        names[p]: {
            "exp_avg": s["exp_avg"].clone(),
            "exp_avg_sq": s["exp_avg_sq"].clone(),
            "step": float(s["step"]),
        }  # fmt: skip
        for p, s in opt.state.items()
    }


def _load_adam_by_name(model: nn.Module, opt: torch.optim.Optimizer, optim: dict) -> None:
    for name, p in model.named_parameters():
        if name in optim:
            opt.state[p] = {
                "step": torch.tensor(float(optim[name]["step"])),
                "exp_avg": optim[name]["exp_avg"].clone(),
                "exp_avg_sq": optim[name]["exp_avg_sq"].clone(),
            }


def _resume_full(cfg: TrainConfig) -> tuple[int, dict | None]:
    if not (cfg.resume and cfg.ckpt_dir and ckpt.latest_step(cfg.ckpt_dir) is not None):
        return 0, None
    d, manifest = ckpt.verify(cfg.ckpt_dir)
    _check_model_cfg(cfg, manifest, str(d))
    return manifest["step"], (
        ckpt.load_full(cfg.ckpt_dir) if manifest["format"] == "full" else None
    )
