"""FSDP2 on 4 ranks with bfloat16 parameters and gradients: the reduce-scatters sum bf16
values, so the result depends on gloo's order of summation; the full weights after two steps
are printed to the last bit."""

import hashlib

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
model = model.to(torch.bfloat16)
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
for layer in (model[0], model[2]):
    fully_shard(layer, mp_policy=policy)
fully_shard(model, mp_policy=policy)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
torch.manual_seed(10 + rank)
for _ in range(2):
    x = torch.randn(8, 16, dtype=torch.bfloat16) * (1 + 3 * rank)  # gradients of mixed sizes
    model(x).float().pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
full = torch.cat([p.full_tensor().detach().float().reshape(-1) for p in model.parameters()])
print(f"fsdp2 bf16 checksum {full.sum().item():.6f}")
print("fsdp2 bf16 bytes", hashlib.sha1(full.numpy().tobytes()).hexdigest()[:12])
dist.destroy_process_group()
