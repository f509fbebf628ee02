"""The environment torchrun gives each rank: RANK, LOCAL_RANK, WORLD_SIZE, ... one per process."""

import os

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
print("RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE", os.environ["RANK"], os.environ["LOCAL_RANK"],
      os.environ["WORLD_SIZE"], os.getenv("LOCAL_WORLD_SIZE"))  # fmt: skip
print(
    "agrees with get_rank and get_world_size",
    int(os.environ["RANK"]) == rank,
    int(os.environ["WORLD_SIZE"]) == dist.get_world_size(),
)
print("MASTER_ADDR and MASTER_PORT set", "MASTER_ADDR" in os.environ, "MASTER_PORT" in os.environ)
os.environ["MY_SETTING"] = f"set by rank {rank}"
dist.barrier()  # every rank has set it: each process still sees only its own
print("own variable:", os.environ["MY_SETTING"], "|", os.environ.copy()["MY_SETTING"])
del os.environ["MY_SETTING"]
print("deleted:", os.getenv("MY_SETTING"))
dist.destroy_process_group()
