"""Rooted collectives: broadcast, scatter and gather with None / [] on the other ranks."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
b = torch.tensor([rank, rank])
dist.broadcast(b, src=2)
print("broadcast from 2", b.tolist())
t = torch.empty(2)
dist.scatter(t, [torch.full((2,), float(i)) for i in range(world)] if rank == 0 else [], src=0)
print("scatter", t.tolist())
t2 = torch.empty(1)
dist.scatter(t2, [torch.tensor([i * 2.0]) for i in range(world)] if rank == 3 else None, src=3)
print("scatter from 3", t2.item())
g = [torch.empty(1) for _ in range(world)] if rank == 1 else []
dist.gather(torch.tensor([rank * 1.5]), g, dst=1)
print("gather", [x.item() for x in g])
dist.destroy_process_group()
