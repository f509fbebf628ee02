"""The process group's life cycle: is_initialized before init and after destroy, the usual
`if not dist.is_initialized()` guard, a collective outside init..destroy (p17-p19: the other
ways a group gets made)."""

import torch
import torch.distributed as dist

print("before init: is_initialized", dist.is_initialized())
try:
    dist.all_reduce(torch.ones(1))
except ValueError as e:
    print("before init: all_reduce raises ValueError:", "not been initialized" in str(e))
if not dist.is_initialized():
    dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print("guarded init: all_reduce", t.item(), "backend", dist.get_backend())
dist.destroy_process_group()
print("after destroy: is_initialized", dist.is_initialized())
for name, call in [("all_reduce", lambda: dist.all_reduce(torch.ones(1))),
                   ("get_rank", dist.get_rank), ("barrier", dist.barrier)]:  # fmt: skip
    try:
        call()
        print("after destroy:", name, "ran")
    except ValueError:
        print("after destroy:", name, "raises ValueError")
