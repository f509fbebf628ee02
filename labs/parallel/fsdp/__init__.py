"""One FSDP training program for the tiny GPT, three ways to run it (Chapter 16).

* :mod:`labs.parallel.fsdp.setup` -- :class:`TrainConfig`, the global batch of a step and the rows
  of each rank (:func:`global_batch`, :func:`local_rows`);
* :mod:`labs.parallel.fsdp.fsdp2` -- :func:`run_fsdp`: the program, PyTorch FSDP2 (``fully_shard``)
  on one emulated rank, on N emulated ranks or under torchrun, and :func:`memory_ledger`;
* :mod:`labs.parallel.fsdp.runs` -- its references: :func:`run_single` (one process, no sharding)
  and :func:`run_emulated` (the book's ZeRO trainer on emulated ranks);
* :mod:`labs.parallel.fsdp.train` -- the command line
  (``python -m labs.parallel.fsdp.train``, or ``torchrun ... -m labs.parallel.fsdp.train``).
"""

from labs.parallel.fsdp.fsdp2 import memory_ledger, run_fsdp
from labs.parallel.fsdp.runs import run_emulated, run_single
from labs.parallel.fsdp.setup import TrainConfig, global_batch, local_rows

__all__ = [
    "TrainConfig",
    "global_batch",
    "local_rows",
    "run_single",
    "run_emulated",
    "run_fsdp",
    "memory_ledger",
]
