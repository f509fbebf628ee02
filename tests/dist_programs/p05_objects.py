"""Object collectives: receivers get copies of picklable objects."""

import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
mine = {"rank": rank, "items": list(range(rank))}
gathered = [None] * world
dist.all_gather_object(gathered, mine)
gathered[(rank + 1) % world]["items"].append("changed")  # must not reach the other rank
dist.barrier()
print("all_gather_object", gathered[rank], "mine unchanged", mine["items"] == list(range(rank)))
objs = [{"cfg": [1, 2]}, "text", 3.5] if rank == 1 else [None, None, None]
dist.broadcast_object_list(objs, src=1)
print("broadcast_object_list", objs)
out = [None] * world if rank == 2 else None
dist.gather_object(("t", rank * rank), out, dst=2)
print("gather_object", out)
got = [None]
dist.scatter_object_list(got, [f"for {i}" for i in range(world)] if rank == 0 else None, src=0)
print("scatter_object_list", got)
if rank == 3:
    dist.send_object_list([{"a": 1}, (2, 3)], dst=0)
if rank == 0:
    box = [None, None]
    dist.recv_object_list(box, src=3)
    print("recv_object_list", box)
dist.barrier()
dist.destroy_process_group()
