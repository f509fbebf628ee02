"""torch.profiler on a plain all_reduce: torchrun records 'c10d::allreduce_' (the dispatcher op)
and 'gloo:all_reduce'; emulated records only 'gloo:all_reduce' (the collective does not go through
the c10d dispatcher op, which is also why CommDebugMode sees nothing, see m_commdebug.py)."""

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

dist.init_process_group("gloo")
with profile(activities=[ProfilerActivity.CPU]) as prof:
    dist.all_reduce(torch.ones(4))
print(
    "OUT events",
    sorted({e.key for e in prof.key_averages() if "c10d" in e.key or "gloo" in e.key}),
    flush=True,
)
dist.destroy_process_group()
