"""init_device_mesh with no process group makes the default group itself; then unseeded initial
weights: each process starts from its own random seed, so ranks' inits differ."""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

mesh = init_device_mesh("cpu", (int(os.environ["WORLD_SIZE"]),))
print("init_device_mesh without init: is_initialized", dist.is_initialized(), mesh.size())
w = torch.nn.Linear(4, 4).weight.detach().clone()  # no seed: each rank its own init
ref = w.clone()
dist.broadcast(ref, 0)
same = torch.equal(w, ref)
print("unseeded init equals rank 0's:", same if dist.get_rank() else "(rank 0)")
dist.destroy_process_group()
