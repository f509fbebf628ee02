"""torch.distributed.checkpoint beyond dcp.save: async_save (the thread executor, with and
without asynchronous staging; the process executor re-runs ``__main__`` in a spawned process, so
tests/test_dist_backend.py tries it in a program of its own), FSDP2 model + optimizer through get_state_dict / set_state_dict, other
planners (partial loads, a checkpoint loaded without a template) and a torch.save conversion."""

import shutil
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
rank = dist.get_rank()
where = [tempfile.mkdtemp() if rank == 0 else None]
dist.broadcast_object_list(where, src=0)
root = Path(where[0])


def model_and_opt():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    for layer in (m[0], m[2]):
        fully_shard(layer)
    fully_shard(m)
    return m, torch.optim.AdamW(m.parameters(), lr=0.01)


def train(m, opt, steps: int) -> None:
    torch.manual_seed(10 + rank)
    for _ in range(steps):
        m(torch.randn(4, 6)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()


model, opt = model_and_opt()
train(model, opt, 2)
msd, osd = get_state_dict(model, opt)
state = {"model": msd, "optim": osd}
checksum = round(sum(v.full_tensor().sum().item() for v in msd.values()), 5)
print("trained checksum", checksum)

# async_save: the thread executor (default), the process executor, asynchronous staging
f = dcp.async_save(state, checkpoint_id=str(root / "thread"))
f.result()
print("async_save thread done", f.done())
stager = DefaultStager(StagingOptions(False, False, True, False))  # staging on a thread
resp = dcp.async_save(state, checkpoint_id=str(root / "staged"), async_stager=stager)
resp.staging_completion.result()
resp.upload_completion.result()
stager.close()
print("async_save staged done", resp.upload_completion.done())

# load each into a fresh model + optimizer; one more step must agree with the original's
for name in ("thread", "staged"):
    m2, o2 = model_and_opt()
    msd2, osd2 = get_state_dict(m2, o2)
    loaded = {"model": msd2, "optim": osd2}
    dcp.load(loaded, checkpoint_id=str(root / name))
    set_state_dict(m2, o2, model_state_dict=loaded["model"], optim_state_dict=loaded["optim"])
    back = round(sum(v.full_tensor().sum().item() for v in get_state_dict(m2, o2)[0].values()), 5)
    print(f"{name}: loaded checksum {back} equal {back == checksum}")

# planners: replicated entries written by the lowest rank, plans cached across saves; which
# rank's copy of a plain tensor (that differs by rank) ends up in the checkpoint
planner = DefaultSavePlanner(dedup_save_to_lowest_rank=True, enable_plan_caching=True)
mixed = {**state, "plain": torch.full((3,), float(rank)), "big": torch.arange(64.0) * (rank + 1)}
for _ in range(2):
    dcp.save(mixed, checkpoint_id=str(root / "plain"), planner=planner)
seen = {"plain": torch.zeros(3), "big": torch.zeros(64)}
dcp.load(seen, checkpoint_id=str(root / "plain"))
print("replicated copies saved from", seen["plain"].tolist(), seen["big"].sum().item())
# a partial load: a key the checkpoint lacks is allowed
extra = {"model": {k: torch.zeros_like(v) for k, v in msd.items()}, "missing": torch.zeros(2)}
dcp.load(extra, checkpoint_id=str(root / "plain"),
         planner=DefaultLoadPlanner(allow_partial_load=True))  # fmt: skip
print(
    "partial load",
    round(sum(v.full_tensor().sum().item() for v in extra["model"].values()), 5),
    extra["missing"].tolist(),
)
# a checkpoint converted to one torch.save file (no process group needed), read on rank 0
dist.barrier()
if rank == 0:
    dcp_to_torch_save(str(root / "plain"), str(root / "whole.pt"))
    whole = torch.load(root / "whole.pt", weights_only=False)
    print("torch.save keys", sorted(whole["model"]), tuple(whole["model"]["0.weight"].shape))
dist.barrier()
if rank == 0:
    shutil.rmtree(root)
dist.destroy_process_group()
