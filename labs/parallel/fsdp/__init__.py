"""One FSDP training program for the tiny GPT, three ways to run it (Chapter 16).

* :mod:`labs.parallel.fsdp.setup` -- :class:`TrainConfig`, the global batch of a step and the rows
  of each rank (:func:`global_batch`, :func:`local_rows`);
* :mod:`labs.parallel.fsdp.runs` -- :func:`run_single` (one process), :func:`run_emulated` (ZeRO
  on emulated ranks) and :func:`run_fsdp` (PyTorch FSDP2 under torchrun);
* :mod:`labs.parallel.fsdp.train` -- the command line
  (``python -m labs.parallel.fsdp.train``, or ``torchrun ... -m labs.parallel.fsdp.train``).
"""

from labs.parallel.fsdp.runs import run_emulated, run_fsdp, run_single
from labs.parallel.fsdp.setup import TrainConfig, global_batch, local_rows

__all__ = ["TrainConfig", "global_batch", "local_rows", "run_single", "run_emulated", "run_fsdp"]
