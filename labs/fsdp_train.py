"""One training program for the tiny GPT, three ways to run it, with crash-safe checkpoints.

The same program (same seed, same data, same AdamW) runs

* ``single``: one process, a plain ``torch.optim.AdamW`` on the whole model;
* ``emulated``: ``N`` emulated ranks on threads (:mod:`labs.dist`), ZeRO stage 0-3 from
  :mod:`labs.zero` (stage 3 by default, the scheme FSDP implements);
* ``fsdp``: ``N`` real processes started by torchrun, PyTorch FSDP2 (``fully_shard`` on every
  block and on the root) over gloo on CPU, or NCCL with one GPU per process::

      python -m labs.fsdp_train --mode single --steps 10
      python -m labs.fsdp_train --mode emulated --world-size 2 --steps 10
      torchrun --standalone --nproc_per_node=2 -m labs.fsdp_train --steps 10
      torchrun --nnodes=2 --nproc_per_node=4 --node_rank=0 --master_addr=HOST \\
          --master_port=29500 -m labs.fsdp_train --steps 10           # and node_rank=1 on HOST 2

Every step uses the same global batch of ``batch_size`` windows of the corpus, chosen by the seed
and the step number alone; each rank trains on its ``batch_size / N`` rows, and gradients are
averaged, so all three runs follow the same loss curve up to float rounding.  Because the batch
depends only on the step, resuming needs nothing but the weights, Adam's moments and the step.

Checkpoints (:mod:`labs.checkpoint`): ``--ckpt DIR --save-at 5 [8 ...]`` writes after those
steps, as ``--ckpt-format full`` (rank 0 writes the unsharded state) or ``dcp`` (every process
writes its shards through ``torch.distributed.checkpoint``; fsdp mode only) or ``shards``
(emulated mode: one file per rank).  ``--resume`` continues from the newest checkpoint in
``DIR`` whatever its format.  The full format is shared by all modes: a run may stop under
torchrun and resume on threads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn as nn

from labs import checkpoint as ckpt
from labs import data, dist, gpt, zero

__all__ = ["TrainConfig", "global_batch", "run_single", "run_emulated", "run_fsdp", "main"]


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


# ------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line entry point; see the module docstring. Prints the losses as JSON on rank 0."""
    ap = argparse.ArgumentParser(
        prog="python -m labs.fsdp_train", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--mode", choices=["auto", "single", "emulated", "fsdp"], default="auto",
                    help="auto: fsdp under torchrun, single otherwise")  # fmt: skip
    ap.add_argument("--world-size", type=int, default=2, help="emulated ranks (emulated mode)")
    ap.add_argument("--stage", type=int, default=3, help="ZeRO stage (emulated mode)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=64)
    ap.add_argument("--ckpt", default=None, help="checkpoint directory")
    ap.add_argument("--save-at", type=int, nargs="*", default=[], help="steps after which to save")
    ap.add_argument("--ckpt-format", choices=["full", "dcp", "shards"], default="full")
    ap.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    ap.add_argument("--out", default=None, help="write the result as JSON here (rank 0)")
    a = ap.parse_args(argv)
    cfg = TrainConfig(
        steps=a.steps, batch_size=a.batch_size, seq_len=a.seq_len, lr=a.lr, seed=a.seed,
        n_layer=a.n_layer, n_embd=a.n_embd, save_at=a.save_at, ckpt_dir=a.ckpt,
        ckpt_format=a.ckpt_format, resume=a.resume,
    )  # fmt: skip
    mode = a.mode
    if mode == "auto":
        mode = "fsdp" if "RANK" in os.environ and "WORLD_SIZE" in os.environ else "single"
    if cfg.ckpt_format == "dcp" and mode != "fsdp":
        ap.error("--ckpt-format dcp needs torch.distributed: run under torchrun (fsdp mode)")
    if cfg.ckpt_format == "shards" and mode != "emulated":
        ap.error("--ckpt-format shards is the emulated ZeRO format: use --mode emulated")
    if mode == "single":
        res = run_single(cfg)
    elif mode == "emulated":
        res = run_emulated(cfg, a.world_size, a.stage)
    else:
        res = run_fsdp(cfg)
    if int(os.environ.get("RANK", "0")) == 0:
        text = json.dumps({"mode": mode, "start": res["start"], "losses": res["losses"]})
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
