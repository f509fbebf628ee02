"""init_device_mesh without init_process_group (DeviceMesh initialises the default group itself):
torchrun: works; emulated: hangs."""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

mesh = init_device_mesh("cpu", (int(os.environ["WORLD_SIZE"]),))
print("OUT auto_init", dist.is_initialized(), flush=True)
t = torch.ones(1)
dist.all_reduce(t)
print("OUT sum", t.item(), flush=True)
dist.destroy_process_group()
