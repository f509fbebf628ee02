"""DeviceMesh, DTensor, functional collectives and torch.distributed.checkpoint."""

import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

dist.init_process_group("gloo")
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
d = distribute_tensor(torch.arange(16.0).reshape(4, 4), mesh, [Shard(0)])
print("local rows", d.to_local()[:, 0].tolist())
print("replicated sum", d.redistribute(mesh, [Replicate()]).to_local().sum().item())
t = torch.full((2,), float(rank))
print("funcol all_reduce", funcol.all_reduce(t, "sum", mesh).tolist())
print("funcol all_gather", funcol.all_gather_tensor(t, 0, mesh).tolist())
print(
    "funcol reduce_scatter",
    funcol.reduce_scatter_tensor(torch.arange(4.0) + rank, "sum", 0, mesh).tolist(),
)
where = [tempfile.mkdtemp() if rank == 0 else None]
dist.broadcast_object_list(where, src=0)
dcp.save({"w": d}, checkpoint_id=where[0])
back = distribute_tensor(torch.zeros(4, 4), mesh, [Shard(0)])
dcp.load({"w": back}, checkpoint_id=where[0])
print("dcp round trip", torch.equal(back.to_local(), d.to_local()))
dist.barrier()
if rank == 0:
    shutil.rmtree(where[0])
dist.destroy_process_group()
