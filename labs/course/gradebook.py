"""``labs-grade``: grade submissions or a whole class folder into one gradebook.

Usage::

    labs-grade SUBMISSION.ipynb [...]                 # table + grade-results.json
    labs-grade --class DIR --gradebook gradebook.csv --jobs 4

``--class DIR`` grades ``DIR/<student>/<lab>.ipynb`` (a flat folder ``DIR/<student>.ipynb`` works
too; the lab is recognised by the ``labNN`` in the file name, or give ``--key``).  The gradebook
has one row per student x lab x exercise: ``student, lab, exercise, outcome (PASS/FAIL), points
(1/0), status (graded/invalid/timeout/tampered), message, notebook``; ``.json`` gives the same
grouped by notebook.  A summary per student and a progress bar are printed.

Exit status: 0 when everything was graded (FAILs, invalid, tampered or timed-out submissions
included); 1 with ``--strict`` if any exercise failed; 2 for a usage error (no submission found,
a missing file, an unreadable key); 3 when the grader itself failed (no kernel could start, the
gradebook could not be written).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import threading
from pathlib import Path

from labs.course.grade import grade_notebooks
from labs.course.key import KEY_DIR, load_key
from labs.course.notebooks import NotebookError
from labs.course.reference import CELL_TIMEOUT, NOTEBOOK_TIMEOUT, GraderError
from labs.course.results import NotebookResult

__all__ = ["discover", "rows", "write_gradebook", "table", "summary", "main"]

COLUMNS = ["student", "lab", "exercise", "outcome", "points", "status", "message", "notebook"]


def discover(class_dir: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """``([(student, notebook)], [refused])`` under a class folder, sorted.

    Hidden folders (``.ipynb_checkpoints``) are skipped; symbolic links (to a file or a folder)
    and anything that resolves outside the class folder are refused and reported.
    """
    found, refused = [], []
    root = class_dir.resolve()
    for path in sorted(class_dir.rglob("*.ipynb")):
        rel = path.relative_to(class_dir)
        if any(part.startswith(".") for part in rel.parts):
            continue
        links = [class_dir.joinpath(*rel.parts[: i + 1]) for i in range(len(rel.parts))]
        if any(p.is_symlink() for p in links) or root not in path.resolve().parents:
            refused.append(f"{rel}: a symbolic link or outside the class folder (not graded)")
            continue
        if not path.is_file():
            continue
        student = rel.parts[0] if len(rel.parts) > 1 else path.stem
        found.append((student, path))
    return found, refused


def _cell(text: str) -> str:
    """A CSV cell that no spreadsheet evaluates as a formula (OWASP CSV injection)."""
    text = str(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def rows(results: list[NotebookResult], students: dict[str, str]) -> list[dict[str, str]]:
    """Gradebook rows, one per exercise (``students`` maps a notebook path to its student)."""
    out = []
    for r in results:
        for e in r.exercises:
            out.append(
                {
                    "student": students.get(r.notebook, Path(r.notebook).stem),
                    "lab": r.lab,
                    "exercise": str(e.exercise) if e.exercise else "",
                    "outcome": e.outcome,
                    "points": "" if e.outcome == "N/A" else "1" if e.passed else "0",
                    "status": e.status,
                    "message": " ".join(e.message.split()),
                    "notebook": r.notebook,
                }
            )
    return out


def duplicates(results: list[NotebookResult], students: dict[str, str]) -> list[NotebookResult]:
    """Keep one submission per student and lab (the first by path); return the others."""
    seen: set[tuple[str, str]] = set()
    extra = []
    for r in results:
        if r.notebook not in students:  # notebooks named on the command line: all kept
            continue
        who = (students[r.notebook], r.lab)
        if r.lab and who in seen:
            extra.append(r)
        seen.add(who)
    return extra


def write_gradebook(results, students, path: Path) -> None:
    """Write the rows (``.csv``) or the per-notebook results (``.json``) through a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    if path.suffix.lower() == ".csv":
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(
                {k: _cell(v) for k, v in row.items()} for row in rows(results, students)
            )
    else:
        payload = {
            "notebooks": [
                {
                    "notebook": r.notebook,
                    "student": students.get(r.notebook, Path(r.notebook).stem),
                    "lab": r.lab,
                    "status": r.status,
                    "passed": r.passed,
                    "exercises": [
                        {
                            "exercise": e.exercise,
                            "passed": e.passed,
                            "status": e.status,
                            "error": e.error,
                            "message": e.message,
                        }
                        for e in r.exercises
                    ],
                    "failed_cells": {str(k): v for k, v in r.failed_cells.items()},
                }
                for r in results
            ]
        }
        tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def table(results: list[NotebookResult]) -> str:
    """One block per notebook: exercise, PASS/FAIL, status, reason."""
    lines = []
    for r in results:
        lines.append(f"{r.notebook}  [{r.lab or 'no key'}, {r.status}]")
        lines.append(f"  {'exercise':<9} {'result':<7} {'status':<9} reason / what was verified")
        for e in r.exercises:
            lines.append(f"  {e.exercise or '-':<9} {e.outcome:<7} {e.status:<9} {e.message}")
        others = sorted(i for i in r.failed_cells if i not in r.check_cells)
        if others:
            lines.append(f"  other failing cells: {', '.join(map(str, others))}")
        passed = sum(e.passed for e in r.exercises)
        lines.append(f"  {passed}/{len(r.exercises)} exercises passed")
    return "\n".join(lines)


def summary(results: list[NotebookResult], students: dict[str, str]) -> str:
    """Per student: labs graded, exercises passed, and the labs that were not plainly graded."""
    per: dict[str, list[NotebookResult]] = {}
    for r in results:
        per.setdefault(students.get(r.notebook, Path(r.notebook).stem), []).append(r)
    width = max([7, *(len(s) for s in per)])
    lines = [f"{'student':<{width}}  {'labs':>4}  {'passed':>9}  not graded normally"]
    for student in sorted(per):
        rs = per[student]
        passed = sum(e.passed for r in rs for e in r.exercises)
        total = sum(e.outcome != "N/A" for r in rs for e in r.exercises)
        odd = ", ".join(
            f"{r.lab or Path(r.notebook).name}: {r.status}" for r in rs if r.status != "graded"
        )
        lines.append(f"{student:<{width}}  {len(rs):>4}  {passed:>4}/{total:<4}  {odd or '-'}")
    return "\n".join(lines)


class Progress:
    """``[####......] 3/10 alice/lab02.ipynb`` on stderr (one line per submission if not a TTY)."""

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr
        self.lock = threading.Lock()

    def __call__(self, result: NotebookResult) -> None:
        with self.lock:
            self.done += 1
            filled = 20 * self.done // max(self.total, 1)
            bar = f"[{'#' * filled}{'.' * (20 - filled)}] {self.done}/{self.total}"
            name = "/".join(Path(result.notebook).parts[-2:])
            tty = hasattr(self.stream, "isatty") and self.stream.isatty()
            end = "\n" if not tty or self.done == self.total else ""
            start = "\r" if tty else ""
            self.stream.write(f"{start}{bar} {name} ({result.status}){end}")
            self.stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="labs-grade",
        description="Grade lab submissions against the answer keys, each in a sandboxed kernel.",
        epilog="Exit status: 0 graded (even with FAILs), 1 with --strict if anything failed, "
        "2 usage error, 3 the grader itself failed.",
    )
    parser.add_argument("submissions", nargs="*", type=Path, help="submitted notebooks")
    parser.add_argument("--class", dest="class_dir", type=Path, help="a class folder to grade")
    parser.add_argument(
        "--gradebook", "--results", dest="gradebook", type=Path,
        help="output file, .csv (one row per exercise) or .json (default: gradebook.csv with "
        "--class, grade-results.json otherwise)",
    )  # fmt: skip
    parser.add_argument(
        "--jobs", type=int, default=1,
        help="submissions graded in parallel, one per CPU core at most (each kernel gets one)",
    )  # fmt: skip
    parser.add_argument("--key", type=Path, help="answer key for every submission")
    parser.add_argument("--keys", type=Path, default=KEY_DIR, help="folder of answer keys")
    parser.add_argument(
        "--timeout", type=float, default=CELL_TIMEOUT,
        help=f"seconds per cell (default {CELL_TIMEOUT})",
    )  # fmt: skip
    parser.add_argument(
        "--notebook-timeout", type=float, default=NOTEBOOK_TIMEOUT,
        help=f"seconds per notebook (default {NOTEBOOK_TIMEOUT})",
    )  # fmt: skip
    parser.add_argument("--no-isolation", action="store_true", help="no network/mount namespaces")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any exercise failed")
    args = parser.parse_args(argv)

    students: dict[str, str] = {}
    paths: list[Path] = list(args.submissions)
    if args.class_dir is not None:
        if not args.class_dir.is_dir():
            print(f"error: --class {args.class_dir}: no such folder", file=sys.stderr)
            return 2
        found, refused = discover(args.class_dir)
        for line in refused:
            print(f"refused: {line}", file=sys.stderr)
        students.update({str(p): s for s, p in found})
        paths += [p for _, p in found]
    if not paths:
        print("error: no submission to grade (give notebooks or --class DIR)", file=sys.stderr)
        return 2
    missing = [p for p in args.submissions if not p.is_file()]
    if missing:
        print(f"error: {missing[0]}: no such notebook file", file=sys.stderr)
        return 2
    try:
        key = load_key(args.key) if args.key else None
    except NotebookError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = args.gradebook or Path("gradebook.csv" if args.class_dir else "grade-results.json")
    progress = Progress(len(paths)) if args.class_dir is not None else None
    try:
        results = grade_notebooks(
            paths, args.timeout, notebook_timeout=args.notebook_timeout, jobs=args.jobs,
            key=key, key_dir=args.keys, isolate=not args.no_isolation, on_done=progress,
        )  # fmt: skip
    except GraderError as err:
        print(f"error: the grader failed: {err}", file=sys.stderr)
        return 3
    extra = duplicates(results, students)
    for r in extra:
        print(f"note: {r.notebook} is a second submission for {r.lab} by the same student; "
              "only the first (by path) is in the gradebook", file=sys.stderr)  # fmt: skip
    results = [r for r in results if r not in extra]
    print(table(results))
    isolation = {r.isolation for r in results if r.isolation}
    for line in sorted(isolation):
        print(f"note: {line}")
    if args.class_dir is not None:
        print()
        print(summary(results, students))
    try:
        write_gradebook(results, students, out)
    except OSError as err:
        print(f"error: cannot write {out}: {err}", file=sys.stderr)
        return 3
    total = sum(e.outcome != "N/A" for r in results for e in r.exercises)
    passed = sum(e.passed for r in results for e in r.exercises)
    print(f"{passed} passed, {total - passed} failed; results written to {out}")
    return 1 if args.strict and passed < total else 0
