"""What grading found: one :class:`ExerciseResult` per exercise, one :class:`NotebookResult` per file.

Statuses: ``graded`` (PASS or FAIL), ``invalid`` (unreadable notebook, no key, a flood of output,
or an exercise the answer key's own run could not check), ``timeout``, ``tampered`` and
``not applicable`` (outcome ``N/A``: neither passed nor failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["STATUSES", "ExerciseResult", "NotebookResult", "all_fail"]

STATUSES = ("graded", "invalid", "timeout", "tampered", "not applicable")


@dataclass
class ExerciseResult:
    """One exercise of one notebook."""

    notebook: str
    exercise: int
    passed: bool
    error: str  #: why it failed ("" when passed)
    status: str = "graded"  #: graded, invalid, timeout, tampered or not applicable
    verified: str = ""  #: the PASS line(s) of a passed exercise

    @property
    def message(self) -> str:
        return self.error if not self.passed else self.verified

    @property
    def outcome(self) -> str:
        """``PASS``, ``FAIL`` or ``N/A`` (not applicable: counts neither way)."""
        return "N/A" if self.status == "not applicable" else "PASS" if self.passed else "FAIL"


@dataclass
class NotebookResult:
    """Everything graded in one notebook."""

    notebook: str
    exercises: list[ExerciseResult]
    failed_cells: dict[int, str] = field(default_factory=dict)  #: cell index -> error line
    executed_cells: int = 0
    check_cells: list[int] = field(default_factory=list)
    lab: str = ""
    status: str = "graded"
    isolation: str = ""  #: "" or what the sandbox could not isolate here

    @property
    def passed(self) -> bool:
        graded = [e for e in self.exercises if e.outcome != "N/A"]
        return all(e.passed for e in graded) and not self.failed_cells


def all_fail(path: str, key: dict | None, status: str, why: str, lab: str = "") -> NotebookResult:
    """Every exercise of ``key`` FAIL with ``status`` and ``why`` (exercise 0 without a key)."""
    numbers = [int(n) for n in key["exercises"]] if key else [0]
    exercises = [ExerciseResult(path, n, False, why, status) for n in sorted(numbers)]
    return NotebookResult(path, exercises, lab=lab, status=status)
