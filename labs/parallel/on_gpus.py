"""Run one of Part VIII's torchrun programs on this machine's GPUs: NCCL, one process per GPU.

The labs run their distributed code on emulated ranks (threads) on every machine. Where CUDA GPUs
are present, :func:`torchrun_on_gpus` also starts the real program the way a cluster job would,
``torchrun --standalone --nproc_per_node=<GPUs> -m <module>``; its ranks choose NCCL through
:func:`labs.dist.torchrun_backend` (one GPU per process). On one GPU that is one process; a
program that needs more ranks than there are GPUs is skipped with one line, as on a CPU.
"""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from labs.basics import device as device_lib

__all__ = ["torchrun_on_gpus"]

_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                  "MASTER_PORT", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")  # fmt: skip


def torchrun_on_gpus(
    module: str,
    *args: str,
    min_gpus: int = 1,
    max_gpus: int | None = None,
    timeout: float = 300,
) -> str:
    """Run ``python -m module *args`` under torchrun on ``min(GPUs, max_gpus)`` processes.

    Returns the program's standard output, or :func:`labs.basics.device.skip_line`'s line when
    this machine cannot run it (no CUDA GPU, no NCCL, fewer than ``min_gpus`` GPUs). Raises
    ``RuntimeError`` with torchrun's last output lines when the program fails.
    """
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    n = min(gpus, max_gpus) if max_gpus else gpus
    if reason := device_lib.nccl(max(1, min_gpus)):
        return device_lib.skip_line(f"{module} under torchrun with NCCL: {reason}")
    env = {k: v for k, v in os.environ.items() if k not in _TORCHRUN_VARS}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={n}", "-m", module, *args]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        raise RuntimeError(
            f"torchrun -m {module} on {n} GPU(s) failed (exit {out.returncode}):\n"
            f"{(out.stdout + out.stderr)[-3000:]}"
        )
    return out.stdout.strip()
