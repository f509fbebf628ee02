"""One training program for the tiny GPT, three ways to run it, with crash-safe checkpoints.

The same program (same seed, same data, same AdamW, PyTorch FSDP2: ``fully_shard`` on every
block and on the root, :mod:`labs.parallel.fsdp.fsdp2`) runs

* ``single``: one emulated rank in this process;
* ``emulated``: ``N`` emulated ranks on threads, their process group the emulated backend of
  :mod:`labs.dist` (``--impl zero --stage S``: the book's ZeRO trainer of
  :mod:`labs.parallel.zero` instead, the teaching implementation; ``--impl plain``: one process,
  plain AdamW, no sharding, the reference);
* ``fsdp``: ``N`` real processes started by torchrun, over gloo on CPU, or NCCL with one GPU
  per process::

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
writes its shards through ``torch.distributed.checkpoint``, also on emulated ranks) or
``shards`` (``--impl zero``: one file per rank).  ``--resume`` continues from the newest checkpoint in
``DIR`` whatever its format.  The full format is shared by all modes: a run may stop under
torchrun and resume on threads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from labs.parallel.fsdp.fsdp2 import run_fsdp
from labs.parallel.fsdp.runs import run_emulated, run_single
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
    ap.add_argument("--impl", choices=["fsdp2", "zero", "plain"], default="fsdp2",
                    help="fsdp2 (every mode), zero (the book's ZeRO, emulated mode), plain")  # fmt: skip
    ap.add_argument("--stage", type=int, default=3, help="ZeRO stage (--impl zero)")
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
    if a.impl == "zero" and mode != "emulated":
        ap.error("--impl zero runs on emulated ranks: use --mode emulated")
    if cfg.ckpt_format == "dcp" and a.impl != "fsdp2":
        ap.error("--ckpt-format dcp is written by FSDP2: leave --impl out")
    if cfg.ckpt_format == "shards" and a.impl != "zero":
        ap.error("--ckpt-format shards is the emulated ZeRO format: use --impl zero")
    if a.impl == "plain":
        res = run_single(cfg)
    elif a.impl == "zero":
        res = run_emulated(cfg, a.world_size, a.stage)
    elif mode == "fsdp":
        res = run_fsdp(cfg)
    else:
        res = run_fsdp(cfg, 1 if mode == "single" else a.world_size)
    if int(os.environ.get("RANK", "0")) == 0:
        text = json.dumps({"mode": mode, "impl": a.impl, "start": res["start"],
                           "losses": res["losses"]})  # fmt: skip
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
