"""DDP on a subgroup made by new_group, with a comm hook, beside plain collectives."""

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
group = dist.new_group(list(range(world)))
torch.manual_seed(1)
model = torch.nn.Linear(6, 3)
ddp = DDP(model, process_group=group)
ddp.register_comm_hook(group, default_hooks.allreduce_hook)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
torch.manual_seed(10 + rank)
for step in range(2):
    loss = ddp(torch.randn(5, 6)).pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"group ddp step {step} bias {[round(v, 5) for v in model.bias.tolist()]}")
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t, group=group)
print("group all_reduce", t.item(), "group size", dist.get_world_size(group))
dist.destroy_process_group()
