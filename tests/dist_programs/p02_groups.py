"""Subgroups: new_group (members and non-members), new_subgroups, by enumeration."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
even, odd = dist.new_group([0, 2]), dist.new_group([1, 3])
mine = even if rank % 2 == 0 else odd
print("rank in even group", dist.get_rank(even), "size", dist.get_world_size(even))
x = torch.tensor([float(rank + 1)])
dist.all_reduce(x, group=mine)
print("sum over my parity group", x.item(), "ranks", dist.get_process_group_ranks(mine))
other = odd if rank % 2 == 0 else even  # a group this rank is not in: torch warns, does nothing
y = torch.tensor([5.0])
print("collective on a foreign group returns", dist.all_reduce(y, group=other), y.item())
cur, groups = dist.new_subgroups(group_size=2)
y = torch.tensor([rank * 10])
dist.all_reduce(y, group=cur)
print("new_subgroups", len(groups), dist.get_process_group_ranks(cur), y.item())
cur, groups = dist.new_subgroups_by_enumeration([[0, 3], [1, 2]])
z = torch.tensor([rank])
dist.broadcast(z, src=dist.get_process_group_ranks(cur)[1], group=cur)
print("by enumeration", dist.get_process_group_ranks(cur), "got", z.item())
print(
    "group rank of global 3 in cur",
    dist.get_group_rank(cur, 3) if 3 in dist.get_process_group_ranks(cur) else None,
)
dist.destroy_process_group()
