"""Run the adversarial wrong answers of ``tests/wrong_answers_adv`` against the lab notebooks.

Each ``tests/wrong_answers_adv/labNN.py`` holds a module-level list ``WRONG`` of
:class:`labs.course.wrong_answers.Wrong` records: plausible student mistakes written without
looking at the authors' own list (``tests/wrong_answers``).  This tool runs them with
:func:`labs.course.wrong_answers.check_wrong_answers` against the solution notebook
``book/labs/labNN-*.ipynb`` and prints, per wrong answer, whether the lab's checks reject it.
A wrong answer that *passes* its exercise is a finding: the checks miss that mistake.  Once the
checks were fixed to reject it, the record moved to ``tests/wrong_answers`` (which pytest runs on
every change, with a comment naming the input that exposes it) and left this corpus, as did every
record that duplicated one of the authors'; what stays here is what only this corpus holds.
The notebook's own checks run here, in a plain kernel: the sealed grader (``labs-grade``) adds
the answer key's tripwire on reference implementations and its own expected values, so a
submission can fail there and still pass here (lab 12, exercise 1, is one).

Usage::

    python tools/adv_wrong.py 03            # one lab
    python tools/adv_wrong.py 03 17b --json out.json
    python tools/adv_wrong.py all           # every lab, one after another (slow)

Exit status: 0 when every wrong answer was rejected, 1 when some passed or were invalid.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ADV = REPO / "tests" / "wrong_answers_adv"


def load(lab: str) -> list:
    """The ``WRONG`` list of ``tests/wrong_answers_adv/lab<lab>.py``."""
    path = ADV / f"lab{lab}.py"
    spec = importlib.util.spec_from_file_location(f"adv_wrong_lab{lab}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.WRONG)


def notebook(lab: str) -> Path:
    """The solution notebook of lab ``lab`` ("02", "17b")."""
    found = [
        p
        for p in sorted((REPO / "book" / "labs").glob(f"lab{lab}-*.ipynb"))
        if p.name.split("-")[0] == f"lab{lab}"
    ]
    if len(found) != 1:
        raise SystemExit(
            f"lab {lab}: expected one notebook book/labs/lab{lab}-*.ipynb, got {found}"
        )
    return found[0]


def labs_available() -> list[str]:
    return sorted(p.stem.removeprefix("lab") for p in ADV.glob("lab*.py"))


def main(argv: list[str] | None = None) -> int:
    from labs.course.wrong_answers import check_wrong_answers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labs", nargs="+", help="lab numbers (02, 17b) or 'all'")
    parser.add_argument("--json", type=Path, help="append the outcomes to this JSON file")
    parser.add_argument("--timeout", type=float, default=180, help="seconds per cell")
    args = parser.parse_args(argv)
    chosen = labs_available() if args.labs == ["all"] else [x.zfill(2) for x in args.labs]
    results, bad = [], 0
    for lab in chosen:
        wrongs = load(lab)
        start = time.perf_counter()
        outcomes = check_wrong_answers(notebook(lab), wrongs, timeout=args.timeout)
        took = time.perf_counter() - start
        print(f"== lab {lab}: {len(wrongs)} wrong answers, {took:.0f} s", flush=True)
        for o in outcomes:
            invalid = o.detail.startswith("the wrong answer itself raises")
            verdict = "INVALID" if invalid else ("rejected" if o.rejected else "PASSED ")
            bad += not o.rejected
            print(f"  [{verdict}] ex {o.wrong.exercise}: {o.wrong.why}\n      -> {o.detail[:200]}")
            results.append(
                {
                    "lab": lab,
                    "exercise": o.wrong.exercise,
                    "why": o.wrong.why,
                    "rejected": o.rejected,
                    "invalid": invalid,
                    "detail": o.detail,
                }
            )
        sys.stdout.flush()
    if args.json:
        old = json.loads(args.json.read_text()) if args.json.exists() else []
        keep = [r for r in old if r["lab"] not in chosen]
        args.json.write_text(json.dumps(keep + results, indent=1) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
