"""torch.distributed.pipelining: every schedule on 2 ranks, then pipeline() with SplitPoint.

One model (8 Linear+Tanh blocks), built identically on every rank; each schedule trains it for
one step on 4 microbatches.  Each rank prints the losses of the microbatches it holds and a
checksum of the gradients of its stages, and whether they equal (to 1e-6) a single-process
step on the whole batch.
"""

import torch
import torch.distributed as dist
from torch.distributed import pipelining as pp

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
N_MICRO, D = 4, 8


def blocks(n: int) -> list[torch.nn.Module]:
    torch.manual_seed(0)
    return [torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.Tanh()) for _ in range(n)]


def mse(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (out - target).pow(2).mean()


torch.manual_seed(123)
x, y = torch.randn(8, D), torch.randn(8, D)


def reference(n: int) -> list[torch.Tensor]:
    """The gradients of a single-process step on the whole batch (mean of microbatch losses)."""
    model = torch.nn.Sequential(*blocks(n))
    mse(model(x), y).backward()
    return [p.grad for p in model.parameters()]


def report(name: str, n_stages: int, mine: list[int], stages, losses) -> None:
    ref = reference(n_stages)
    per_stage = len(ref) // n_stages
    ok, total = True, 0.0
    for idx, stage in zip(mine, stages):
        grads = [p.grad for p in stage.submod.parameters()]
        want = ref[idx * per_stage : (idx + 1) * per_stage]
        ok &= all(torch.allclose(g, w, rtol=0, atol=1e-6) for g, w in zip(grads, want))
        total += sum(g.double().sum().item() for g in grads)
    shown = [round(v.item(), 6) for v in losses]
    print(f"{name}: losses {shown} grad checksum {total:.8f} equals single process {ok}")


def run(schedule_cls, stage_ids: list[int], n_stages: int) -> None:
    mods = blocks(n_stages)
    stages = [pp.PipelineStage(mods[i], i, n_stages, torch.device("cpu")) for i in stage_ids]
    last = n_stages - 1 in stage_ids
    if schedule_cls in (pp.ScheduleGPipe, pp.Schedule1F1B):
        sched = schedule_cls(stages[0], N_MICRO, loss_fn=mse)
    else:
        sched = schedule_cls(stages, N_MICRO, loss_fn=mse)
    losses: list[torch.Tensor] = []
    if 0 in stage_ids:
        sched.step(x, target=y if last else None, losses=losses if last else None)
    else:
        sched.step(target=y if last else None, losses=losses if last else None)
    report(schedule_cls.__name__, n_stages, stage_ids, stages, losses)


run(pp.ScheduleGPipe, [rank], world)
run(pp.Schedule1F1B, [rank], world)
looped = [rank, rank + world]  # stage i on rank i % world
for cls in (pp.ScheduleInterleaved1F1B, pp.ScheduleLoopedBFS, pp.ScheduleInterleavedZeroBubble):
    run(cls, looped, 2 * world)
v_shape = [rank, 2 * world - 1 - rank]  # rank 0 holds the first and the last stage
if tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13):
    for cls in (pp.ScheduleZBVZeroBubble, pp.ScheduleDualPipeV):
        run(cls, v_shape, 2 * world)
else:  # torch 2.11 (Colab's, the lowest admitted): the last rank holds two adjacent stages and,
    # setting up its neighbours, sends to itself (gloo: "Pair is not connected"; emulated: an error
    # naming the rank); the V-shaped schedules run on torch 2.13
    print(f"V-shaped schedules: not run on torch {torch.__version__.split('+')[0]} (needs 2.13)")

# pipeline(): trace the whole model, split it before block 4 (SplitPoint.BEGINNING)
model = torch.nn.Sequential(*blocks(8))
pipe = pp.pipeline(model, mb_args=(x[:2],), split_spec={"4": pp.SplitPoint.BEGINNING})
stage = pipe.build_stage(rank, torch.device("cpu"))
sched = pp.ScheduleGPipe(stage, N_MICRO, loss_fn=mse)
losses = []
if rank == 0:
    sched.step(x)
else:
    sched.step(target=y, losses=losses)
print(f"pipeline() with {pipe.num_stages} stages, this rank's stage {stage.stage_index}")
ref = reference(8)
grads = [p.grad for p in stage.submod.parameters()]
want = ref[rank * 8 : (rank + 1) * 8]
equal = all(torch.allclose(g, w, rtol=0, atol=1e-6) for g, w in zip(grads, want))
print(f"pipeline(): losses {[round(v.item(), 6) for v in losses]} equals single process {equal}")
dist.destroy_process_group()
