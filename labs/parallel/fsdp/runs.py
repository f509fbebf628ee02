"""The two references of the tiny GPT's training program (Chapter 16): one process with a plain
AdamW (:func:`run_single`), and the book's own ZeRO trainer on emulated ranks (:func:`run_emulated`,
the teaching implementation).  PyTorch's FSDP2, the program itself in every mode, is in
:mod:`labs.parallel.fsdp.fsdp2`.  Same seed, same data, same AdamW, so all loss curves agree up to
float rounding; the command line is in :mod:`labs.parallel.fsdp.train`, the configuration and the
data in :mod:`labs.parallel.fsdp.setup`.
"""

from __future__ import annotations

from typing import Any

import torch

from labs import dist, gpt
from labs.parallel import zero
from labs.parallel.fsdp.setup import (
    TrainConfig,
    _adam_state_by_name,
    _check_model_cfg,
    _checkpoint_meta,
    _load_adam_by_name,
    _resume_full,
    global_batch,
    local_rows,
)
from labs.training import checkpoint as ckpt

__all__ = ["run_single", "run_emulated"]


def run_single(cfg: TrainConfig) -> dict[str, Any]:
    """Train in this process, no sharding (the reference of every other run); returns ``{"start": first step run - 1, "losses": [...]}``."""
    model = gpt.GPT(cfg.model_config())
    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
    )
    start, state = _resume_full(cfg)
    if start and state is None:
        raise ckpt.CheckpointError(f"{cfg.ckpt_dir}: single mode resumes from 'full' checkpoints")
    if state is not None:
        ckpt.load_model_state(model, state["model"], str(ckpt.step_dir(cfg.ckpt_dir, start)))
        _load_adam_by_name(model, opt, state["optim"])
    losses = []
    for step in range(start + 1, cfg.steps + 1):
        x, y = global_batch(cfg, step)
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if cfg.ckpt_dir and step in cfg.save_at:
            full = {"model": model.state_dict(), "optim": _adam_state_by_name(model, opt)}
            ckpt.save_full(
                cfg.ckpt_dir, step, {**full, "step": step}, **_checkpoint_meta(cfg, step)
            )
    return {"start": start, "losses": losses}


# -------------------------------------------------------------------------------- emulated
def _emulated_rank(cfg: TrainConfig, stage: int) -> dict[str, Any]:
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = local_rows(cfg, rank, world)
    trainer = zero.ZeroTrainer(
        gpt.GPT(cfg.model_config()), stage, lr=cfg.lr, weight_decay=cfg.weight_decay
    )
    start = 0
    if cfg.resume and cfg.ckpt_dir and ckpt.latest_step(cfg.ckpt_dir) is not None:
        d, manifest = ckpt.verify(cfg.ckpt_dir)
        _check_model_cfg(cfg, manifest, str(d))
        start = manifest["step"]
        if manifest["format"] == "full":
            trainer.load_full_state(ckpt.load_full(cfg.ckpt_dir))
        elif manifest["format"] == "shards":
            shard = ckpt.load_shard(cfg.ckpt_dir, rank, world)
            trainer.load_shard_state(shard, str(d))
        else:
            raise ckpt.CheckpointError(
                f"{d}: a {manifest['format']!r} checkpoint needs torch.distributed; resume it "
                "under torchrun, or save a 'full' checkpoint"
            )
    losses = []
    for step in range(start + 1, cfg.steps + 1):
        x, y = global_batch(cfg, step)
        losses.append(trainer.step(x[rows], y[rows]))
        if cfg.ckpt_dir and step in cfg.save_at:
            meta = _checkpoint_meta(cfg, step)
            if cfg.ckpt_format == "shards":
                ckpt.save_shards(cfg.ckpt_dir, step, rank, world, trainer.shard_state(),
                                 dist.barrier, **meta)  # fmt: skip
            else:
                state = trainer.full_state()  # every rank takes part in the gathers
                if rank == 0:
                    ckpt.save_full(cfg.ckpt_dir, step, {**state, "step": step}, **meta)
                dist.barrier()
    trainer.close()
    return {"start": start, "losses": losses, "ledger": trainer.last_ledger, "peak": trainer.peak}


def run_emulated(cfg: TrainConfig, world_size: int, stage: int = 3) -> dict[str, Any]:
    """Train on ``world_size`` emulated ranks with ZeRO-``stage``; returns the global losses.

    Returns:
        ``{"start", "losses", "ledger", "peak"}``: losses averaged over ranks; ``ledger`` and
        ``peak`` are rank 0's model-state bytes after the last step and at their highest.
    """
    res = dist.launch(_emulated_rank, world_size, cfg, stage)
    losses = [sum(r["losses"][i] for r in res) / world_size for i in range(len(res[0]["losses"]))]
    return {**res[0], "losses": losses}
