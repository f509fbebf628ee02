"""PyTorch's own distributed test suite on emulated ranks, and under real gloo to compare.

    python tools/dist_torch_suite.py                 # every case on 2 emulated ranks (~10 min)
    python tools/dist_torch_suite.py -k all_reduce   # the cases whose name contains all_reduce
    python tools/dist_torch_suite.py --gloo          # then rerun the failures under real gloo
    python tools/dist_torch_suite.py --gloo-only test_get_rank test_barrier

Emulated: ``labs.dist.torch_suite`` (one test method per launch).  Under gloo: torch's own
harness, ``MultiProcessTestCase`` spawning one process per rank (as PyTorch's
``test/distributed/test_distributed_spawn.py`` does), a few seconds per case.  With ``--gloo``
the table at the end says, for every case that failed emulated, whether it passes under gloo:
those are the emulator's to fix; the others fail under gloo on this machine too.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

WORLD = os.environ.get("LABS_TORCH_SUITE_WORLD", "2")

if os.environ.get("LABS_TORCH_SUITE_GLOO") == "1":  # the reference run (and its spawned ranks)
    os.environ.update(BACKEND="gloo", WORLD_SIZE=WORLD, PYTORCH_PRINT_REPRO_ON_FAILURE="0")
    from torch.testing._internal.common_distributed import TEST_SKIPS  # noqa: F401
    from torch.testing._internal.distributed.distributed_test import (
        DistributedTest,
        TestDistBackend,
    )

    class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
        """torch's own spawn harness: one process per rank, real gloo."""

        def setUp(self):
            super().setUp()
            self._spawn_processes()


def gloo_outcome(name: str, timeout: float = 300.0) -> tuple[str, float]:
    """("pass" | "skip" | "fail", seconds) of one case under real gloo processes."""
    env = {**os.environ, "LABS_TORCH_SUITE_GLOO": "1", "LABS_TORCH_SUITE_WORLD": WORLD}
    cmd = [sys.executable, os.path.abspath(__file__), "--unittest",
           f"TestDistBackendWithSpawn.{name}"]  # fmt: skip
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return "fail", time.perf_counter() - t0
    tail = p.stderr.strip().splitlines()[-3:]
    status = "pass" if p.returncode == 0 else "fail"
    if p.returncode == 0 and any("skipped" in line for line in tail):
        status = "skip"
    return status, time.perf_counter() - t0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--unittest"]:
        import unittest

        prog = unittest.main(module="__main__", argv=[sys.argv[0], *argv[1:]], exit=False)
        return 0 if prog.result.wasSuccessful() else 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-k", default="", help="only the cases whose name contains this")
    ap.add_argument("--gloo", action="store_true", help="rerun the emulated failures under gloo")
    ap.add_argument("--gloo-only", action="store_true", help="run the named cases under gloo")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    if a.gloo_only:
        for name in a.names:
            status, secs = gloo_outcome(name)
            print(f"gloo {status:4s} {secs:6.1f}s {name}", flush=True)
        return 0
    from labs.dist import torch_suite

    names = a.names or [n for n in torch_suite.case_names(int(WORLD)) if a.k in n]
    outcomes = torch_suite.run_cases(names, int(WORLD), a.timeout, echo=True)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("pass", "skip", "fail")}
    print(f"{len(outcomes)} cases on {WORLD} emulated ranks: {counts['pass']} passed, "
          f"{counts['skip']} skipped, {counts['fail']} failed")  # fmt: skip
    if a.gloo:
        print("\nthe emulated failures under real gloo (torch's spawn harness):")
        for o in outcomes:
            if o.status == "fail":
                status, secs = gloo_outcome(o.name)
                print(f"  gloo {status:4s} {secs:6.1f}s {o.name}  (emulated: {o.detail[:120]})",
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
