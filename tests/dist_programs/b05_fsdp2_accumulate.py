"""FSDP2 with gradient accumulation (no gradient sync on the first micro-batch), the root kept
unsharded after forward, and a bf16 all-gather (MixedPrecisionPolicy)."""

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.GELU(), torch.nn.Linear(12, 2))
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for layer in (model[0], model[2]):
    fully_shard(layer, mp_policy=policy)
fully_shard(model, mp_policy=policy, reshard_after_forward=False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(100 + rank)
for step in range(2):
    for micro in range(2):
        model.set_requires_gradient_sync(micro == 1)  # reduce-scatter on the last one only
        model(torch.randn(3, 6)).float().pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
    print(f"accumulated step {step}: first weight {model[0].weight.full_tensor()[0, 0].item():.5f}")
dist.destroy_process_group()
