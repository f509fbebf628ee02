"""A SIGTERM handler for pre-emption (signal.signal), installed by each rank: fine in a torchrun
process; emulated, ranks are not the main thread and signal.signal raises ValueError."""

import signal

import torch.distributed as dist

dist.init_process_group("gloo")
try:
    signal.signal(signal.SIGTERM, lambda *a: None)
    print("OUT signal ok", flush=True)
except ValueError as e:
    print("OUT signal ValueError", e, flush=True)
dist.destroy_process_group()
