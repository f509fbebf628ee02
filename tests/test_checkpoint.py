"""Tests of labs.training.checkpoint on plain torch models: atomic saves, verification, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from labs.training import checkpoint as C


def _state(seed: int = 0, width: int = 4) -> dict:
    torch.manual_seed(seed)
    model = nn.Linear(width, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(2, width)).sum().backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1}


def test_full_roundtrip_and_latest(tmp_path: Path):
    assert C.latest_step(tmp_path) is None
    s1, s2 = _state(1), _state(2)
    C.save_full(tmp_path, 1, s1, note="first")
    C.save_full(tmp_path, 2, s2)
    assert C.latest_step(tmp_path) == 2
    got = C.load_full(tmp_path)
    torch.testing.assert_close(got["model"]["weight"], s2["model"]["weight"])
    got1 = C.load_full(tmp_path, step=1)
    torch.testing.assert_close(
        got1["optimizer"]["state"][0]["exp_avg"], s1["optimizer"]["state"][0]["exp_avg"]
    )
    _, manifest = C.verify(tmp_path, 1)
    assert manifest["note"] == "first" and manifest["format"] == "full"
    C.save_full(tmp_path, 2, s1)  # re-saving a step replaces it atomically
    torch.testing.assert_close(C.load_full(tmp_path)["model"]["weight"], s1["model"]["weight"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "latest",
        "step_00000001",
        "step_00000002",
    ]


def test_no_checkpoint_is_a_clear_error(tmp_path: Path):
    with pytest.raises(C.CheckpointError, match="no checkpoint"):
        C.load_full(tmp_path)


def test_truncated_and_corrupt_files_name_the_file(tmp_path: Path):
    C.save_full(tmp_path, 3, _state())
    f = C.step_dir(tmp_path, 3) / "state.pt"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(C.CheckpointError, match=r"state\.pt: truncated"):
        C.load_full(tmp_path)
    corrupt = bytearray(data)
    corrupt[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(corrupt))
    with pytest.raises(C.CheckpointError, match=r"state\.pt: corrupt"):
        C.load_full(tmp_path)
    (C.step_dir(tmp_path, 3) / "manifest.json").unlink()
    with pytest.raises(C.CheckpointError, match="no manifest"):
        C.load_full(tmp_path)


def test_shape_mismatch_loads_nothing(tmp_path: Path):
    C.save_full(tmp_path, 1, _state(width=4))
    other = nn.Linear(5, 3)
    before = other.weight.detach().clone()
    state = C.load_full(tmp_path)
    with pytest.raises(
        C.CheckpointError, match=r"state\.pt.*weight: checkpoint \(3, 4\), model \(3, 5\)"
    ):
        C.load_model_state(other, state["model"], str(C.step_dir(tmp_path, 1) / "state.pt"))
    assert torch.equal(other.weight, before)
    with pytest.raises(C.CheckpointError, match="missing keys"):
        C.load_model_state(nn.Sequential(nn.Linear(4, 3)), state["model"], "ckpt")


_CRASHING_SAVE = """
import sys, torch
from labs.training import checkpoint as C
C.save_full(sys.argv[1], int(sys.argv[2]), {"w": torch.full((4,), float(sys.argv[2]))})
"""


def _save_in_subprocess(root: Path, step: int, crash: bool) -> int:
    env = dict(os.environ)
    env.pop(C.CRASH_ENV, None)
    if crash:
        env[C.CRASH_ENV] = "1"
    cmd = [sys.executable, "-c", _CRASHING_SAVE, str(root), str(step)]
    return subprocess.run(cmd, env=env, timeout=60).returncode


def test_killed_save_leaves_previous_checkpoint_loadable(tmp_path: Path):
    assert _save_in_subprocess(tmp_path, 1, crash=False) == 0
    assert _save_in_subprocess(tmp_path, 2, crash=True) == 17  # died before the rename
    assert C.latest_step(tmp_path) == 1
    assert not C.step_dir(tmp_path, 2).exists()
    assert torch.equal(C.load_full(tmp_path)["w"], torch.full((4,), 1.0))
    assert _save_in_subprocess(tmp_path, 2, crash=False) == 0  # the leftover temp dir is replaced
    assert torch.equal(C.load_full(tmp_path)["w"], torch.full((4,), 2.0))
    assert not any(p.name.startswith(".tmp") for p in tmp_path.iterdir())


def test_shards_roundtrip_and_world_size_mismatch(tmp_path: Path):
    world = 3
    barrier = threading.Barrier(world)
    errors = []

    def rank_fn(rank: int) -> None:
        try:
            C.save_shards(
                tmp_path, 5, rank, world, {"x": torch.full((2,), float(rank))}, barrier.wait
            )
        except BaseException as err:  # noqa: BLE001
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=rank_fn, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    for r in range(world):
        assert torch.equal(C.load_shard(tmp_path, r, world)["x"], torch.full((2,), float(r)))
    with pytest.raises(C.CheckpointError, match="written by 3 ranks, loaded by 2"):
        C.load_shard(tmp_path, 0, 2)
    with pytest.raises(C.CheckpointError, match="'shards' checkpoint, but a 'full' one"):
        C.load_full(tmp_path)


def test_commit_module_is_reexported_by_checkpoint():
    """Atomic commits live in labs.training.commit; ``checkpoint.X`` names still work."""
    from labs.training import commit

    for name in ("CheckpointError", "CRASH_ENV", "step_dir", "latest_step", "verify"):
        assert getattr(C, name) is getattr(commit, name)
