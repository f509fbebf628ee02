"""Plain ``torch.distributed`` programs give the same output on emulated ranks and under torchrun.

The same launch also runs ``x_labs_parallel.py``: Chapter 17b's SP, ring attention, Ulysses and
EP code and its 4-D training step against single-process references, both ways.

``tests/dist_programs/p*.py`` are ordinary client programs (no ``labs`` import).  They run once
on 4 emulated ranks (``labs.dist.run``, in this process) and once under
``torchrun --nproc_per_node 4`` with gloo (all programs in one launch, see ``run_all.py``); every
rank's printed lines must be identical.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

import procgroup
import pytest

from labs.dist.run import run_script

HERE = Path(__file__).resolve().parent / "dist_programs"
RUN_ALL = str(HERE / "run_all.py")
WORLD = 4
PROGRAMS = sorted(p.name for p in HERE.glob("p[0-9]*.py"))


def _by_rank(text: str) -> list[list[str]]:
    """Lines prefixed ``[default<r>]:`` grouped by rank, warnings (and the source line Python
    prints under each) left out."""
    ranks: list[list[str]] = [[] for _ in range(WORLD)]
    for line in text.splitlines():
        m = re.match(r"\[default(\d+)\]:(.*)$", line)
        if m and "Warning" not in m.group(2) and not m.group(2).startswith("  "):
            ranks[int(m.group(1))].append(m.group(2))
    return ranks


def test_at_least_eight_plain_programs():
    assert len(PROGRAMS) >= 8
    for name in PROGRAMS:
        text = (HERE / name).read_text()
        assert "import torch.distributed as dist" in text and "labs" not in text, name


@pytest.fixture(scope="module")
def emulated() -> list[list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = run_script(RUN_ALL, WORLD, prefix=False)
    deprecated = {str(w.message).split("`")[1] for w in caught if w.category is FutureWarning}
    assert {"torch.distributed.all_gather_into_tensor",
            "torch.distributed.reduce_scatter_tensor"} <= deprecated  # fmt: skip
    return lines


def test_emulated_runs_every_program(emulated):
    for r in range(WORLD):
        heads = [x for x in emulated[r] if x.startswith("=== ")]
        assert heads == [f"=== {p}" for p in [*PROGRAMS, "x_labs_parallel.py"]]
    assert "ring got [30.0, 31.0, 32.0]" in emulated[0]
    assert "recv_object_list [{'a': 1}, (2, 3)]" in emulated[0]
    prefixes = ("SP ", "ring [", "ulysses", "EP ", "MESH ")
    checks = [x for x in emulated[0] if x.startswith(prefixes)]
    assert len(checks) == 6 and all("False" not in x for x in checks), checks


@pytest.mark.skipif(sys.platform == "win32", reason="torchrun with gloo on Linux/macOS")
def test_same_output_under_torchrun(emulated, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    # Each rank's output goes to its own file (--redirects): lines teed to one console by four
    # processes can interleave mid-line.
    logs = tmp_path / "logs"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={WORLD}", "--log-dir", str(logs), "--redirects", "3", RUN_ALL]  # fmt: skip
    proc = procgroup.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = ""
    for r in range(WORLD):
        (out,) = logs.glob(f"*/attempt_0/{r}/stdout.log")
        text += "".join(f"[default{r}]:{line}\n" for line in out.read_text().splitlines())
    real = _by_rank(text)
    for r in range(WORLD):
        assert real[r] == emulated[r], f"rank {r} differs"
