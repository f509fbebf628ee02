"""all_to_all with tensor lists; all_to_all_single even, uneven and zero-size; gloo's errors."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
ins = [torch.full((2,), float(10 * rank + j)) for j in range(world)]
outs = [torch.empty(2) for _ in range(world)]
dist.all_to_all(outs, ins)
print("all_to_all", [o.tolist() for o in outs])
try:  # gloo wants equal sizes in the lists: every rank gets the error, nobody hangs
    dist.all_to_all([torch.empty(i + 1) for i in range(world)], [torch.zeros(1)] * world)
except RuntimeError as err:
    print("uneven all_to_all lists rejected: RuntimeError", "size" in str(err))
x = torch.arange(world * 2) + 100 * rank
y = torch.empty_like(x)
dist.all_to_all_single(y, x)
print("even", y.tolist())
send = [(rank + j) % 3 for j in range(world)]  # rows for rank j; some zero
recv = [(i + rank) % 3 for i in range(world)]
x = torch.arange(sum(send), dtype=torch.float32).view(-1, 1).repeat(1, 2) + 1000 * rank
y = torch.empty(sum(recv), 2)
dist.all_to_all_single(y, x, output_split_sizes=recv, input_split_sizes=send)
print("uneven splits", send, recv, y[:, 0].tolist())
dist.destroy_process_group()
