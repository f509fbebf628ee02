"""Process-group set-up and queries."""

import torch.distributed as dist

dist.init_process_group(backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print("available", dist.is_available(), "initialized", dist.is_initialized())
print("backend", dist.get_backend(), "rank", rank, "world", world)
print("world ranks", dist.get_process_group_ranks(dist.group.WORLD))
print("global rank of group rank 2", dist.get_global_rank(dist.group.WORLD, 2))
dist.monitored_barrier()
dist.barrier()
dist.destroy_process_group()
