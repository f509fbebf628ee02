"""init_process_group reached through torch.distributed.distributed_c10d (as DeviceMesh and other
libraries call it) instead of the torch.distributed attribute: torchrun works; emulated hangs
(rank 0's TCPStore rendezvous waits for a rank that never gets its turn)."""

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

distributed_c10d.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print("OUT sum", t.item(), flush=True)
dist.destroy_process_group()
