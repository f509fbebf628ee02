"""One training program for the tiny GPT, three ways to run it, with crash-safe checkpoints.

The same program (same seed, same data, same AdamW) runs

* ``single``: one process, a plain ``torch.optim.AdamW`` on the whole model;
* ``emulated``: ``N`` emulated ranks on threads (:mod:`labs.dist`), ZeRO stage 0-3 from
  :mod:`labs.parallel.zero` (stage 3 by default, the scheme FSDP implements);
* ``fsdp``: ``N`` real processes started by torchrun, PyTorch FSDP2 (``fully_shard`` on every
  block and on the root) over gloo on CPU, or NCCL with one GPU per process::

      python -m labs.parallel.fsdp.train --mode single --steps 10
      python -m labs.parallel.fsdp.train --mode emulated --world-size 2 --steps 10
      torchrun --standalone --nproc_per_node=2 -m labs.parallel.fsdp.train --steps 10
      torchrun --nnodes=2 --nproc_per_node=4 --node_rank=0 --master_addr=HOST \\
          --master_port=29500 -m labs.parallel.fsdp.train --steps 10           # and node_rank=1 on HOST 2

Every step uses the same global batch of ``batch_size`` windows of the corpus, chosen by the seed
and the step number alone; each rank trains on its ``batch_size / N`` rows, and gradients are
averaged, so all three runs follow the same loss curve up to float rounding.  Because the batch
depends only on the step, resuming needs nothing but the weights, Adam's moments and the step.

Checkpoints (:mod:`labs.training.checkpoint`): ``--ckpt DIR --save-at 5 [8 ...]`` writes after those
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
from typing import Any

from labs.parallel.fsdp.runs import run_emulated, run_fsdp, run_single
from labs.parallel.fsdp.setup import TrainConfig

# The pieces live in labs.parallel.fsdp.setup (configuration, data) and labs.parallel.fsdp.runs
# (the three runs); this module is the command line only.
__all__ = ["main"]


# ------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line entry point; see the module docstring. Prints the losses as JSON on rank 0."""
    ap = argparse.ArgumentParser(
        prog="python -m labs.parallel.fsdp.train", description=__doc__.split("\n")[0]
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
