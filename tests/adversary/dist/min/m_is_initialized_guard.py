"""The common guard `if not dist.is_initialized(): dist.init_process_group(...)`:
is_initialized() is True before init_process_group on an emulated rank (False under torchrun),
so the guard skips init; then DDP needs a torch process group."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

print("OUT before_init is_initialized", dist.is_initialized(), flush=True)
if not dist.is_initialized():
    dist.init_process_group("gloo")
try:
    m = DDP(torch.nn.Linear(2, 2))
    m(torch.ones(1, 2)).sum().backward()
    print("OUT ddp ok", flush=True)
except Exception as e:  # noqa: BLE001
    print("OUT ddp EXC", type(e).__name__, str(e)[:120].replace("\n", " "), flush=True)
try:
    print("OUT rank", dist.get_rank(), "backend", dist.get_backend(), flush=True)
except Exception as e:  # noqa: BLE001
    print("OUT get_backend EXC", type(e).__name__, str(e)[:120].replace("\n", " "), flush=True)
