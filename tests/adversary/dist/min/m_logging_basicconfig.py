"""The usual per-rank logging set-up, logging.basicConfig with the rank in the format: under
torchrun every rank's lines carry its own rank; emulated, the logging module is shared by the
ranks, the first basicConfig (whichever rank gets there first) wins and every rank's lines carry that
rank's number (logged to stdout here)."""

import logging
import sys

import torch.distributed as dist

dist.init_process_group("gloo")
r = dist.get_rank()
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format=f"OUT rank{r}: %(message)s")
dist.barrier()
logging.getLogger("train").info("hello from rank %d", r)
sys.stdout.flush()
dist.destroy_process_group()
