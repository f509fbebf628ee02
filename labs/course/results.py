"""What grading found: one :class:`ExerciseResult` per exercise, one :class:`NotebookResult` per file.

Statuses: ``graded`` (PASS or FAIL), ``invalid`` (unreadable notebook, no key, a flood of output,
or an exercise the answer key's own run could not check), ``timeout``, ``tampered`` and
``not applicable`` (outcome ``N/A``: neither passed nor failed).  :class:`Tally` collects, step by
step, what one submission's run found, and makes its :class:`NotebookResult` at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["STATUSES", "ExerciseResult", "NotebookResult", "Tally", "all_fail"]

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
    #: what the graded variants (hidden checks) found, in full: their inputs and expected values,
    #: for the instructor's JSON gradebook only (every other output says "hidden check j of n")
    detail: str = ""

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


class Tally:
    """The findings of one submission's run, step by step, and the result they make.

    Args:
        path: the submission.
        key: its answer key.
        tampered: ``{exercise: why}`` of exercises whose check cells were changed.
        not_applicable: ``{exercise: why}`` from the reference run.
        check_cells: the submission's check cell indices.
    """

    def __init__(self, path: str, key: dict[str, Any], tampered: dict, not_applicable: dict,
                 check_cells: list[int]):  # fmt: skip
        self.path, self.key, self.tampered, self.na = path, key, tampered, not_applicable
        self.check_cells = check_cells
        numbers = [int(n) for n in key["exercises"]]
        self.errors: dict[int, list[str]] = {n: [] for n in numbers}
        self.verified: dict[int, list[str]] = {n: [] for n in numbers}
        self.invalid: dict[int, str] = {}  # the key's own run failed (not the student's fault)
        self.stopped: dict[
            int, tuple[str, str]
        ] = {}  # exercise -> (status, why) not run to the end
        self.failed: dict[int, str] = {}  # cell index -> error line
        self.detail: dict[int, list[str]] = {}  # exercise -> its hidden checks' full messages
        self.executed = 0
        self.halted, self.halted_status = "", "graded"

    def halt(self, status: str, why: str) -> None:
        """Nothing more runs: every exercise not yet checked gets ``status`` and ``why``."""
        self.halted, self.halted_status = f"not run: {why}", status

    def not_run(self, num: int | None) -> None:
        """A check of exercise ``num`` that did not run because the run halted."""
        if num is not None and self.halted:
            self.stopped.setdefault(num, (self.halted_status, self.halted))

    def cell_failed(self, index: int, why: str) -> None:
        self.failed.setdefault(index, why)

    def key_problem(self, num: int, why: str) -> None:
        self.invalid[num] = f"not graded: {why} (an answer-key problem, not the student's)"

    def fail(self, num: int, why: str, hidden: tuple[int, int] | None = None) -> None:
        """Exercise ``num`` failed for ``why``; ``hidden=(j, of)`` for its j-th graded variant,
        whose inputs and expected values the student never sees: the line says only which."""
        if hidden is not None:
            self.detail.setdefault(num, []).append(f"hidden check {hidden[0]}: {why}")
            why = f"CheckFailure: {_hidden(num, hidden)} failed"
        self.errors.setdefault(num, []).append(why)

    def verdicts(self, index: int, num: int, verdicts: list, hidden=None) -> None:
        """The grader's verdicts on one check cell of exercise ``num`` (at cell ``index``);
        ``hidden=(j, of)`` when it is the j-th graded variant (see :meth:`fail`)."""
        for v in verdicts:
            n = v.number or num
            if v.status == "key":
                if hidden is not None:
                    self.detail.setdefault(n, []).append(f"hidden check {hidden[0]}: {v.message}")
                why = f"{_hidden(n, hidden)}: the key's own run failed" if hidden else v.message
                self.key_problem(n, why)
            elif v.status == "fail":
                self.fail(n, v.message, hidden)
            elif v.status == "pass":
                line = f"PASS {_hidden(n, hidden)}" if hidden else v.message
                self.verified.setdefault(n, []).append(line)
        if self.errors.get(num):
            self.cell_failed(index, self.errors[num][-1])

    def _exercise(self, n: int) -> ExerciseResult:
        path = self.path
        if n in self.tampered:
            return ExerciseResult(path, n, False, self.tampered[n], "tampered")
        if n in self.na:
            return ExerciseResult(
                path, n, False, f"N/A exercise {n}: {self.na[n]}", "not applicable"
            )
        if n in self.invalid:
            return ExerciseResult(path, n, False, self.invalid[n], "invalid")
        if n in self.stopped and not self.errors[n]:
            status, why = self.stopped[n]
            return ExerciseResult(path, n, False, why, status)
        detail = " | ".join(self.detail.get(n, []))
        if self.errors[n]:
            return ExerciseResult(path, n, False, self.errors[n][0], detail=detail)
        verified = " | ".join(self.verified[n])
        return ExerciseResult(path, n, True, "", verified=verified, detail=detail)

    def result(self, isolation: str = "") -> NotebookResult:
        exercises = [self._exercise(n) for n in sorted(self.errors)]
        statuses = {e.status for e in exercises}
        status = next((s for s in ("tampered", "timeout") if s in statuses), "graded")
        if self.halted and self.halted_status == "invalid":  # a flood of output
            status = "invalid"
        return NotebookResult(
            self.path, exercises, self.failed, self.executed, self.check_cells,
            self.key.get("lab", ""), status, isolation,
        )  # fmt: skip


def _hidden(num: int, hidden: tuple[int, int]) -> str:
    return f"hidden check {hidden[0]} of {hidden[1]} of exercise {num}"
