"""A program that builds its own TCPStore from torchrun's MASTER_ADDR/MASTER_PORT and passes it
to init_process_group (a documented init form)."""

import datetime
import os

import torch
import torch.distributed as dist

r, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1, n,
                      is_master=r == 0, timeout=datetime.timedelta(seconds=60))  # fmt: skip
dist.init_process_group("gloo", store=store, rank=r, world_size=n)
t = torch.ones(1)
dist.all_reduce(t)
print("own TCPStore: sum", t.item())
dist.destroy_process_group()
