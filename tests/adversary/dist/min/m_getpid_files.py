"""Per-process file names from os.getpid() (a common way to keep ranks' scratch files apart):
distinct per rank under torchrun; emulated every rank has the same pid, so they share one file."""

import os

import torch.distributed as dist

dist.init_process_group("gloo")
pids = [None] * dist.get_world_size()
dist.all_gather_object(pids, os.getpid())
print("OUT distinct_pids", len(set(pids)) == len(pids), flush=True)
dist.destroy_process_group()
