"""The one training program, PyTorch FSDP2 in every mode (one emulated rank, emulated ranks,
torchrun over gloo): same losses as a plain single process and as the book's emulated ZeRO-3, exact resume from full and DCP checkpoints, a save killed mid-write, and two
``torchrun --nnodes=2`` invocations rendezvousing on 127.0.0.1.

Each torchrun job is 2 tiny processes for a few steps; every call has an explicit timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import procgroup
import pytest
import torch

from conftest import free_port
from labs.parallel import fsdp
from labs.training import checkpoint as ckpt

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
STEPS = ["--steps", "6", "--batch-size", "4", "--seq-len", "16", "--n-embd", "32"]
TIMEOUT = 150


def _env(crash: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", ckpt.CRASH_ENV)}
    env["OMP_NUM_THREADS"] = "1"
    if crash:
        env[ckpt.CRASH_ENV] = "1"
    return env


def _torchrun(tmp: Path, name: str, *args: str, crash: bool = False) -> tuple[int, dict | None]:
    out = tmp / f"{name}.json"
    cmd = [*TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "labs.parallel.fsdp.train", *STEPS,
           "--out", str(out), *args]  # fmt: skip
    proc = procgroup.run(cmd, cwd=ROOT, env=_env(crash), capture_output=True, text=True,
                          timeout=TIMEOUT)  # fmt: skip
    if proc.returncode == 0 and not crash:
        return 0, json.loads(out.read_text())
    if not crash:
        pytest.fail(f"torchrun {name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.returncode, None


def _cfg(**kw) -> fsdp.TrainConfig:
    return fsdp.TrainConfig(steps=6, batch_size=4, seq_len=16, n_embd=32, **kw)


@pytest.fixture(scope="module")
def reference() -> list[float]:
    return fsdp.run_single(_cfg())["losses"]


def test_fsdp2_torchrun_matches_single_and_emulated_and_resumes_exactly(tmp_path, reference):
    ck = tmp_path / "ckpt"
    emulated = fsdp.run_emulated(_cfg(), 2, 3)["losses"]
    torch.testing.assert_close(emulated, reference, rtol=0, atol=2e-6)

    _, straight = _torchrun(tmp_path, "straight", "--ckpt", str(ck), "--save-at", "3")
    assert straight["mode"] == "fsdp" and straight["start"] == 0
    torch.testing.assert_close(straight["losses"], reference, rtol=0, atol=2e-6)

    # a new job resumes from the full checkpoint of step 3 and saves a DCP checkpoint at step 4,
    # but dies between writing it and the atomic rename: step 3 must stay the latest, loadable
    rc, _ = _torchrun(tmp_path, "killed", "--ckpt", str(ck), "--resume", "--save-at", "4",
                      "--ckpt-format", "dcp", crash=True)  # fmt: skip
    assert rc != 0
    assert ckpt.latest_step(ck) == 3 and not ckpt.step_dir(ck, 4).exists()
    assert ckpt.load_full(ck)["step"] == 3

    # a new plain process resumes the same full checkpoint on 2 emulated ranks (ZeRO-3)
    out = tmp_path / "emulated.json"
    cmd = [sys.executable, "-m", "labs.parallel.fsdp.train", "--mode", "emulated", "--world-size", "2",
           *STEPS, "--ckpt", str(ck), "--resume", "--out", str(out)]  # fmt: skip
    procgroup.run(cmd, cwd=ROOT, env=_env(), check=True, capture_output=True, timeout=TIMEOUT)
    emulated_resumed = json.loads(out.read_text())
    assert emulated_resumed["impl"] == "fsdp2" and emulated_resumed["start"] == 3
    torch.testing.assert_close(emulated_resumed["losses"], reference[3:], rtol=0, atol=2e-6)

    _, resumed = _torchrun(tmp_path, "resumed", "--ckpt", str(ck), "--resume", "--save-at", "4",
                           "--ckpt-format", "dcp")  # fmt: skip
    assert resumed["start"] == 3
    torch.testing.assert_close(resumed["losses"], reference[3:], rtol=0, atol=2e-6)
    _, manifest = ckpt.verify(ck)
    assert manifest["format"] == "dcp" and manifest["world_size"] == 2

    _, from_dcp = _torchrun(tmp_path, "from_dcp", "--ckpt", str(ck), "--resume")
    assert from_dcp["start"] == 4
    torch.testing.assert_close(from_dcp["losses"], reference[4:], rtol=0, atol=2e-6)


def test_fsdp2_in_every_mode_and_dcp_on_emulated_ranks(tmp_path, reference):
    one = fsdp.run_fsdp(_cfg(), world_size=1)
    torch.testing.assert_close(one["losses"], reference, rtol=0, atol=2e-6)
    ck = tmp_path / "dcp"
    fsdp.run_fsdp(_cfg(ckpt_dir=str(ck), save_at=[3], ckpt_format="dcp"), world_size=2)
    _, manifest = ckpt.verify(ck)
    assert manifest["format"] == "dcp" and manifest["world_size"] == 2
    resumed = fsdp.run_fsdp(_cfg(ckpt_dir=str(ck), resume=True), world_size=2)
    assert resumed["start"] == 3
    torch.testing.assert_close(resumed["losses"], reference[3:], rtol=0, atol=2e-6)
    out = tmp_path / "single.json"
    cmd = [sys.executable, "-m", "labs.parallel.fsdp.train", "--mode", "single", *STEPS,
           "--steps", "2", "--out", str(out)]  # fmt: skip
    procgroup.run(cmd, cwd=ROOT, env=_env(), check=True, capture_output=True, timeout=TIMEOUT)
    single = json.loads(out.read_text())
    assert (single["mode"], single["impl"]) == ("single", "fsdp2")
    torch.testing.assert_close(single["losses"], reference[:2], rtol=0, atol=2e-6)


def test_two_nodes_rendezvous_on_localhost(tmp_path, reference):
    port = str(free_port())
    procs = []
    for node in range(2):
        cmd = [*TORCHRUN, "--nnodes=2", "--nproc_per_node=1", f"--node_rank={node}",
               "--master_addr=127.0.0.1", f"--master_port={port}", "-m", "labs.parallel.fsdp.train",
               *STEPS, "--out", str(tmp_path / f"node{node}.json")]  # fmt: skip
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))  # fmt: skip
    try:
        outs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
    res = json.loads((tmp_path / "node0.json").read_text())
    torch.testing.assert_close(res["losses"], reference, rtol=0, atol=2e-6)


@pytest.mark.parametrize(
    "module",
    [
        "labs.parallel.zero.formulas",
        "labs.parallel.zero.state",
        "labs.parallel.zero.trainer",
        "labs.parallel.fsdp.setup",
        "labs.parallel.fsdp.runs",
        "labs.parallel.fsdp.fsdp2",
    ],
)
def test_split_modules_import_alone(module):
    """Each piece imports first in a fresh interpreter (no cycle); the packages gather the names."""
    code = (
        f"import {module}\n"
        "from labs.parallel.zero import ZeroTrainer, padded_numel, zero_bytes_per_rank, "
        "zero_comm_bytes_per_rank\n"
        "from labs.parallel.fsdp import TrainConfig, global_batch, local_rows, run_emulated, "
        "run_fsdp, run_single, memory_ledger\n"
        "from labs.parallel.fsdp.train import main\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
