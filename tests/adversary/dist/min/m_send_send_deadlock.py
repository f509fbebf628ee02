"""Both ranks send first, then receive (the classic exchange written naively), with a large
tensor (4 elements deadlock just the same): under torchrun (gloo) the blocking sends wait for
each other and the process group's timeout fires ('Timed out waiting 15000ms for send operation
to complete'); emulated, send is buffered and returns at once, so the program completes and the
deadlock a real cluster would hit is not shown."""

import datetime

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=15))
r = dist.get_rank()
other = 1 - r
x = torch.full((16 * 2**20,), float(r))  # 64 MiB
y = torch.empty_like(x)
try:
    dist.send(x, dst=other)
    dist.recv(y, src=other)
    print("OUT exchanged", y[0].item(), flush=True)
except Exception as e:  # noqa: BLE001
    print("OUT EXC", type(e).__name__, str(e).splitlines()[0][:150], flush=True)
dist.destroy_process_group()
