"""FSDP2: fully_shard per layer and at the root, Adam, 3 steps, then the full weights."""

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
for layer in (model[0], model[2]):
    fully_shard(layer)
fully_shard(model)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
torch.manual_seed(rank)
for step in range(3):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"fsdp2 step {step} loss {loss.item():.5f}")
w = model[0].weight
print("local shard", tuple(w.to_local().shape), "of", tuple(w.shape))
print("full weight sum", round(w.full_tensor().sum().item(), 4))
dist.destroy_process_group()
