"""What ``labs-grade`` prints: a table per notebook, a summary per student, a progress bar.

Every name, path and message goes through :func:`labs.course.feedback.escape` (or
:func:`~labs.course.feedback.clean`): a student's exception message or folder name cannot move
the cursor, recolour a row or overwrite a FAIL with a PASS.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from labs.course.feedback import clean, escape, feedback_line
from labs.course.results import NotebookResult

__all__ = ["table", "summary", "Progress"]


def table(results: list[NotebookResult]) -> str:
    """One block per notebook: exercise, PASS/FAIL, status, reason (escaped)."""
    lines = []
    for r in results:
        lines.append(f"{escape(r.notebook)}  [{escape(r.lab) or 'no key'}, {r.status}]")
        lines.append(f"  {'exercise':<9} {'result':<7} {'status':<9} reason / what was verified")
        lines += [f"  {feedback_line(e)}" for e in r.exercises]
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
        per.setdefault(clean(students.get(r.notebook, Path(r.notebook).stem)), []).append(r)
    width = max([7, *(len(s) for s in per)])
    lines = [f"{'student':<{width}}  {'labs':>4}  {'passed':>9}  not graded normally"]
    for student in sorted(per):
        rs = per[student]
        passed = sum(e.passed for r in rs for e in r.exercises)
        total = sum(e.outcome != "N/A" for r in rs for e in r.exercises)
        odd = ", ".join(
            f"{escape(r.lab or Path(r.notebook).name)}: {r.status}"
            for r in rs
            if r.status != "graded"
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
            name = escape("/".join(Path(result.notebook).parts[-2:]))
            tty = hasattr(self.stream, "isatty") and self.stream.isatty()
            end = "\n" if not tty or self.done == self.total else ""
            start = "\r" if tty else ""
            self.stream.write(f"{start}{bar} {name} ({result.status}){end}")
            self.stream.flush()
