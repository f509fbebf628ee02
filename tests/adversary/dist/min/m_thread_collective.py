"""A collective issued from a thread the rank starts (e.g. a background checkpoint / data thread):
torchrun: works ([3.0, 3.0]); emulated: RuntimeError (documented limitation: only the rank's
own thread may call collectives)."""

import threading

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
res = {}


def worker():
    t = torch.ones(2) * (dist.get_rank() + 1)
    try:
        dist.all_reduce(t)
        res["v"] = t.tolist()
    except RuntimeError as e:
        res["v"] = "RuntimeError: " + str(e)[:100].replace("\n", " ")


th = threading.Thread(target=worker)
th.start()
th.join()
print("OUT thread_collective", res["v"], flush=True)
dist.destroy_process_group()
