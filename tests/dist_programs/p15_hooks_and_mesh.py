"""DDP with gradient-compression hooks (fp16, PowerSGD; bf16 needs NCCL) and DTensor on a 2 x 2 mesh with
loss_parallel on 4 ranks: low-precision sums and redistributions whose results depend on gloo's
order of summation, printed to the last bit."""

import hashlib

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, loss_parallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()


def digest(ts) -> str:
    raw = b"".join(t.detach().contiguous().view(torch.uint8).numpy().tobytes() for t in ts)
    return hashlib.sha1(raw).hexdigest()[:12]


hooks = {
    "fp16_compress": (default_hooks.fp16_compress_hook, None),
    "powerSGD": (powersgd.powerSGD_hook, "powersgd"),
}
for name, (hook, state) in hooks.items():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    ddp = DDP(model)
    if state == "powersgd":
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                       start_powerSGD_iter=2)  # fmt: skip
    ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(10 + rank)
    for _ in range(3):
        ddp(torch.randn(8, 32) * (1 + rank)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    print(f"DDP {name} hook: weights {digest(model.parameters())}")

mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
torch.manual_seed(1)
x = torch.randn(8, 12) * 10.0 ** torch.randint(-3, 4, (8, 12))
d = distribute_tensor(x, mesh, [Shard(0), Shard(1)])
print("(Shard(0), Shard(1)) local", digest([d.to_local()]))
part = type(d).from_local(d.to_local() * (rank + 1), mesh, [Partial(), Partial()])
dp_sum = type(d).from_local(d.to_local() * (rank + 1), mesh, [Partial(), Replicate()])
print(
    "Partial on dp -> Replicate", digest([dp_sum.redistribute(mesh, [Replicate()] * 2).to_local()])
)
print(
    "Partial -> Shard(1) on tp", digest([part.redistribute(mesh, [Partial(), Shard(1)]).to_local()])
)

torch.manual_seed(2)
head = torch.nn.Linear(12, 8)
parallelize_module(head, mesh["tp"], ColwiseParallel(use_local_output=False))
inp = torch.randn(6, 12) * (1 + rank)
logits = head(inp)
with loss_parallel():
    loss = F.cross_entropy(logits, torch.tensor([0, 3, 7, 1, 2, 5]))
    loss.backward()
print(f"loss_parallel on the tp dimension: loss {loss.full_tensor().item():.6f}",
      digest([head.weight.grad.to_local()]))  # fmt: skip
dist.destroy_process_group()
