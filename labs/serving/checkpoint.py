"""The served model's weights: train the tiny GPT, save it, load it back.

The service runs :mod:`labs.gpt`'s tiny GPT. Without a checkpoint it trains one for a few
seconds (seeded, so every start gives the same model); a checkpoint is a safetensors file of the
weights with the config as JSON beside it, so a service and its replicas load the same model::

    model = train_tiny(150)
    path = save_checkpoint(model, "tiny-gpt.safetensors")   # and tiny-gpt.json
    same = load_checkpoint(path)
"""

from __future__ import annotations

from pathlib import Path

from labs import gpt

__all__ = ["train_tiny", "save_checkpoint", "load_checkpoint"]


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
