"""Reductions whose result depends on the order the ranks are combined in, compared bit for bit.

Values spread over many orders of magnitude (so (a + b) + c != a + (b + c)), NaNs and signed
zeros (so max and min depend on which side each value is on), sizes from one element to several
segments of gloo's ring (1 MiB each); every rank prints a hash of the exact bytes it holds.
Non-root tensors after reduce are printed too: gloo leaves partial sums in them.
"""

import hashlib

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()


def data(r: int, n: int, dtype: torch.dtype, salt: int, nan: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(100_000 * salt + 10 * n + r)
    x = torch.randn(n, generator=g, dtype=torch.float64)
    x *= 10.0 ** torch.randint(-4, 7, (n,), generator=g)
    if nan:
        x[torch.rand(n, generator=g) < 0.2] = float("nan")
        x[torch.rand(n, generator=g) < 0.2] = -0.0 if r % 2 else 0.0
    return x.to(dtype)


def digest(t: torch.Tensor) -> str:
    raw = t.detach().contiguous().view(torch.uint8) if t.dtype != torch.bool else t.byte()
    return hashlib.sha1(raw.numpy().tobytes()).hexdigest()[:10]


def naive(xs: list[torch.Tensor]) -> torch.Tensor:
    out = xs[0].clone()
    for x in xs[1:]:
        out = out + x
    return out


SUM, AVG, PROD = dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PRODUCT
MIN, MAX = dist.ReduceOp.MIN, dist.ReduceOp.MAX
cases = [(n, torch.float32, SUM) for n in (1, 2, 3, 5, 13, 1001, 70_001, 300_001)]
cases += [(n, dt, SUM) for n in (7, 4099) for dt in (torch.bfloat16, torch.float16, torch.float64)]
cases += [(2049, torch.float32, op) for op in (AVG, PROD, MIN, MAX)]
cases += [(1024, torch.bfloat16, op) for op in (AVG, MIN, MAX)]
differ = 0
for salt, (n, dtype, op) in enumerate(cases):
    nan = op in (MIN, MAX)
    xs = [data(r, n, dtype, salt, nan) for r in range(world)]
    y = xs[rank].clone()
    dist.all_reduce(y, op=op)
    z = xs[rank].clone()
    dist.reduce(z, dst=1, op=op)
    name = f"{str(dtype)[6:]}[{n}] {op}"
    print(f"{name}: all_reduce {digest(y)} reduce(dst=1) {digest(z)}")
    if op == SUM and not torch.equal(y, naive(xs)):
        differ += 1
print(f"sums that differ from summing in rank order: {differ}")

# complex sums, and the sizes where gloo's reduce uses more than 2 segments per rank
c = [torch.complex(data(r, 301, torch.float32, 1), data(r, 301, torch.float32, 2))
     for r in range(world)]  # fmt: skip
y = c[rank].clone()
dist.all_reduce(y)
print("complex64[301] all_reduce", digest(y))
big = [data(r, 2_500_001, torch.float32, 3) for r in range(world)]
z = big[rank].clone()
dist.reduce(z, dst=0)
print("float32[2500001] reduce(dst=0)", digest(z))

# reduce_scatter_tensor (one ring over the whole input), reduce_scatter (one ring per part)
k = 3001
full = data(rank, world * k, torch.float32, 4)
out = torch.empty(k)
dist.reduce_scatter_tensor(out, full)
print(
    "reduce_scatter_tensor",
    digest(out),
    "input unchanged",
    torch.equal(full, data(rank, world * k, torch.float32, 4)),
)
parts = [data(rank, k, torch.float32, 10 + j, nan=True) for j in range(world)]
out = torch.empty(k)
dist.reduce_scatter(out, parts, op=MAX)
print("reduce_scatter MAX", digest(out))
dist.destroy_process_group()
