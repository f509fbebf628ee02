"""Outside init_process_group .. destroy_process_group: torch raises ValueError ('Default process
group has not been initialized') and is_initialized() is False; emulated, is_initialized() is True
and collectives succeed, before init and after destroy."""

import torch
import torch.distributed as dist

print("OUT before init: is_initialized", dist.is_initialized(), flush=True)
dist.init_process_group("gloo")
dist.destroy_process_group()
try:
    dist.all_reduce(torch.ones(1))
    print("OUT after destroy: all_reduce ok", flush=True)
except ValueError:
    print("OUT after destroy: ValueError", flush=True)
print("OUT after destroy: is_initialized", dist.is_initialized(), flush=True)
