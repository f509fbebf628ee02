"""labs.parallel under torch.distributed: SP, ring attention, Ulysses, EP and the 4-D training step
(``labs.parallel.mesh_train``) against references.

Not one of the plain client programs (it imports labs): it checks that the code of Chapter 17b
runs unchanged under torchrun.  Every rank builds the same full tensors (same seed), runs its
part, and compares its shard of the result with a single-process reference it computes itself.
"""

import torch
import torch.distributed as dist

from labs import gpt
from labs.attention.flash import naive_attention
from labs.parallel import mesh_train, moe, ulysses
from labs.parallel import ring_attention as ra
from labs.parallel import sequence_parallel as sp
from labs.parallel.mesh import Mesh

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)


def close(a, b):
    return bool(torch.allclose(a, b, rtol=1e-9, atol=1e-12))


# sequence parallelism around a TP block
block = gpt.Block(gpt.GPTConfig(n_head=4, n_embd=32)).double()
x = torch.randn(2, 8, 32, dtype=torch.float64, requires_grad=True)
y = block(x)
dy = torch.randn_like(y)
y.backward(dy)
n = 8 // world
xi = x.detach()[:, rank * n : (rank + 1) * n].clone().requires_grad_()
out = sp.SPBlock(block, rank, world)(xi)
out.backward(dy[:, rank * n : (rank + 1) * n])
print("SP output", close(out, y[:, rank * n : (rank + 1) * n]),
      "dx", close(xi.grad, x.grad[:, rank * n : (rank + 1) * n]))  # fmt: skip

# ring attention, causal, zig-zag, length not divisible by the world size
q, k, v = (torch.randn(1, 2, 19, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
ref = naive_attention(q, k, v, causal=True)
go = torch.randn_like(ref)
grads = torch.autograd.grad(ref, (q, k, v), go)
qs, ks, vs = (ra.shard(z.detach(), rank, world, "zigzag").requires_grad_() for z in (q, k, v))
o = ra.ring_attention(qs, ks, vs, causal=True, layout="zigzag", seq_len=19)
o.backward(ra.shard(go, rank, world, "zigzag"))
mine = [ra.shard(t, rank, world, "zigzag") for t in (ref, *grads)]
print("ring", [close(a, b) for a, b in zip((o, qs.grad, ks.grad, vs.grad), mine)])

# Ulysses
q, k, v = (torch.randn(2, 8, 4, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
ref = naive_attention(*(z.transpose(1, 2) for z in (q, k, v)), causal=True).transpose(1, 2)
go = torch.randn_like(ref)
grads = torch.autograd.grad(ref, (q, k, v), go)
sl = slice(rank * 2, rank * 2 + 2)
qs, ks, vs = (z.detach()[:, sl].clone().requires_grad_() for z in (q, k, v))
o = ulysses.ulysses_attention(qs, ks, vs, causal=True)
o.backward(go[:, sl])
print(
    "ulysses", [close(a, b[:, sl]) for a, b in zip((o, qs.grad, ks.grad, vs.grad), (ref, *grads))]
)

# expert parallelism with uneven token counts
full = moe.MoE(6, 12, 8, k=2, capacity_factor=1.0, seed=3).double()
xs = [torch.randn(9 + 2 * r, 6, dtype=torch.float64) for r in range(world)]
sum((full(t)[0] ** 2).sum() for t in xs).backward()
layer = moe.ExpertParallelMoE(full, rank, world)
ye, stats = layer(xs[rank])
(ye**2).sum().backward()
g = layer.router.weight.grad.clone()
dist.all_reduce(g)
per = 8 // world
own = full.experts[rank * per : (rank + 1) * per]
print("EP output", close(ye, full(xs[rank])[0]), "router grad", close(g, full.router.weight.grad),
      "expert grads", all(close(a.fc1.weight.grad, b.fc1.weight.grad) for a, b in
                          zip(layer.experts, own)), "dropped", stats["dropped"])  # fmt: skip

# the 4-D training step on two meshes of 4 ranks: TP (with SP) x CP, and PP x DP
model = mesh_train.tiny_gpt()
gen = torch.Generator().manual_seed(1)
idx, tgt = (torch.randint(0, 11, (4, 12), generator=gen) for _ in range(2))
ref = mesh_train.reference_step(model, idx, tgt)
for dims, mbs in (
    ({"tp": 2, "cp": 2, "pp": 1, "dp": 1}, 1),
    ({"tp": 1, "cp": 1, "pp": 2, "dp": 2}, 2),
):
    out = mesh_train.mesh_step(model, Mesh(dims), idx, tgt, micro_batches=mbs)
    t = out["coords"]["tp"]
    shards = [close(out[k][n], mesh_train.shard_of(n, ref[k][n], t, dims["tp"]))
              for k in ("grads", "params") for n in out[k]]  # fmt: skip
    print("MESH", " ".join(f"{k}{v}" for k, v in dims.items()), "loss",
          close(out["loss"], ref["loss"]), "grads and weights", all(shards))  # fmt: skip
dist.destroy_process_group()
