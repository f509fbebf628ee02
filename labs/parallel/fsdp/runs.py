"""The tiny GPT's training program run three ways (Chapter 16): one process, emulated ZeRO ranks,
and PyTorch FSDP2 under torchrun.  Same seed, same data, same AdamW, so the three loss curves agree
up to float rounding; the command line is in :mod:`labs.parallel.fsdp.train`, the configuration and the data
in :mod:`labs.parallel.fsdp.setup`.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn as nn

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

__all__ = ["run_single", "run_emulated", "run_fsdp"]


def run_single(cfg: TrainConfig) -> dict[str, Any]:
    """Train in this process; returns ``{"start": first step run - 1, "losses": [...]}``."""
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


# ------------------------------------------------------------------------------------ fsdp
def _fsdp_full_state(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, Any]:
    """Gather the unsharded state on every process (DTensor.full_tensor is an all-gather)."""
    names = {p: n for n, p in model.named_parameters()}
    model_sd = {}
    for k, v in model.state_dict().items():
        model_sd[k] = (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().cpu()
    optim = {}
    for p, s in opt.state.items():
        optim[names[p]] = {
            "exp_avg": s["exp_avg"].full_tensor().cpu(),
            "exp_avg_sq": s["exp_avg_sq"].full_tensor().cpu(),
            "step": float(s["step"]),
        }
    return {"model": model_sd, "optim": optim}


@torch.no_grad()
def _fsdp_load_full(model: nn.Module, opt: torch.optim.Optimizer, state: dict, src: str) -> None:
    """Shard a full state onto this process's DTensors (each rank keeps its own slice)."""
    from torch.distributed.tensor import distribute_tensor

    own = dict(model.named_parameters())
    shapes = {n: tuple(p.shape) for n, p in own.items()}
    bad = [
        f"{n}: checkpoint {tuple(state['model'][n].shape)}, model {s}"
        for n, s in shapes.items()
        if n in state["model"] and tuple(state["model"][n].shape) != s
    ]
    missing = [n for n in shapes if n not in state["model"]]
    if bad or missing:
        raise ckpt.CheckpointError(
            f"{src}: does not fit this model -- {bad[:3]} missing {missing[:3]} (nothing loaded)"
        )
    for n, p in own.items():
        full = state["model"][n].to(p.device)
        p.to_local().copy_(distribute_tensor(full, p.device_mesh, p.placements).to_local())
        if n in state["optim"]:
            o = state["optim"][n]
            opt.state[p] = {
                "step": torch.tensor(float(o["step"])),
                "exp_avg": distribute_tensor(
                    o["exp_avg"].to(p.device), p.device_mesh, p.placements
                ),
                "exp_avg_sq": distribute_tensor(
                    o["exp_avg_sq"].to(p.device), p.device_mesh, p.placements
                ),
            }


def run_fsdp(cfg: TrainConfig) -> dict[str, Any]:
    """Train as one process of a torchrun job with FSDP2; returns the global losses on every rank."""
    import datetime

    import torch.distributed as tdist
    import torch.distributed.checkpoint.state_dict as dsd
    from torch.distributed.fsdp import fully_shard

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else None
    tdist.init_process_group(backend, timeout=datetime.timedelta(seconds=120))
    try:
        rank, world = tdist.get_rank(), tdist.get_world_size()
        rows = local_rows(cfg, rank, world)
        model = gpt.GPT(cfg.model_config()).to(device or "cpu")
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        opt = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
        )
        start = 0
        if cfg.resume and cfg.ckpt_dir and ckpt.latest_step(cfg.ckpt_dir) is not None:
            d, manifest = ckpt.verify(cfg.ckpt_dir)
            _check_model_cfg(cfg, manifest, str(d))
            start = manifest["step"]
            if manifest["format"] == "full":
                _fsdp_load_full(model, opt, ckpt.load_full(cfg.ckpt_dir), str(d))
            elif manifest["format"] == "dcp":
                msd, osd = dsd.get_state_dict(model, opt)
                state = {"model": msd, "optim": osd}
                ckpt.load_dcp(cfg.ckpt_dir, state)
                dsd.set_state_dict(model, opt, model_state_dict=state["model"],
                                   optim_state_dict=state["optim"])  # fmt: skip
            else:
                raise ckpt.CheckpointError(
                    f"{d}: fsdp mode resumes from 'full' or 'dcp' checkpoints"
                )
        losses = []
        for step in range(start + 1, cfg.steps + 1):
            x, y = global_batch(cfg, step)
            x, y = x[rows], y[rows]
            if device is not None:
                x, y = x.to(device), y.to(device)
            loss = model.loss(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            value = loss.detach().reshape(1).clone()
            tdist.all_reduce(value)
            losses.append(float(value) / world)
            if cfg.ckpt_dir and step in cfg.save_at:
                meta = _checkpoint_meta(cfg, step)
                if cfg.ckpt_format == "dcp":
                    msd, osd = dsd.get_state_dict(model, opt)
                    ckpt.save_dcp(cfg.ckpt_dir, step, {"model": msd, "optim": osd}, **meta)
                else:
                    state = _fsdp_full_state(model, opt)
                    if rank == 0:
                        ckpt.save_full(cfg.ckpt_dir, step, {**state, "step": step}, **meta)
                    tdist.barrier()
        return {"start": start, "losses": losses, "world_size": world}
    finally:
        tdist.destroy_process_group()
