"""PyTorch's own distributed test suite on emulated ranks.

PyTorch ships the suite it runs against gloo and NCCL with the wheel:
``torch.testing._internal.distributed.distributed_test.DistributedTest._DistTestBase``, about
300 test methods (collectives, groups, DDP, object collectives, profiling, timeouts), each run
by one process per rank.  :func:`run_case` runs one of them on emulated ranks instead: every
rank makes the test case, joins the default group with ``init_process_group("gloo", ...)`` as
torch's harness does (on an emulated rank that is the emulated backend,
:mod:`labs.dist.backend`), runs the test method and leaves.

Two things of the harness itself are per process and are given to each rank here: the test
module's ``Barrier`` (files named by ``os.getpid()``, with a class-level counter) becomes the
emulator's barrier, and the module sees ``os.getpid()`` return a number of the rank's own
(``test_get_rank`` names files by it).  Nothing of torch.distributed is changed.

``python -m labs.dist.torch_suite [--world-size 2] [-k SUBSTRING] [NAME ...]`` runs the
suite (or the named cases) and prints one line per case and the counts;
``tools/dist_torch_suite.py`` also runs chosen cases under real gloo processes to compare.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import traceback
import unittest
from datetime import timedelta
from typing import Any

__all__ = ["Outcome", "case_names", "run_case", "run_cases", "main"]


@dataclasses.dataclass
class Outcome:
    """One test case: ``status`` is ``"pass"``, ``"skip"`` or ``"fail"``; ``detail`` the skip
    reason or the failure's last line; ``seconds`` its wall time."""

    name: str
    status: str
    detail: str = ""
    seconds: float = 0.0


class _RankOs:
    """The test module's ``os``: ``getpid()`` is the rank's own (a process per rank)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def getpid() -> int:
        from labs import dist

        return os.getpid() * 1000 + dist.get_rank() if dist.is_emulated() else os.getpid()


class _Barrier:
    """The test module's ``Barrier`` on emulated ranks: every rank of the world waits, on an
    emulator group of its own (never matched with a test's own barriers)."""

    @classmethod
    def init(cls) -> None:
        return None

    @classmethod
    def sync(cls, wait_for: int | None = None, timeout: float = 10) -> None:
        from labs import dist

        dist.barrier(_harness_group[dist.get_rank()])


_harness_group: dict[int, Any] = {}  # rank -> the emulator group of the harness's barrier


_module: Any = None


def _suite(world_size: int) -> Any:
    """The test module, imported once per process for ``world_size`` ranks."""
    global _module
    if _module is None:
        os.environ.setdefault("BACKEND", "gloo")
        os.environ["WORLD_SIZE"] = str(world_size)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("PYTORCH_PRINT_REPRO_ON_FAILURE", "0")
        from torch.testing._internal import common_distributed as cd

        cd.initialize_temp_directories()
        from torch.testing._internal.distributed import distributed_test as dt

        dt.os, dt.Barrier = _RankOs(), _Barrier
        _module = dt
    if os.environ["WORLD_SIZE"] != str(world_size):
        raise ValueError(
            f"torch_suite: the suite was imported for {os.environ['WORLD_SIZE']} ranks in this "
            f"process (its decorators read WORLD_SIZE once); got world_size={world_size}"
        )
    return _module


def case_names(world_size: int = 2) -> list[str]:
    """Every test method of ``DistributedTest._DistTestBase``, sorted."""
    base = _suite(world_size).DistributedTest._DistTestBase
    return sorted(n for n in dir(base) if n.startswith("test_"))


def _case_class(dt: Any) -> type:
    class Case(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
        pass

    return Case


def _rank_program(name: str, file_name: str, world_size: int) -> None:
    import torch.distributed as tdist
    from torch.testing._internal import common_distributed as cd
    from torch.testing._internal import common_utils

    from labs import dist

    dt = _suite(world_size)
    method = getattr(_case_class(dt), name)
    if getattr(method, "__unittest_skip__", False):  # unittest's runner would not call it
        raise unittest.SkipTest(getattr(method, "__unittest_skip_why__", ""))
    _harness_group[dist.get_rank()] = dist.new_group()  # before torch's group: an emulator one
    case = _case_class(dt)(name)
    case.rank = tdist_rank = int(_rank())
    case.file_name = file_name
    seconds = dt.CUSTOM_PG_TIMEOUT.get(name, dt.default_pg_timeout)
    tdist.init_process_group(init_method=f"file://{file_name}", backend=dt.BACKEND,
                             world_size=world_size, rank=tdist_rank,
                             timeout=timedelta(seconds=seconds))  # fmt: skip
    codes = {s.exit_code: s.message for s in cd.TEST_SKIPS.values()}
    common_utils.set_rng_seed()
    case._barrier()
    try:
        getattr(case, name)()
    except SystemExit as err:  # the suite's decorators exit with a skip code
        if err.code in codes:
            raise unittest.SkipTest(codes[err.code]) from None
        raise
    case._barrier()
    tdist.destroy_process_group()


def _rank() -> int:
    from labs import dist

    return dist.get_rank()


def run_case(name: str, world_size: int = 2, timeout: float = 120.0) -> Outcome:
    """Run test method ``name`` on ``world_size`` emulated ranks; a skip on any rank skips it."""
    from torch.testing._internal import common_distributed as cd

    from labs import dist

    _suite(world_size)
    cd.cleanup_temp_dir()
    cd.initialize_temp_directories()
    file_name = os.path.join(os.environ["TEMP_DIR"], "init_dir", "shared_init_file")
    t0 = time.perf_counter()
    try:
        dist.launch(_rank_program, world_size, name, file_name, world_size, timeout=timeout)
    except unittest.SkipTest as err:
        return Outcome(name, "skip", _last_line(err), time.perf_counter() - t0)
    except BaseException as err:  # noqa: BLE001 - a failing case is a result
        if isinstance(err, KeyboardInterrupt):
            raise
        if isinstance(err.__cause__, unittest.SkipTest):
            return Outcome(name, "skip", _last_line(err.__cause__), time.perf_counter() - t0)
        detail = _last_line(err) or "".join(traceback.format_exception_only(err)).strip()
        return Outcome(name, "fail", detail, time.perf_counter() - t0)
    return Outcome(name, "pass", "", time.perf_counter() - t0)


def _last_line(err: BaseException) -> str:
    """The error's type and the first line of its message."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300]}" if text else type(err).__name__


def run_cases(names: list[str], world_size: int = 2, timeout: float = 120.0,
              echo: bool = False) -> list[Outcome]:  # fmt: skip
    """:func:`run_case` for each name, in order (one line each when ``echo``)."""
    out = []
    for name in names:
        o = run_case(name, world_size, timeout)
        out.append(o)
        if echo:
            print(f"{o.status:4s} {o.seconds:6.1f}s {name} {o.detail}", flush=True)
    return out


def main(argv: list[str] | None = None) -> list[Outcome]:
    ap = argparse.ArgumentParser(prog="python -m labs.dist.torch_suite",
                                 description=__doc__.split("\n")[0])  # fmt: skip
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument("-k", default="", help="only the cases whose name contains this")
    ap.add_argument("names", nargs="*", help="cases to run (default: all)")
    a = ap.parse_args(argv)
    names = a.names or [n for n in case_names(a.world_size) if a.k in n]
    outcomes = run_cases(names, a.world_size, a.timeout, echo=True)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("pass", "skip", "fail")}
    print(f"{len(outcomes)} cases on {a.world_size} emulated ranks: {counts['pass']} passed, "
          f"{counts['skip']} skipped, {counts['fail']} failed")  # fmt: skip
    return outcomes


if __name__ == "__main__":
    main(sys.argv[1:])
