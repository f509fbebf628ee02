"""PyTorch's own distributed test suite (``DistributedTest._DistTestBase``, shipped in the wheel)
on emulated ranks: every case at 2 ranks, and at 4 ranks the cases that need more than 2.

No case may fail; the counts of cases run, passed, skipped and failed must be those of the
appendix's table (``book/appendix/running-the-labs.md``), so the page says what this run
measured.  Every skip is the suite's own (no GPU, NCCL- or MPI-only, a world size);
``tools/dist_torch_suite.py --gloo`` reruns chosen cases under real gloo processes to compare.
Each run is a process of its own: the suite reads ``WORLD_SIZE`` when it is imported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO

APPENDIX = REPO / "book" / "appendix" / "running-the-labs.md"
STATED = re.compile(r"^\| (\d) \| (\d+) [^|]*\| (\d+) \| (\d+) \| (\d+) \|$", re.MULTILINE)


def _run(world: int, names: list[str]) -> dict[str, str]:
    cmd = [sys.executable, "-m", "labs.dist.torch_suite", "--world-size", str(world), *names]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    status = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"(pass|skip|fail)\s+[\d.]+s (test_\w+)\s*(.*)$", line)
        if m:
            status[m.group(2)] = f"{m.group(1)} {m.group(3)}".strip()
    return status


def test_pytorch_distributed_suite_on_emulated_ranks():
    two = _run(2, [])
    failed = {n: s for n, s in two.items() if s.startswith("fail")}
    assert not failed, failed
    small = [n for n, s in two.items() if "world size" in s]  # the ones 2 ranks cannot run
    four = _run(4, small)
    failed = {n: s for n, s in four.items() if s.startswith("fail")}
    assert not failed, failed
    stated = {int(m.group(1)): tuple(map(int, m.group(2, 3, 4, 5)))
              for m in STATED.finditer(APPENDIX.read_text())}  # fmt: skip
    measured = {
        w: (
            len(res),
            *(sum(s.startswith(k) for s in res.values()) for k in ("pass", "skip", "fail")),
        )
        for w, res in ((2, two), (4, four))
    }
    assert stated == measured, f"the appendix states {stated}, this run measured {measured}"
