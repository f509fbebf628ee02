"""Reduce ops (arithmetic and bitwise) and the tensor forms of gather / reduce-scatter."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
for name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
    x = torch.tensor([rank + 1, 6 - rank, 1 << rank], dtype=torch.int64)
    dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
    print(name, x.tolist())
r = torch.tensor([float(rank)])
dist.reduce(r, dst=1, op=dist.ReduceOp.MAX)
if rank == 1:
    print("reduce max on dst", r.item())
inp = torch.arange(world * 2, dtype=torch.float32) * (rank + 1)
out = torch.empty(2)
dist.reduce_scatter_tensor(out, inp)
print("reduce_scatter_tensor", out.tolist())
full = torch.empty(world * 2)
dist.all_gather_into_tensor(full, out)
print("all_gather_into_tensor", full.tolist())
lst = [torch.empty(2) for _ in range(world)]
dist.all_gather(lst, out)
print("all_gather", [t.tolist() for t in lst])
dist.destroy_process_group()
