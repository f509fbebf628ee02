"""init_process_group through the distributed_c10d module, as libraries call it."""

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

distributed_c10d.init_process_group("gloo")  # the module's name, as libraries call it
t = torch.ones(1)
dist.all_reduce(t)
print("distributed_c10d.init_process_group: sum", t.item())
dist.destroy_process_group()
