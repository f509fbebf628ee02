"""How long a course takes to grade: submissions per core-minute for every lab, a class of 200.

For every lab (``book/labs``), in one process, the grader as a class run uses it
(:func:`labs.course.grade.grade_notebooks`'s pieces):

* the **reference run** (the key's solution, once per lab per class run);
* the **solution** graded as a submission (a full, passing run: the most a submission costs) and
  the **student stub** (every exercise failing: what an idle student costs), each in its own
  sealed kernel, one after the other, with one thread per kernel (``OMP_NUM_THREADS=1``), so one
  submission occupies one core.

It reports wall seconds, CPU seconds (the grader and every process under it, sampled with
``psutil``), **submissions per core-minute** (60 / CPU seconds of the solution) and the
**projected time of a class** (``--class-size``, default 200) on this machine, idle, with
``--jobs`` (default: its cores): one reference run, then ``class size x solution CPU seconds /
min(jobs, cores)``. ``--check-jobs`` grades ``2 x jobs`` copies of one lab's solution with
``--jobs`` and prints the measured time beside that projection.

``--overhead`` instead measures the grading overhead per notebook on a tiny synthetic lab (a bare
Jupyter kernel against the sealed sandbox with the rewritten checks; the issue's budget: under
2 s). Usage::

    python benchmarks/bench_grading.py [--labs lab02 lab09] [--class-size 200] [--jobs 8]
    python benchmarks/bench_grading.py --overhead [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("OMP_NUM_THREADS", "1")  # one submission, one core (kernels inherit it)
os.environ.setdefault("MKL_NUM_THREADS", "1")

import psutil  # noqa: E402

from labs.course.grade import grade_notebook, grade_notebooks, reference_run  # noqa: E402
from labs.course.isolation import isolation_available  # noqa: E402
from labs.course.key import load_key  # noqa: E402


class CpuMeter:
    """CPU seconds of this process and every process under it, sampled every ``period`` s."""

    def __init__(self, period: float = 0.1):
        self.period, self.seen, self.stop = period, {}, threading.Event()
        self.me = psutil.Process()

    def _sample(self) -> None:
        for p in self.me.children(recursive=True):
            try:
                t = p.cpu_times()
                self.seen[(p.pid, p.create_time())] = t.user + t.system
            except psutil.Error:
                continue

    def _loop(self) -> None:
        while not self.stop.wait(self.period):
            self._sample()

    def __enter__(self) -> CpuMeter:
        t = self.me.cpu_times()
        self.own0 = t.user + t.system
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        self.stop.set()
        self.thread.join()
        t = self.me.cpu_times()
        self.cpu = (t.user + t.system - self.own0) + sum(self.seen.values())


def measure_lab(lab: Path) -> dict:
    """Reference run, solution and stub of one lab: wall and CPU seconds of each."""
    key = load_key(REPO / "instructor" / "keys" / f"{lab.stem}.json")
    out = {"lab": lab.stem}
    with CpuMeter() as m:
        ref = reference_run(key)
    out["reference"] = (m.wall, m.cpu)
    for name, path in (("solution", lab), ("stub", REPO / "student" / lab.name)):
        with CpuMeter() as m:
            result = grade_notebook(path, key, reference=ref)
        out[name] = (m.wall, m.cpu)
        out[f"{name}_passed"] = sum(e.passed for e in result.exercises), len(result.exercises)
    return out


def projected(row: dict, class_size: int, jobs: int, cores: int) -> float:
    """Seconds for a class of ``class_size`` solutions of this lab with ``jobs`` on ``cores`` of
    an otherwise idle machine: the reference run, then the submissions ``min(jobs, cores)`` at a
    time (CPU seconds: on a busy machine the wall times above are longer by the load)."""
    return row["reference"][1] + class_size * row["solution"][1] / max(1, min(jobs, cores))


def check_jobs(lab: Path, jobs: int, cores: int) -> None:
    """Grade ``2 x jobs`` copies of a lab's solution with ``jobs``: measured vs projected."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(2 * jobs):
            (Path(tmp) / f"s{i:03d}").mkdir()
            paths.append(shutil.copy(lab, Path(tmp) / f"s{i:03d}" / lab.name))
        row = measure_lab(lab)
        with CpuMeter() as m:
            grade_notebooks(paths, jobs=jobs, key=REPO / "instructor" / "keys" / f"{lab.stem}.json")
    model = projected(row, len(paths), jobs, cores)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{lab.stem}: {len(paths)} copies with --jobs {jobs}: measured {m.wall:.0f} s, "
          f"projected for idle cores {model:.0f} s (ratio {m.wall / model:.2f}; load average "
          f"{load:.1f} on {cores} cores)")  # fmt: skip


def overhead(repeats: int) -> None:
    """Bare kernel vs graded in the sealed sandbox, on the tests' tiny synthetic lab."""
    from jupyter_client.manager import start_new_kernel

    from notebook_factory import attack_lab, write, write_lab_and_key

    def bare(nb) -> float:
        t0 = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            for c in nb.cells:
                if c.cell_type == "code":
                    kc.execute_interactive(c.source, timeout=60, output_hook=lambda msg: None)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        return time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        _, key_path = write_lab_and_key(Path(tmp), "lab99-bench", attack_lab())
        sub = write(Path(tmp) / "s" / "lab99-bench.ipynb", attack_lab())
        key = load_key(key_path)
        t0 = time.perf_counter()
        ref = reference_run(key)
        ref_s = time.perf_counter() - t0
        bare_s, graded_s = [], []
        for _ in range(repeats):
            bare_s.append(bare(attack_lab()))
            t0 = time.perf_counter()
            result = grade_notebook(sub, key, reference=ref)
            graded_s.append(time.perf_counter() - t0)
            assert all(e.passed for e in result.exercises), result
    b, g = statistics.median(bare_s), statistics.median(graded_s)
    print(f"reference run (once per lab):      {ref_s:6.2f} s")
    print(f"bare kernel, run the cells:        {b:6.2f} s (median of {repeats})")
    print(f"graded in the sealed sandbox:      {g:6.2f} s (median of {repeats})")
    print(f"grading overhead per notebook:     {g - b:6.2f} s  (ratio {g / b:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labs", nargs="+", help="only these labs (name prefixes, e.g. lab02)")
    parser.add_argument("--class-size", type=int, default=200)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parser.add_argument("--jobs", type=int, default=cores, help=f"default: the cores ({cores})")
    parser.add_argument("--check-jobs", action="store_true", help="measure --jobs on one lab")
    parser.add_argument("--overhead", action="store_true", help="the per-notebook overhead")
    parser.add_argument("--repeats", type=int, default=3, help="with --overhead")
    args = parser.parse_args()
    print(f"isolation: {isolation_available() or 'sealed'}; "
          f"{cores} cores; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")  # fmt: skip
    if args.overhead:
        overhead(args.repeats)
        return
    labs = sorted((REPO / "book" / "labs").glob("*.ipynb"))
    if args.labs:
        labs = [p for p in labs if any(p.name.startswith(x) for x in args.labs)]
    size, jobs = args.class_size, args.jobs
    print(f"{'lab':<28} {'reference':>13} {'solution':>13} {'stub':>13} {'subs per':>9} "
          f"{f'class of {size},':>15}")  # fmt: skip
    print(f"{'':<28} {'wall/CPU s':>13} {'wall/CPU s':>13} {'wall/CPU s':>13} "
          f"{'core-min':>9} {f'--jobs {jobs}':>15}")  # fmt: skip
    total = 0.0
    for lab in labs:
        row = measure_lab(lab)
        cells = [f"{row[k][0]:5.1f}/{row[k][1]:5.1f}" for k in ("reference", "solution", "stub")]
        rate = 60 / row["solution"][1]
        minutes = projected(row, size, jobs, cores) / 60
        total += minutes
        ok = row["solution_passed"][0] == row["solution_passed"][1] and not row["stub_passed"][0]
        print(f"{lab.stem:<28} {cells[0]:>13} {cells[1]:>13} {cells[2]:>13} {rate:9.1f} "
              f"{minutes:12.1f} min{'' if ok else '  (solution or stub graded wrongly!)'}")  # fmt: skip
    hours = f" ({total / 60:.1f} h)" if total >= 60 else ""
    print(f"every lab above, a class of {size} each, --jobs {jobs} on {cores} idle cores: "
          f"{total:.0f} min{hours}; N machines (--shard K/N) take about 1/N of it")  # fmt: skip
    if args.check_jobs and labs:
        check_jobs(labs[0], jobs, cores)


if __name__ == "__main__":
    main()
