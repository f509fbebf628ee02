"""The tiny GPT's training program with PyTorch's FSDP2 (``fully_shard``), the same code in every
mode (Chapter 16):

* **single**: one emulated rank (``run_fsdp(cfg, world_size=1)``);
* **emulated**: ``N`` emulated ranks, threads of this process whose ``torch.distributed`` process
  group is :mod:`labs.dist.backend` (``run_fsdp(cfg, world_size=N)``): FSDP2's all-gathers and
  reduce-scatters appear in :func:`labs.dist.last_trace`;
* **torchrun**: one process per rank, gloo on CPU or NCCL with one GPU per process
  (``run_fsdp(cfg)`` in each process).

Every rank shards every transformer block and the root with ``fully_shard``, trains on its rows of
the step's global batch (:func:`~labs.parallel.fsdp.setup.local_rows`) with AdamW, and reports the
loss averaged over ranks, so all modes follow the plain one-process run
(:func:`~labs.parallel.fsdp.runs.run_single`) up to float rounding.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch
import torch.nn as nn

from labs import dist, gpt
from labs.parallel.fsdp.setup import (
    TrainConfig,
    _check_model_cfg,
    _checkpoint_meta,
    global_batch,
    local_rows,
)
from labs.training import checkpoint as ckpt

__all__ = ["run_fsdp", "memory_ledger"]


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


def memory_ledger(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of model state this rank holds (its shards), counted as
    :meth:`labs.parallel.zero.ZeroTrainer.ledger` counts them: ``weights``, ``gradients``,
    ``optimizer`` (AdamW's two moments; step counters left out), ``total``."""

    def local(t: Any) -> Any:
        return t.to_local() if hasattr(t, "to_local") else t

    def nbytes(ts: list[Any]) -> int:
        return sum(local(t).numel() * local(t).element_size() for t in ts if t is not None)

    params = list(model.parameters())
    w = nbytes(params)
    g = nbytes([p.grad for p in params])
    o = nbytes([v for st in opt.state.values() for v in st.values()
                if torch.is_tensor(v) and v.dim() > 0])  # fmt: skip
    return {"weights": w, "gradients": g, "optimizer": o, "total": w + g + o}


def _resume(cfg: TrainConfig, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    import torch.distributed.checkpoint.state_dict as dsd

    if not (cfg.resume and cfg.ckpt_dir and ckpt.latest_step(cfg.ckpt_dir) is not None):
        return 0
    d, manifest = ckpt.verify(cfg.ckpt_dir)
    _check_model_cfg(cfg, manifest, str(d))
    if manifest["format"] == "full":
        _fsdp_load_full(model, opt, ckpt.load_full(cfg.ckpt_dir), str(d))
    elif manifest["format"] == "dcp":
        msd, osd = dsd.get_state_dict(model, opt)
        state = {"model": msd, "optim": osd}
        ckpt.load_dcp(cfg.ckpt_dir, state)
        dsd.set_state_dict(model, opt, model_state_dict=state["model"],
                           optim_state_dict=state["optim"])  # fmt: skip
    else:
        raise ckpt.CheckpointError(f"{d}: fsdp mode resumes from 'full' or 'dcp' checkpoints")
    return manifest["step"]


def _save(cfg: TrainConfig, step: int, model: nn.Module, opt: torch.optim.Optimizer) -> None:
    import torch.distributed as tdist
    import torch.distributed.checkpoint.state_dict as dsd

    meta = _checkpoint_meta(cfg, step)
    if cfg.ckpt_format == "dcp":
        msd, osd = dsd.get_state_dict(model, opt)
        ckpt.save_dcp(cfg.ckpt_dir, step, {"model": msd, "optim": osd}, **meta)
    else:
        state = _fsdp_full_state(model, opt)
        if tdist.get_rank() == 0:
            ckpt.save_full(cfg.ckpt_dir, step, {**state, "step": step}, **meta)
        tdist.barrier()


def _fsdp_rank(cfg: TrainConfig) -> dict[str, Any]:
    """One rank of the FSDP2 program (a torchrun process or an emulated rank)."""
    import torch.distributed as tdist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    backend = "gloo" if dist.is_emulated() else dist.torchrun_backend()
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else None
    # labs.dist's init_process_group: torch's own under torchrun, the emulated backend on threads
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=120))
    try:
        rank, world = tdist.get_rank(), tdist.get_world_size()
        rows = local_rows(cfg, rank, world)
        model = gpt.GPT(cfg.model_config()).to(device or "cpu")
        # the mesh on the device the process group serves (emulated ranks: CPU, GPUs or not)
        mesh = init_device_mesh("cuda" if device is not None else "cpu", (world,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
        )
        start = _resume(cfg, model, opt)
        losses, ledger = [], {}
        for step in range(start + 1, cfg.steps + 1):
            x, y = global_batch(cfg, step)
            x, y = x[rows], y[rows]
            if device is not None:
                x, y = x.to(device), y.to(device)
            loss = model.loss(x, y)
            loss.backward()
            opt.step()
            ledger = memory_ledger(model, opt)
            opt.zero_grad(set_to_none=True)
            value = loss.detach().reshape(1).clone()
            tdist.all_reduce(value)
            losses.append(float(value) / world)
            if cfg.ckpt_dir and step in cfg.save_at:
                _save(cfg, step, model, opt)
        return {"start": start, "losses": losses, "world_size": world, "ledger": ledger}
    finally:
        dist.destroy_process_group()


def run_fsdp(cfg: TrainConfig, world_size: int | None = None) -> dict[str, Any]:
    """Train the tiny GPT with FSDP2 (``fully_shard`` on every block and the root).

    Args:
        cfg: the run (steps, batch, model size, checkpoints).
        world_size: ``None`` in a torchrun process (or an emulated rank): run this process's
            rank.  Otherwise the number of emulated ranks to start in this process (1: the
            single mode).

    Returns:
        ``{"start", "losses", "world_size", "ledger"}``: the first step run minus one, the loss
        of every step averaged over ranks, the number of ranks and this rank's (rank 0's when
        emulated) model-state bytes after the last optimizer step (:func:`memory_ledger`).
        Emulated runs add ``"ledgers"``, one per rank.
    """
    if world_size is None or dist.is_emulated() or "RANK" in os.environ:
        return _fsdp_rank(cfg)
    res = dist.launch(_fsdp_rank, world_size, cfg)
    return {**res[0], "ledgers": [r["ledger"] for r in res]}
