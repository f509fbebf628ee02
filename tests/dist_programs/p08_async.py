"""async_op=True handles: overlap two all-reduces, then wait."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
a = torch.ones(4) * rank
b = torch.arange(4.0) * (rank + 1)
wa = dist.all_reduce(a, async_op=True)
wb = dist.all_reduce(b, op=dist.ReduceOp.MAX, async_op=True)
wa.wait()
wb.wait()
print("async sums", a.tolist(), "async max", b.tolist())
w = dist.barrier(async_op=True)
w.wait()
out = [torch.empty(1) for _ in range(world)]
dist.all_gather(out, torch.tensor([float(rank)]), async_op=True).wait()
print("async all_gather", [o.item() for o in out])
dist.destroy_process_group()
