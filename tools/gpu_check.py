"""Run the book on a CUDA GPU and report: every page, every lab solution, the GPU tests.

Usage (from the repository root; ``bash tools/gpu-check.sh`` picks the interpreter)::

    python tools/gpu_check.py            # every chapter and lab, then the GPU tests
    python tools/gpu_check.py --quick    # the pages with GPU sections, then the GPU tests
    python tools/gpu_check.py --list     # print what would run, run nothing

Each page runs in its own kernel through ``tools/run_page.py`` (several at once: ``--jobs``),
with the GPU visible and ``LABS_DEVICE`` unset, so every measuring cell picks CUDA through
``labs.device()``; the pages whose guards compare GPU timings (:data:`ALONE`) run last, alone. The GPU tests (``tests/test_gpu*.py``, marked ``gpu``, and the device-adaptive
Triton attention tests) run in one pytest process beside the pages. The report goes to ``--out``
(default ``gpu-check/``): ``report.json`` and ``report.md`` with the device, the driver, torch,
CUDA and Triton versions, and PASS/FAIL with seconds for each page and each test.
``--publish`` also copies ``report.md`` to ``book/appendix/gpu-report.txt``, which the appendix
("Checking the GPU paths") shows. Without CUDA it says so in one line and exits 0.
Exit status: 0 when everything passed (or there is no GPU), 1 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "book" / "chapters").glob("*.md"))
LABS = sorted((ROOT / "book" / "labs").glob("*.ipynb"))
#: pages with GPU sections or measuring cells a GPU changes: what --quick runs
QUICK = (
    "ch02", "ch04", "ch06", "ch08", "ch09", "ch10", "ch11", "ch21", "ch22",
    "lab02", "lab04", "lab09", "lab11", "lab13", "lab16", "lab21",
)  # fmt: skip
#: pages whose guards compare timings on the GPU: run one at a time, after the others
ALONE = ("ch08", "ch09", "ch11")
GPU_TESTS = ["tests/test_gpu.py", "tests/test_gpu_runners.py", "tests/test_triton_attention.py"]
PUBLISHED = ROOT / "book" / "appendix" / "gpu-report.txt"  # MyST, included by the appendix


def rel(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def plan(quick: bool, only: list[str] | None = None) -> list[Path]:
    """The pages to execute: every chapter and lab (``quick``: those in :data:`QUICK`)."""
    pages = CHAPTERS + LABS
    if quick:
        pages = [p for p in pages if p.name.split("-")[0] in QUICK]
    if only:
        pages = [p for p in pages if any(o in p.name for o in only)]
    return pages


def cuda_status() -> tuple[bool, str]:
    """``(available, one line)``: whether this interpreter's torch sees a CUDA GPU, and why not."""
    import torch

    if torch.cuda.is_available():
        return True, f"{torch.cuda.device_count()} CUDA device(s)"
    build = (
        "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    )
    return False, (
        f"gpu-check: no CUDA GPU visible to torch {torch.__version__} ({build}) in "
        f"{sys.executable}: nothing to check (set PYTHON to an interpreter with a CUDA build)"
    )


def environment() -> dict:
    """Device, driver and versions for the report."""
    import torch

    info: dict = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_cores": os.cpu_count(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info["device"] = f"{p.name} (sm{p.major}{p.minor}, {p.total_memory / 2**30:.0f} GiB)"
        info["gpus"] = torch.cuda.device_count()
    smi = shutil.which("nvidia-smi")
    if smi:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True)  # fmt: skip
        info["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    return info


def kernel_env(tmp: Path, threads: int) -> dict:
    """The environment of every page and test: this interpreter as the ``python3`` kernel."""
    spec = tmp / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"})
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LABS_DEVICE", "MPLBACKEND")}
    env.update(
        JUPYTER_PATH=os.pathsep.join([str(tmp), env.get("JUPYTER_PATH", "")]).rstrip(os.pathsep),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
    )
    return env


def run_page(page: Path, env: dict, timeout: int) -> dict:
    """Execute one page with ``tools/run_page.py``; PASS/FAIL, seconds and the error's tail."""
    t0 = time.perf_counter()
    cmd = [sys.executable, str(ROOT / "tools" / "run_page.py"), str(page), "--timeout", "300"]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        ok, log = out.returncode == 0, out.stdout + out.stderr
    except subprocess.TimeoutExpired as err:
        ok, log = False, f"timed out after {timeout} s\n{err.stdout or ''}"
    seconds = time.perf_counter() - t0
    result = {"page": rel(page), "status": "PASS" if ok else "FAIL",
              "seconds": round(seconds, 1)}  # fmt: skip
    if not ok:
        result["error"] = log[-1500:]
    return result


def run_tests(env: dict, xml: Path, timeout: int) -> list[dict]:
    """The GPU tests in one pytest process; one result per test from its JUnit XML."""
    files = [f for f in GPU_TESTS if (ROOT / f).exists()]
    cmd = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
           f"--junitxml={xml}", "-o", "addopts="]  # fmt: skip
    try:
        out = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
        log = out.stdout + out.stderr
    except subprocess.TimeoutExpired:
        log = f"pytest timed out after {timeout} s"
    if not xml.exists():
        return [{"test": "pytest " + " ".join(files), "status": "FAIL", "seconds": 0.0,
                 "message": log[-1500:]}]  # fmt: skip
    return parse_junit(xml)


def parse_junit(xml: Path) -> list[dict]:
    """``[{test, status (PASS/FAIL/SKIP), seconds, message}]`` from a pytest JUnit XML file."""
    results = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        status, message = "PASS", ""
        for tag, label in (("failure", "FAIL"), ("error", "FAIL"), ("skipped", "SKIP")):
            el = case.find(tag)
            if el is not None:
                status, message = label, (el.get("message") or el.text or "").strip()[:300]
                break
        results.append({"test": name, "status": status,
                        "seconds": round(float(case.get("time", 0)), 1), "message": message})  # fmt: skip
    return results


def markdown(report: dict) -> str:
    """The report as Markdown: the environment, then one table for pages, one for tests."""
    env = report["environment"]
    pages, tests = report["pages"], report["tests"]
    failed = [r for r in pages + tests if r["status"] == "FAIL"]
    lines = [
        f"**{'All passed' if not failed else f'{len(failed)} failed'}** "
        f"({report['mode']} run of `tools/gpu-check.sh`, {report['seconds']:.0f} s in all)",
        "",
        "| | |",
        "|---|---|",
    ]
    for key in (
        "date",
        "device",
        "gpus",
        "driver",
        "torch",
        "cuda",
        "triton",
        "python",
        "cpu_cores",
    ):
        lines.append(f"| {key} | {env.get(key) if env.get(key) is not None else 'n/a'} |")
    lines += ["", "| page | result | seconds |", "|---|---|---|"]
    lines += [f"| `{r['page']}` | {r['status']} | {r['seconds']:.1f} |" for r in pages]
    lines += ["", "| GPU test | result | seconds |", "|---|---|---|"]
    for r in tests:
        message = r.get("message", "").replace("|", "\\|").replace("\n", " ")[:80]
        note = f" ({message})" if r["status"] != "PASS" and message else ""
        lines.append(f"| `{r['test']}` | {r['status']}{note} | {r['seconds']:.1f} |")
    return "\n".join(lines).replace("\r", "") + "\n"


def write_report(report: dict, out: Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md`` into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    j, m = out / "report.json", out / "report.md"
    j.write_text(json.dumps(report, indent=1) + "\n")
    m.write_text("# GPU check\n\n" + markdown(report))
    return j, m


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the pages with GPU sections")
    parser.add_argument("--list", action="store_true", help="print what would run and exit")
    parser.add_argument(
        "--only", nargs="+", help="only pages whose file name contains one of these"
    )
    parser.add_argument("--page", nargs="+", type=Path, help="these pages instead of the book's")
    parser.add_argument("--no-tests", action="store_true", help="skip the GPU tests")
    parser.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    parser.add_argument("--timeout", type=int, default=480, help="seconds per page")
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-check")
    parser.add_argument("--publish", action="store_true",
                        help=f"copy report.md to {PUBLISHED.relative_to(ROOT)}")  # fmt: skip
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run even without CUDA (to test this tool on a CPU)")  # fmt: skip
    args = parser.parse_args(argv)
    pages = [p.resolve() for p in args.page] if args.page else plan(args.quick, args.only)
    tests = [] if args.no_tests else [f for f in GPU_TESTS if (ROOT / f).exists()]
    if args.list:
        mode = "quick" if args.quick else "full"
        print(f"gpu-check ({mode}): {len(pages)} pages, {args.jobs} at a time")
        for p in pages:
            alone = p.name.split("-")[0] in ALONE
            print(f"  page  {'(alone, last) ' if alone else ''}{rel(p)}")
        for f in tests:
            print(f"  tests {f}")
        return 0
    has_cuda, line = cuda_status()
    if not has_cuda and not args.allow_cpu:
        print(line)
        return 0
    start = time.perf_counter()
    cores = os.cpu_count() or 2
    with tempfile.TemporaryDirectory() as tmp:
        env = kernel_env(Path(tmp), max(1, cores // max(1, args.jobs + bool(tests))))
        alone = [p for p in pages if p.name.split("-")[0] in ALONE]
        shared = [p for p in pages if p not in alone]
        page_results = []

        def report_page(r: dict) -> None:
            page_results.append(r)
            print(f"{r['status']}  {r['seconds']:6.1f} s  {r['page']}", flush=True)

        with cf.ThreadPoolExecutor(max_workers=args.jobs + 1) as pool:
            xml = Path(tmp) / "tests.xml"
            test_job = pool.submit(run_tests, env, xml, 600) if tests else None
            jobs = [pool.submit(run_page, p, env, args.timeout) for p in shared]
            for fut in cf.as_completed(jobs):
                report_page(fut.result())
            test_results = test_job.result() if test_job else []
        for p in alone:  # their guards compare GPU timings: nothing else on the GPU meanwhile
            report_page(run_page(p, env, args.timeout))
    order = {rel(p): i for i, p in enumerate(pages)}
    page_results.sort(key=lambda r: order.get(r["page"], 0))
    report = {
        "mode": "quick" if args.quick else ("pages" if args.page or args.only else "full"),
        "seconds": round(time.perf_counter() - start, 1),
        "environment": environment(),
        "pages": page_results,
        "tests": test_results,
    }
    j, m = write_report(report, args.out)
    for r in test_results:
        if r["status"] != "PASS":
            print(f"{r['status']}  {r['test']}  {r['message'][:200]}")
    failed = [r for r in page_results + test_results if r["status"] == "FAIL"]
    print(f"gpu-check: {len(page_results)} pages, {len(test_results)} tests, {len(failed)} failed "
          f"in {report['seconds']:.0f} s; report: {rel(j)}, {m.name}")  # fmt: skip
    if args.publish:
        PUBLISHED.write_text(re.sub(r"^# GPU check\n\n", "", m.read_text()))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
