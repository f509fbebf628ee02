"""Grade submissions: ``python -m labs.grade SUBMISSION.ipynb [...] [--results FILE]``.

Each submission is executed top to bottom by nbval in lax mode (a cell fails when it raises; outputs
are not compared unless a cell asks for it), in the current Python environment.  Exercise *N*
passes when every cell tagged ``exercise-N`` passed.  The command prints one table row per
exercise (exercise, PASS/FAIL, the first line of the error), writes the results to a JSON file (or
CSV, by the file's suffix) for gradebooks, and exits 1 if anything failed (2 for bad input).

Instructors can run nbval directly too: ``pytest --nbval-lax --nbval-current-env NOTEBOOK``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from labs.notebooks import NotebookError, parse_lab

__all__ = ["ExerciseResult", "NotebookResult", "grade_notebooks", "main"]


@dataclass
class ExerciseResult:
    """One exercise of one notebook."""

    notebook: str
    exercise: int
    passed: bool
    error: str  #: first line of the first failing check cell's error ("" when passed)


@dataclass
class NotebookResult:
    """Everything graded in one notebook."""

    notebook: str
    exercises: list[ExerciseResult]
    failed_cells: dict[int, str]  #: cell index (into the notebook's cells) -> first error line
    executed_cells: int
    check_cells: list[int]  #: indices of all cells tagged exercise-N

    @property
    def passed(self) -> bool:
        return all(e.passed for e in self.exercises) and not self.failed_cells


def _run_nbval(paths: list[Path], timeout: int) -> list[dict]:
    """Execute notebooks with nbval-lax; return the plugin's per-cell records."""
    with tempfile.TemporaryDirectory(prefix="labs-grade-") as tmp:
        record = Path(tmp) / "cells.jsonl"
        record.touch()
        env = dict(os.environ, LABS_GRADE_RECORD=str(record), PYTHONHASHSEED="0")
        cmd = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
            "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout", str(timeout),
            "-p", "labs._nbval_plugin", *[str(p) for p in paths],
        ]  # fmt: skip
        subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def grade_notebooks(paths: list[str | Path], timeout: int = 600) -> list[NotebookResult]:
    """Execute and grade notebooks. Raises :class:`NotebookError` for missing/corrupt input."""
    infos = []
    for p in paths:
        info = parse_lab(p, require_solutions=False)
        if not info.exercises:
            raise NotebookError(f"{p}: no cell is tagged exercise-N, so there is nothing to grade")
        infos.append(info)
    records = _run_nbval([info.path for info in infos], timeout)
    results = []
    for info in infos:
        code_cells = [i for i, c in enumerate(info.nb.cells) if c.cell_type == "code"]
        mine = [r for r in records if Path(r["notebook"]).resolve() == info.path.resolve()]
        outcome = {code_cells[r["cell"]]: r for r in mine if 0 <= r["cell"] < len(code_cells)}
        failed = {i: r["error"] for i, r in outcome.items() if r["outcome"] == "failed"}
        exercises = []
        for num, ex in info.exercises.items():
            errors = []
            for i in ex.check_cells:
                if i not in outcome:
                    errors.append(f"check cell {i} did not run (did the kernel die?)")
                elif i in failed:
                    errors.append(failed[i])
            exercises.append(
                ExerciseResult(str(info.path), num, not errors, errors[0] if errors else "")
            )
        checks = sorted(i for ex in info.exercises.values() for i in ex.check_cells)
        results.append(NotebookResult(str(info.path), exercises, failed, len(outcome), checks))
    return results


def _write_results(results: list[NotebookResult], path: Path) -> None:
    rows = [asdict(e) for r in results for e in r.exercises]
    tmp = path.with_name(f".{path.name}.tmp")
    if path.suffix.lower() == ".csv":
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["notebook", "exercise", "passed", "error"])
            writer.writeheader()
            writer.writerows(rows)
    else:
        payload = {
            "notebooks": [
                {
                    "notebook": r.notebook,
                    "passed": r.passed,
                    "exercises": [asdict(e) for e in r.exercises],
                    "failed_cells": {str(k): v for k, v in r.failed_cells.items()},
                }
                for r in results
            ]
        }
        tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def _table(results: list[NotebookResult]) -> str:
    lines = []
    for r in results:
        lines.append(r.notebook)
        lines.append(f"  {'exercise':<9} {'result':<7} first line of the error")
        for e in r.exercises:
            lines.append(f"  {e.exercise:<9} {'PASS' if e.passed else 'FAIL':<7} {e.error}")
        others = {i: m for i, m in r.failed_cells.items() if i not in r.check_cells}
        if others:
            lines.append(f"  other failing cells: {', '.join(str(i) for i in sorted(others))}")
        passed = sum(e.passed for e in r.exercises)
        lines.append(f"  {passed}/{len(r.exercises)} exercises passed")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labs.grade", description=__doc__.split("\n")[0]
    )
    parser.add_argument("submissions", nargs="+", type=Path)
    parser.add_argument(
        "--results", type=Path, default=Path("grade-results.json"),
        help="results file, .json or .csv (default: grade-results.json)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)
    try:
        results = grade_notebooks(args.submissions, timeout=args.timeout)
    except NotebookError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(_table(results))
    _write_results(results, args.results)
    print(f"results written to {args.results}")
    total = sum(len(r.exercises) for r in results)
    passed = sum(e.passed for r in results for e in r.exercises)
    print(f"{passed} passed, {total - passed} failed")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
