"""The answer key of a lab, and how a submission is compared with it.

``labs-release`` writes one key per lab, ``instructor/keys/<lab>.json`` (never into
``student/``)::

    {"format": 2, "lab": "lab02-matmul-flops",
     "exercises": {"1": {"what": "return the FLOP count ...",
                         "checks": [{"id": "c3f1", "sha256": "9a0e...", "source": "..."}],
                         "references": ["labs.basics.flops.matmul_flops"]}}}

``cells`` holds the solution's code cells in order (``{"source": ...}``, or ``{"check": [N, k]}``
for the k-th check of exercise N): the grader runs them once per lab in a trusted kernel to
compute the expected values (:mod:`labs.course.reference`).  ``checks`` lists the check cells
(tagged ``exercise-N``) in notebook order with the SHA-256 of their source (trailing spaces and
blank lines ignored); ``graded`` the graded variants (``graded-exercise-N``), which are not in the
student notebook (the k-th check of exercise N is ``(checks + graded)[k]``); ``references`` are the
names listed in the solution notebook's ``metadata["exercise_references"]``: reference
implementations that a submission's kernel does not get (:mod:`labs.course.sealed_labs`).  The
grader runs the key's check sources, not the submission's: :func:`compare` flags an exercise
``tampered`` when its check cells in the submission are missing, changed, added or re-tagged, and
:func:`plan` lists what to run, cell by cell.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.course.notebooks import REPO_ROOT, LabInfo, NotebookError
from labs.course.student import is_guard_cell

__all__ = [
    "KEY_DIR",
    "normalise",
    "source_hash",
    "build_key",
    "key_text",
    "load_key",
    "find_key",
    "check_cells_of",
    "check_source",
    "compare",
    "plan",
    "Step",
    "write_key",
]

KEY_DIR = REPO_ROOT / "instructor" / "keys"
FORMAT = 3
USES_REFERENCES = "uses-references"  #: the tag of cells the grader does not run
_CHECK_TAG = re.compile(r"^exercise-(\d+)$")
_LAB_NAME = re.compile(r"lab(\d+)", re.IGNORECASE)
_REF_NAME = re.compile(r"^labs(\.[A-Za-z_]\w*)+$")


def normalise(source: str) -> str:
    """The source as stored in the key: trailing spaces and leading/trailing blank lines removed."""
    return "\n".join(line.rstrip() for line in source.strip("\n").splitlines()).strip("\n")


def source_hash(source: str) -> str:
    """SHA-256 of the source without trailing spaces or blank lines (editors add and drop them)."""
    lines = [line.rstrip() for line in source.replace("\r\n", "\n").split("\n")]
    return hashlib.sha256("\n".join(x for x in lines if x).encode("utf-8")).hexdigest()


def _references(info: LabInfo) -> dict[int, list[str]]:
    raw = info.nb.metadata.get("exercise_references", {}) or {}
    if not isinstance(raw, dict):
        raise NotebookError(
            f"{info.path}: metadata exercise_references must map exercise numbers to lists of "
            f'names, e.g. {{"1": ["labs.basics.flops.matmul_flops"]}}; got {type(raw).__name__}'
        )
    refs: dict[int, list[str]] = {}
    for num, names in raw.items():
        if not str(num).isdigit() or int(num) not in info.exercises:
            raise NotebookError(
                f"{info.path}: metadata exercise_references names exercise {num!r}, but the lab "
                f"has exercises {sorted(info.exercises)}"
            )
        if not isinstance(names, list) or not all(
            isinstance(n, str) and _REF_NAME.match(n) for n in names
        ):
            raise NotebookError(
                f"{info.path}: metadata exercise_references[{num!r}] must be a list of dotted "
                f"names inside labs, such as 'labs.basics.flops.matmul_flops'; got {names!r}"
            )
        for name in names:
            _resolve(name, info.path)
        refs[int(num)] = list(names)
    return refs


def _resolve(name: str, path: Path) -> None:
    """Check that ``name`` is a Python function or class importable from ``labs``."""
    import importlib
    import inspect

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        if inspect.isfunction(inspect.unwrap(obj)) or inspect.isclass(obj):
            return
        break
    raise NotebookError(
        f"{path}: metadata exercise_references lists {name!r}, which is not a function or class "
        "that can be imported from labs (check the spelling)"
    )


def build_key(info: LabInfo) -> dict[str, Any]:
    """The answer key of a parsed (solution) lab."""
    refs = _references(info)
    exercises = {}
    for num, ex in info.exercises.items():
        checks = []
        for i in ex.check_cells:
            cell = info.nb.cells[i]
            source = normalise(cell.source)
            checks.append(
                {"id": cell.get("id", ""), "sha256": source_hash(source), "source": source}
            )
        graded = [
            {"id": info.nb.cells[i].get("id", ""), "source": normalise(info.nb.cells[i].source)}
            for i in ex.graded_cells
        ]
        exercises[str(num)] = {
            "what": ex.what, "checks": checks, "graded": graded, "references": refs.get(num, []),
        }  # fmt: skip
    where = {
        i: [num, k]
        for num, ex in info.exercises.items()
        for k, i in enumerate([*ex.check_cells, *ex.graded_cells])
    }
    solutions = {i for ex in info.exercises.values() for i in ex.solution_cells}
    cells = []  # "given": the lab's own code (neither a solution nor a reference demo nor a guard)
    for i, cell in enumerate(info.nb.cells):
        if cell.cell_type == "code":
            tags, given = [str(t) for t in cell.metadata.get("tags", [])], i not in solutions
            given = given and USES_REFERENCES not in tags and not is_guard_cell(cell)
            entry = {"source": normalise(cell.source)} | ({"given": True} if given else {})
            cells.append({"check": where[i]} if i in where else entry)
    return {"format": FORMAT, "lab": info.path.stem, "exercises": exercises, "cells": cells}


def key_text(key: dict[str, Any]) -> str:
    return json.dumps(key, indent=1, ensure_ascii=False) + "\n"


def load_key(path: str | Path) -> dict[str, Any]:
    """Read and validate a key file; :class:`NotebookError` if it is missing or malformed."""
    path = Path(path)
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
        ok = key.get("format") == FORMAT and isinstance(key.get("exercises"), dict)
        ok = ok and isinstance(key.get("cells"), list)
        for ex in key["exercises"].values() if ok else []:
            ok = ok and all("sha256" in c and "source" in c for c in ex["checks"])
            ok = ok and all("source" in c for c in ex["graded"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise NotebookError(f"{path}: cannot read the answer key ({err})") from err
    if not ok:
        raise NotebookError(
            f"{path}: not an answer key of format {FORMAT} (rewrite it: labs-release)"
        )
    return key


def find_key(submission: str | Path, key_dir: str | Path | None = None) -> Path:
    """The key for a submission, by the lab number in its file name (``lab02...``).

    ``alice/lab02-matmul-flops.ipynb``, ``lab02.ipynb`` and ``alice_lab02.ipynb`` all find
    ``lab02-matmul-flops.json``.  Raises :class:`NotebookError` when none or several match.
    """
    key_dir = Path(key_dir) if key_dir is not None else KEY_DIR
    submission = Path(submission)
    exact = key_dir / f"{submission.stem}.json"
    if exact.is_file():
        return exact
    numbers = {int(m.group(1)) for m in _LAB_NAME.finditer(submission.stem)}
    matches = [
        k
        for k in sorted(key_dir.glob("*.json"))
        if (m := _LAB_NAME.match(k.stem)) and int(m.group(1)) in numbers
    ]
    if len(matches) != 1:
        found = "no" if not matches else f"{len(matches)}"
        raise NotebookError(
            f"{submission}: {found} answer key in {key_dir} matches its name (name the file after "
            "the lab, e.g. lab02-matmul-flops.ipynb, or pass --key KEY.json; keys are written by "
            "labs-release)"
        )
    return matches[0]


def check_cells_of(nb: Any) -> dict[int, list[int]]:
    """``{exercise: [cell index, ...]}`` of the cells tagged ``exercise-N`` in ``nb``."""
    found: dict[int, list[int]] = {}
    for index, cell in enumerate(nb.cells):
        for tag in cell.get("metadata", {}).get("tags", []) or []:
            m = _CHECK_TAG.match(str(tag))
            if m:
                found.setdefault(int(m.group(1)), []).append(index)
    return found


def compare(nb: Any, key: dict[str, Any]) -> tuple[dict[int, list[int]], dict[int, str]]:
    """Match a submission's check cells with the key.

    Returns ``(checks, tampered)``: for each intact exercise the submission's check cell indices
    (in the key's order), and for each tampered exercise the reason.
    """
    tagged = check_cells_of(nb)
    by_id = {c.get("id"): i for i, c in enumerate(nb.cells) if c.get("id")}
    checks: dict[int, list[int]] = {}
    tampered: dict[int, str] = {}
    for num_text, ex in key["exercises"].items():
        num = int(num_text)
        cells, want = tagged.get(num, []), ex["checks"]
        reason = ""
        for k, expected in enumerate(want):
            where = f"check cell {k + 1} of {len(want)}"
            if k >= len(cells):
                index = by_id.get(expected.get("id"))
                if index is not None and nb.cells[index].cell_type == "code":
                    reason = f"{where} (cell {index}) lost its tag exercise-{num}"
                else:
                    reason = f"{where} is missing (deleted or re-tagged)"
                break
            cell = nb.cells[cells[k]]
            if (
                cell.cell_type != "code"
                or source_hash(cell.get("source", "")) != expected["sha256"]
            ):
                reason = f"{where} (cell {cells[k]}) was changed"
                break
        if not reason and len(cells) > len(want):
            reason = f"{len(cells)} cells are tagged exercise-{num}, the key has {len(want)}"
        if reason:
            tampered[num] = f"tampered: {reason}; the checks are the instructor's, not editable"
        else:
            checks[num] = cells
    return checks, tampered


def check_source(key: dict[str, Any], num: int, k: int) -> str:
    """The source of the k-th check of exercise ``num``: its check cells, then graded variants."""
    ex = key["exercises"][str(num)]
    return [*ex["checks"], *ex["graded"]][k]["source"]


@dataclass(frozen=True)
class Step:
    """One thing to run in a submission's kernel, in order: the submission's own code cell
    (``check is None``) or the key's check ``(exercise, k)`` at cell ``index``."""

    index: int
    source: str
    check: tuple[int, int] | None = None


def plan(nb: Any, key: dict[str, Any], checks: dict[int, list[int]]) -> list[Step]:
    """What to run for a submission, given its intact exercises' check cells (:func:`compare`):
    its code cells in order, the key's check in place of each intact check cell, that exercise's
    graded variants right after its last one; check cells of tampered exercises are not run, nor
    cells tagged ``uses-references`` (they show a reference implementation at work, which the
    submission's kernel does not have), nor the prose's guard cells (hidden asserts on the book's
    own run, which a student's copy does not hold)."""
    at = {i: (num, k) for num, cells in checks.items() for k, i in enumerate(cells)}
    steps = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        if index not in at:
            tags = [str(t) for t in cell.get("metadata", {}).get("tags", []) or []]
            if (
                not any(_CHECK_TAG.match(t) for t in tags)
                and USES_REFERENCES not in tags
                and not is_guard_cell(cell)
            ):
                steps.append(Step(index, cell.get("source", "")))
            continue
        num, k = at[index]
        steps.append(Step(index, check_source(key, num, k), (num, k)))
        if k == len(checks[num]) - 1:
            extra = len(key["exercises"][str(num)]["graded"])
            steps += [
                Step(index, check_source(key, num, k + 1 + j), (num, k + 1 + j))
                for j in range(extra)
            ]
    return steps


def write_key(info: LabInfo, key_dir: str | Path | None = None) -> tuple[Path, str]:
    """``(path, text)`` of the key of a parsed lab (the caller writes it)."""
    key_dir = Path(key_dir) if key_dir is not None else KEY_DIR
    return key_dir / f"{info.path.stem}.json", key_text(build_key(info))
