"""send to a rank outside the world: torchrun raises torch.distributed.DistError (a RuntimeError);
after the process-group timeout (with the default 30 min it hangs that long); emulated raises a plain ValueError at once, so `except RuntimeError` / `except dist.DistError` miss it."""

import datetime

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=4))  # gloo waits this long
try:
    dist.send(torch.ones(1), dst=dist.get_world_size() + 3)
except Exception as e:  # noqa: BLE001
    print(
        "OUT",
        type(e).__name__,
        "DistError" if isinstance(e, dist.DistError) else "",
        "RuntimeError" if isinstance(e, RuntimeError) else "",
        flush=True,
    )
dist.destroy_process_group()
