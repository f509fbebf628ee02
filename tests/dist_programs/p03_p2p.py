"""Point to point: send/recv, isend/irecv with tags, P2POp + batch_isend_irecv round a ring."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
nxt, prv = (rank + 1) % world, (rank - 1) % world
send = torch.arange(3, dtype=torch.float32) + 10 * rank
recv = torch.empty(3)
ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
for w in dist.batch_isend_irecv(ops):
    w.wait()
print("ring got", recv.tolist())
if rank == 0:
    dist.send(torch.tensor([7, 8]), dst=3)
    reqs = [
        dist.isend(torch.tensor([1.0]), dst=1, tag=5),
        dist.isend(torch.tensor([2.0]), dst=1, tag=6),
    ]
    for r in reqs:
        r.wait()
elif rank == 3:
    buf = torch.zeros(2, dtype=torch.int64)
    print("recv from", dist.recv(buf, src=0), buf.tolist())
elif rank == 1:
    a, b = torch.zeros(1), torch.zeros(1)
    wb = dist.irecv(b, src=0, tag=6)
    wa = dist.irecv(a, src=0, tag=5)
    wb.wait()
    wa.wait()
    print("tagged", a.item(), b.item())
dist.barrier()
dist.destroy_process_group()
