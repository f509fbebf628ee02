"""When one rank fails, what the other ranks printed: torchrun shows rank 0's lines;
emulated drops every other rank's output (only the failing rank's lines and traceback are shown)."""

import torch.distributed as dist

dist.init_process_group("gloo")
r = dist.get_rank()
print("OUT rank", r, "before barrier", flush=True)
dist.barrier()
print("OUT rank", r, "after barrier", flush=True)
if r == 1:
    raise ValueError("rank 1 fails")
dist.destroy_process_group()
