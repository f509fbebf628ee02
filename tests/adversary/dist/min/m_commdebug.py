"""CommDebugMode / TorchDispatchMode see no plain c10d collective on emulated ranks.
torchrun: 'OUT counts 1 [c10d.allreduce_]'; emulated: 'OUT counts 0 []'."""

import torch
import torch.distributed as dist
from torch.distributed.tensor.debug import CommDebugMode

dist.init_process_group("gloo")
cm = CommDebugMode()
with cm:
    dist.all_reduce(torch.ones(4))
print("OUT counts", cm.get_total_counts(), sorted(str(k) for k in cm.get_comm_counts()), flush=True)
dist.destroy_process_group()
