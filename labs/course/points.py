"""What each exercise is worth: ``points`` in the answer key, default 1.

An author sets them in the solution notebook's metadata, beside ``exercise_references``::

    "metadata": {"exercise_points": {"1": 2, "4": 0.5}}

``labs-release`` validates them (known exercise numbers, finite numbers above zero) and writes
``"points"`` into every exercise of the key (:mod:`labs.course.key`; its other fields are
unchanged); exercises not listed are worth 1. The gradebook, Gradescope's ``max_score`` and the
Canvas and Moodle exports read the points from the key (:func:`key_points`); a key written before
points existed counts every exercise as 1.
"""

from __future__ import annotations

import math
from typing import Any

from labs.course.notebooks import LabInfo, NotebookError

__all__ = ["DEFAULT", "exercise_points", "with_points", "key_points"]

DEFAULT = 1  #: points of an exercise the notebook does not list


def exercise_points(info: LabInfo) -> dict[int, float]:
    """``{exercise: points}`` for every exercise of a parsed solution lab (default 1).

    Raises:
        NotebookError: ``exercise_points`` is not a mapping of known exercise numbers to numbers
            above zero.
    """
    raw = info.nb.metadata.get("exercise_points", {}) or {}
    if not isinstance(raw, dict):
        raise NotebookError(
            f"{info.path}: metadata exercise_points must map exercise numbers to points, e.g. "
            f'{{"1": 2, "3": 0.5}}; got {type(raw).__name__}'
        )
    points: dict[int, float] = {n: DEFAULT for n in info.exercises}
    for num, value in raw.items():
        if not str(num).isdigit() or int(num) not in info.exercises:
            raise NotebookError(
                f"{info.path}: metadata exercise_points names exercise {num!r}, but the lab has "
                f"exercises {sorted(info.exercises)}"
            )
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value <= 0:
            raise NotebookError(
                f"{info.path}: metadata exercise_points[{num!r}] must be a number above 0 "
                f"(the points exercise {num} is worth); got {value!r}"
            )
        points[int(num)] = int(value) if float(value).is_integer() else float(value)
    return points


def with_points(key: dict[str, Any], points: dict[int, float]) -> dict[str, Any]:
    """``key`` with ``"points"`` set in each exercise (a new dict; the rest is unchanged)."""
    exercises = {
        num: {**ex, "points": points.get(int(num), DEFAULT)} for num, ex in key["exercises"].items()
    }
    return {**key, "exercises": exercises}


def key_points(key: dict[str, Any] | None) -> dict[int, float]:
    """``{exercise: points}`` of a loaded key (1 where the key does not say).

    Raises:
        NotebookError: a ``points`` value in the key is not a number above 0.
    """
    if not key:
        return {}
    out = {}
    for num, ex in key.get("exercises", {}).items():
        value = ex.get("points", DEFAULT)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value <= 0:
            raise NotebookError(
                f"the answer key of {key.get('lab')}: points of exercise {num} must be a number "
                f"above 0, got {value!r} (rewrite the key with labs-release)"
            )
        out[int(num)] = value
    return out
