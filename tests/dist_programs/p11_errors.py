"""Misuses gloo rejects on every rank without hanging: each rank catches the error, and the
process group still works afterwards."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.ones(4)
cases = {
    "all_to_all with a list one short": lambda: dist.all_to_all(
        [torch.zeros(1) for _ in range(world - 1)], [torch.ones(1) for _ in range(world - 1)]),
    "all_to_all_single with splits that do not sum": lambda: dist.all_to_all_single(
        torch.zeros(world + 1), torch.ones(world + 1), [1] * world, [1] * world),
    "reduce_scatter_tensor with a wrong input size": lambda: dist.reduce_scatter_tensor(
        torch.zeros(2), torch.ones(2 * world + 2)),
    "all_gather with a list one short": lambda: dist.all_gather(
        [torch.zeros(4) for _ in range(world - 1)], x),
    "reduce to a rank that does not exist": lambda: dist.reduce(x, dst=world + 5),
    "broadcast from a rank that does not exist": lambda: dist.broadcast(x, src=world + 5),
    "send to itself": lambda: dist.send(x, dst=rank),
    "all_reduce of a list": lambda: dist.all_reduce([1.0, 2.0]),
}  # fmt: skip
for name, call in cases.items():
    try:
        call()
        print(name, "-> no error")
    except RuntimeError:  # what gloo raises for bad arguments it checks itself
        print(name, "-> RuntimeError")
    except (ValueError, TypeError) as e:  # what torch's Python code raises before gloo
        print(name, "->", type(e).__name__)
total = torch.tensor([float(rank)])
dist.all_reduce(total)
print("the group still works: all_reduce gives", total.item())
dist.destroy_process_group()
