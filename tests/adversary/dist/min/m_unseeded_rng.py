"""Unseeded torch RNG: under torchrun each process starts from a fresh random seed (ranks differ,
runs differ); emulated, every rank starts from the same fixed seed, so an unseeded model init
is identical on all ranks (and across runs) -- a program that forgets to seed or to broadcast
its initial weights looks correct emulated and diverges under torchrun."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
w = torch.nn.Linear(4, 4).weight.detach().clone()
ref = w.clone()
dist.broadcast(ref, 0)
print(
    "OUT initial_seed", torch.initial_seed(), "same_init_as_rank0", torch.equal(w, ref), flush=True
)
dist.destroy_process_group()
