"""The unseeded-RNG difference where it bites: FSDP2's fully_shard keeps each rank's own shard of
its own initialisation (no broadcast), so without torch.manual_seed the model under torchrun is
a patchwork of the ranks' different inits; emulated every rank drew the same init, so the
gathered weight equals rank 0's init."""

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
m = torch.nn.Linear(4, 8)  # no seed
init = m.weight.detach().clone()
dist.broadcast(init, 0)  # rank 0's init
fully_shard(m)
print("OUT full_weight_equals_rank0_init", torch.equal(m.weight.full_tensor(), init), flush=True)
dist.destroy_process_group()
