"""Grading overhead per notebook: the sealed sandbox and the result transfer, side by side.

Runs the same tiny three-exercise submission (the synthetic lab of the grading tests) in two
ways, in one process:

* **bare**: a plain Jupyter kernel (``jupyter_client``, no namespaces, no checks): start it, run
  the code cells, stop it;
* **graded**: :func:`labs.course.grade.grade_notebook` with the lab's reference run already made
  (as in a class run, where it is made once per lab): sandbox start (unshare, seal, kernel),
  the rewritten checks, the result transfer and the comparison in the grader.

The difference is the grading overhead per notebook (the issue's budget: under 2 s).  Usage::

    python benchmarks/bench_grading.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from labs.course.grade import grade_notebook, reference_run  # noqa: E402
from labs.course.isolation import isolation_available  # noqa: E402
from labs.course.key import load_key  # noqa: E402
from notebook_factory import attack_lab, write, write_lab_and_key  # noqa: E402


def bare(nb) -> float:
    from jupyter_client.manager import start_new_kernel

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _, key_path = write_lab_and_key(Path(tmp), "lab99-bench", attack_lab())
        sub = write(Path(tmp) / "s" / "lab99-bench.ipynb", attack_lab())
        key = load_key(key_path)
        t0 = time.perf_counter()
        ref = reference_run(key)
        ref_s = time.perf_counter() - t0
        bare_s, graded_s = [], []
        for _ in range(args.repeats):
            bare_s.append(bare(attack_lab()))
            t0 = time.perf_counter()
            result = grade_notebook(sub, key, reference=ref)
            graded_s.append(time.perf_counter() - t0)
            assert all(e.passed for e in result.exercises), result
    b, g = statistics.median(bare_s), statistics.median(graded_s)
    print(f"isolation: {isolation_available() or 'sealed'}")
    print(f"reference run (once per lab):      {ref_s:6.2f} s")
    print(f"bare kernel, run the cells:        {b:6.2f} s (median of {args.repeats})")
    print(f"graded in the sealed sandbox:      {g:6.2f} s (median of {args.repeats})")
    print(f"grading overhead per notebook:     {g - b:6.2f} s  (ratio {g / b:.2f}x)")


if __name__ == "__main__":
    main()
