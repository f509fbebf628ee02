"""Tensors that are not contiguous (transposed, channels_last, views with gaps) where gloo handles
them correctly, the calls where gloo refuses them, and the errors of group management and of
reduce ops.

(Where gloo silently returns garbage, the emulator refuses instead; those cases are checked
emulated only, in tests/test_dist_backend.py.)"""

import warnings

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()


def base(r: int) -> torch.Tensor:
    return torch.arange(48, dtype=torch.float32).reshape(6, 8) * (r + 1)


def channels_last(r: int) -> torch.Tensor:
    x = torch.arange(2 * 3 * 2 * 4, dtype=torch.float32).reshape(2, 3, 2, 4) * (r + 1)
    return x.to(memory_format=torch.channels_last)


layouts = {"transposed": lambda r: base(r).t(), "channels_last": channels_last}
for name, make in layouts.items():
    want = sum(make(r) for r in range(world))
    y = make(rank)
    dist.all_reduce(y)
    z = make(rank)
    dist.reduce(z, dst=0)
    b = make(rank)
    dist.broadcast(b, src=1)
    print(f"{name}: all_reduce {torch.equal(y, want)}, reduce {torch.equal(z, want) if rank == 0 else '-'}, "
          f"broadcast {torch.equal(b, make(1))}, still {name} {not y.is_contiguous()}")  # fmt: skip

gaps = base(rank)[:, ::2]  # a view with gaps: the copying collectives get it right
outs = [torch.zeros(6, 8)[:, ::2] for _ in range(world)]
dist.all_gather(outs, gaps)
print("gaps: all_gather", all(torch.equal(o, base(r)[:, ::2]) for r, o in enumerate(outs)))
full = torch.empty(6 * world, 4).t().t()
dist.all_gather_into_tensor(full, base(rank)[:, :4].t().contiguous().t())
print("all_gather_into_tensor of a transposed input", torch.equal(full[6:12], base(1)[:, :4]))
out = torch.zeros(8, 6).t()
dist.reduce_scatter_tensor(out, torch.cat([base(rank)] * world).t().contiguous().t())
print(
    "reduce_scatter_tensor of a transposed input",
    torch.equal(out, sum(base(r) for r in range(world))),
)
got = [torch.zeros(4, 6) for _ in range(world)]
dist.all_to_all(got, [base(rank)[:, j : j + 4].t() for j in range(world)])
print("all_to_all of transposed inputs", torch.equal(got[0], base(0)[:, rank : rank + 4].t()))


def error(call, words: int = 26) -> str:
    """What ``call`` did: its value and warnings, or its error's type and first characters."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = call()
        return f"returned {value!r}, warnings {[str(w.message)[:40] for w in caught]}"
    except Exception as e:  # noqa: BLE001 - the type and gloo's words are the point
        kind = "RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__
        return f"{kind}: {str(e)[:words]}"


print("send of a transposed tensor", error(lambda: dist.send(base(rank).t(), (rank + 1) % world)))
print("all_to_all_single of a transposed tensor",
      error(lambda: dist.all_to_all_single(torch.empty(8, 6), base(rank).t())))  # fmt: skip
print("all_gather_into_tensor into a flat output",
      error(lambda: dist.all_gather_into_tensor(torch.empty(world * 48), base(rank))))  # fmt: skip
for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
    print(f"all_reduce {op} of floats", error(lambda op=op: dist.all_reduce(torch.ones(2), op=op)))
print(
    "AVG of integers",
    error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.long), op=dist.ReduceOp.AVG)),
)

g = dist.new_group([0])  # every rank makes it; only rank 0 is a member
print("get_backend of the group", error(lambda: dist.get_backend(g)))
print("monitored_barrier on the group", error(lambda: dist.monitored_barrier(group=g)))
print("destroy the group", error(lambda: dist.destroy_process_group(g)))
print("get_backend after destroying it", error(lambda: dist.get_backend(g), 13))
print("still initialized", dist.is_initialized(), dist.get_backend())
total = torch.tensor([float(rank)])
dist.all_reduce(total)
print("the default group still works", total.item())
dist.destroy_process_group()
