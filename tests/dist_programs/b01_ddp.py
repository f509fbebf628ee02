"""DistributedDataParallel: small buckets, gradient_as_bucket_view, no_sync accumulation."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
torch.manual_seed(rank)  # DDP broadcasts rank 0's weights: the models start equal anyway
ddp = DDP(model, bucket_cap_mb=0.0005, gradient_as_bucket_view=True)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(4, 8)
    loss = ddp(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"ddp step {step} loss {loss.item():.5f} weight sum {model[0].weight.sum().item():.5f}")
opt.zero_grad()
with ddp.no_sync():  # local gradients only
    ddp(torch.randn(4, 8)).sum().backward()
print("no_sync local grad", round(model[2].weight.grad.sum().item(), 4))
ddp(torch.randn(4, 8)).sum().backward()  # this backward all-reduces the accumulated gradients
print("synced grad", round(model[2].weight.grad.sum().item(), 4))
dist.destroy_process_group()
