"""DTensor beyond Shard(0): loss_parallel, Shard(1) / Partial / 2-D placements, dropout,
and a tensor-parallel MLP whose cross-entropy runs sharded on the class dimension."""

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    loss_parallel,
    parallelize_module,
)

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (world,))

# placements: Shard(1), Partial -> Replicate / Shard, a 2-D mesh (world x 1)
full = torch.arange(24.0).reshape(4, 6)
cols = distribute_tensor(full, mesh, [Shard(1)])
print("Shard(1) local", cols.to_local().tolist())
part = DTensor.from_local(torch.full((2, 3), float(rank + 1)), mesh, [Partial()])
print("Partial -> Replicate", part.redistribute(mesh, [Replicate()]).to_local().tolist())
print("Partial -> Shard(1)", part.redistribute(mesh, [Shard(1)]).to_local().tolist())
mesh2 = init_device_mesh("cpu", (world, 1), mesh_dim_names=("dp", "tp"))
two = distribute_tensor(full, mesh2, [Shard(0), Shard(1)])
print("2-D (Shard(0), Shard(1)) local", tuple(two.to_local().shape), two.to_local()[0].tolist())
print("matmul of shards", (cols @ cols.T).full_tensor().sum().item())

# random ops on DTensors (on CPU meshes torch draws from each rank's own generator)
torch.manual_seed(7 + rank)
drop = F.dropout(distribute_tensor(torch.ones(4, 6), mesh, [Shard(1)]), 0.5)
print("dropout on Shard(1) kept", int((drop.to_local() != 0).sum().item()))

# loss_parallel: a column-parallel head, cross-entropy on logits sharded by class
torch.manual_seed(0)
layers = (torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.Linear(16, 10))
mlp = torch.nn.Sequential(*layers)
ref = copy.deepcopy(mlp)
plan = {
    "0": ColwiseParallel(),
    "2": RowwiseParallel(),
    "3": ColwiseParallel(use_local_output=False),
}
parallelize_module(mlp, mesh, plan)
x, y = torch.randn(5, 8), torch.tensor([0, 3, 9, 1, 4])
logits = mlp(x)
print("logits placements", logits.placements)
with loss_parallel():
    loss = F.cross_entropy(logits, y)
    loss.backward()
print("loss_parallel loss", round(loss.full_tensor().item(), 6))
ref_loss = F.cross_entropy(ref(x), y)
ref_loss.backward()
print(
    "equals single process",
    torch.allclose(loss.full_tensor(), ref_loss, atol=1e-6),
    torch.allclose(mlp[3].weight.grad.full_tensor(), ref[3].weight.grad, atol=1e-6),
)
# after the context: plain cross-entropy on the gathered logits
print("after loss_parallel", round(F.cross_entropy(logits.full_tensor(), y).item(), 6))
# a row-parallel layer feeding a replicated loss
row = torch.nn.Linear(16, 4)
parallelize_module(row, mesh, RowwiseParallel(input_layouts=Shard(1)))
h = distribute_tensor(torch.randn(3, 16), mesh, [Shard(1)])
print("rowwise out", round(row(h).sum().item(), 5))
dist.destroy_process_group()
