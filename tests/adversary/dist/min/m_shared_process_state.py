"""Process-wide state is shared between emulated ranks (they are threads of one process):
torch.set_default_dtype, torch.set_printoptions, global module hooks and module-level globals
of an imported module set on rank 0 are seen on rank 1.  Under torchrun each rank is its own
process and rank 1 sees none of it."""

import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
r = dist.get_rank()
calls = []
if r == 0:
    torch.set_default_dtype(torch.float64)
    torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: calls.append(1))
    sys.modules["json"].ADV_FLAG = "set by rank 0"  # any module-level global
dist.barrier()
torch.nn.Linear(2, 2)(torch.ones(1, 2))
dist.barrier()
print(
    "OUT rank",
    r,
    "default_dtype",
    torch.get_default_dtype(),
    "hook_calls",
    len(calls),
    "module_global",
    getattr(sys.modules["json"], "ADV_FLAG", None),
    flush=True,
)
dist.destroy_process_group()
