"""The exception a failed collective raises: torchrun/gloo raises RuntimeError (only);
emulated raises a class that is also ValueError / NotImplementedError, so an
`except ValueError` catches it only when emulated."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
for name, fn in [
    (
        "all_to_all_list",
        lambda: dist.all_to_all(
            [torch.empty((j + 1) * (r + 1)) for j in range(n)],
            [torch.ones((r + 1) * (j + 1)) for j in range(n)],
        ),
    ),
    ("premul_sum", lambda: dist.all_reduce(torch.ones(2), op=dist._make_nccl_premul_sum(0.5))),
]:
    try:
        fn()
        print("OUT", name, "ok", flush=True)
    except Exception as e:  # noqa: BLE001
        print(
            "OUT",
            name,
            type(e).__mro__[:3],
            "ValueError" if isinstance(e, ValueError) else "",
            "NotImplementedError" if isinstance(e, NotImplementedError) else "",
            str(e)[:100].replace("\n", " "),
            flush=True,
        )
dist.destroy_process_group()
