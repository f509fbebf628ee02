"""Per-rank random state: each rank seeds torch, numpy and random with its rank."""

import random

import numpy as np
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
np.random.seed(100 + rank)
random.seed(200 + rank)
x = torch.randn(3)
dist.barrier()  # other ranks draw in between: must not disturb this rank's stream
y = torch.rand(2)
total = x.clone()
dist.all_reduce(total)
print("torch", [round(v, 6) for v in x.tolist() + y.tolist()])
print("dropout mask", torch.nn.functional.dropout(torch.ones(8), 0.5).tolist())
print("numpy", np.random.randint(0, 1000, 4).tolist(), round(float(np.random.rand()), 6))
print("random", random.randint(0, 1000), round(random.random(), 6))
print("sum of the ranks' draws", [round(v, 5) for v in total.tolist()])
dist.destroy_process_group()
