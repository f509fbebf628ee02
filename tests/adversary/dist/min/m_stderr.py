"""What a rank prints to sys.stderr: torchrun --tee 3 prefixes it '[default<rank>]:' like stdout;
emulated it is printed without the rank prefix (or not at all)."""

import sys

import torch.distributed as dist

dist.init_process_group("gloo")
print("OUT stdout line", dist.get_rank(), flush=True)
print("OUT stderr line", dist.get_rank(), file=sys.stderr, flush=True)
dist.destroy_process_group()
