"""Release the student notebooks: ``labs-release [LAB.ipynb ...] [--check]``.

For every lab notebook (default: ``book/labs/*.ipynb``) this

1. validates the exercise format (:func:`labs.course.notebooks.parse_lab`);
2. normalises the source: the Colab set-up cell first, outputs stripped (skipped with ``--check``);
3. writes the student version to ``student/<name>.ipynb``: solutions replaced by
   ``raise NotImplementedError("Exercise N: ...")``, outputs cleared;
4. writes the answer key to ``instructor/keys/<name>.json`` (:mod:`labs.course.key`): the check
   cells' sources and hashes, the reference implementations each exercise must not call and the
   points each exercise is worth (:mod:`labs.course.points`; metadata ``exercise_points``,
   default 1).  The grader (``labs-grade``) grades against it; it never goes into ``student/``.

``--gradescope DIR`` also writes a Gradescope autograder bundle per lab, ``DIR/<lab>.zip``
(:mod:`labs.course.gradescope`: ``setup.sh``, ``run_autograder``, the key and the ``labs`` wheel
of this checkout).

Every notebook is validated before anything is written, and every file is written through a
temporary file and a rename, so a bad notebook leaves nothing half-written.  ``--check`` writes
nothing and exits 1 if a source, a student notebook or a key is out of date (the test suite runs
it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from labs.course.gradefile import write_atomic
from labs.course.key import KEY_DIR, build_key, key_text
from labs.course.notebooks import (
    REPO_ROOT,
    NotebookError,
    dumps,
    load_notebook,
    parse_lab,
)
from labs.course.points import exercise_points, with_points
from labs.course.setup_cell import setup_cell_source
from labs.course.student import strip_outputs, student_version

__all__ = ["main", "build_parser", "default_labs", "prepare"]


def default_labs() -> list[Path]:
    """All lab notebooks of the book, sorted by name."""
    return sorted((REPO_ROOT / "book" / "labs").glob("*.ipynb"))


def _with_setup_cell(nb, path: Path):
    """Put the set-up cell first (replacing an outdated one)."""
    source = setup_cell_source()
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    first = code_cells[0] if code_cells else None
    if first is not None and (
        first.source == source
        or first.source.startswith("# Set-up: on Google Colab")
        or first.source.strip() == "# set-up cell"
    ):
        first.source = source
        first.metadata["tags"] = ["remove-input"]
        return nb
    cell = nbformat.v4.new_code_cell(source=source, metadata={"tags": ["remove-input"]})
    insert_at = nb.cells.index(first) if first is not None else len(nb.cells)
    nb.cells.insert(insert_at, cell)
    return nb


def prepare(path: Path, student_dir: Path, key_dir: Path = KEY_DIR) -> list[tuple[Path, str]]:
    """Validate one lab; return ``[(path, text), ...]`` to write (source, student, key)."""
    nb = load_notebook(path)
    parse_lab(path, nb)  # validate first, so errors name the cells as they are on disk
    nb = _with_setup_cell(strip_outputs(nb), path)
    info = parse_lab(path, nb)
    for ex in info.exercises.values():
        for i in ex.solution_cells:  # the book's toggle says what it hides
            nb.cells[i].metadata["mystnb"] = {
                "code_prompt_show": "Show solution",
                "code_prompt_hide": "Hide solution",
            }
    if not info.exercises:
        raise NotebookError(f"{path}: a lab needs at least one exercise (tag its check cell)")
    solution = parse_lab(path, nb)
    key = with_points(build_key(solution), exercise_points(solution))
    return [
        (path, dumps(nb)),
        (student_dir / path.name, dumps(student_version(info))),
        (key_dir / f"{path.stem}.json", key_text(key)),
    ]


def build_parser() -> argparse.ArgumentParser:
    """The arguments of ``labs-release``."""
    parser = argparse.ArgumentParser(prog="labs-release", description=__doc__.split("\n")[0])
    parser.add_argument("labs", nargs="*", type=Path, help="lab notebooks (default: book/labs/*)")
    parser.add_argument("--student-dir", type=Path, default=REPO_ROOT / "student")
    parser.add_argument("--key-dir", type=Path, default=KEY_DIR, help="where answer keys go")
    parser.add_argument("--check", action="store_true", help="write nothing; fail if out of date")
    parser.add_argument(
        "--gradescope", type=Path, metavar="DIR",
        help="also write a Gradescope autograder bundle per lab: DIR/<lab>.zip",
    )  # fmt: skip
    parser.add_argument(
        "--gradescope-visibility", default="visible",
        choices=["visible", "hidden", "after_due_date", "after_published"],
        help="when students see each exercise's result on Gradescope (default: visible)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    labs = args.labs or default_labs()
    if not labs:
        print("no lab notebooks found in book/labs", file=sys.stderr)
        return 1
    try:
        planned = [item for lab in labs for item in prepare(lab, args.student_dir, args.key_dir)]
    except NotebookError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    stale = []
    for path, text in planned:
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current != text:
            stale.append(path)
    if args.check:
        expected = {args.student_dir / lab.name for lab in labs}
        expected |= {args.key_dir / f"{lab.stem}.json" for lab in labs}
        present = {*args.student_dir.glob("*.ipynb"), *args.key_dir.glob("*.json")}
        extra = [] if args.labs else sorted(present - expected)
        for path in stale:
            print(f"out of date: {path} (run: labs-release)")
        for path in extra:
            print(f"no lab for {path} (delete it or run labs-release)")
        return 1 if stale or extra else 0
    for path, text in planned:
        if path in stale:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text)
            print(
                f"wrote {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}"
            )
    print(f"{len(labs)} lab(s) released; {len(stale)} file(s) updated")
    if args.gradescope is not None:
        return _gradescope(labs, args)
    return 0


def _gradescope(labs: list[Path], args) -> int:
    """Write one Gradescope autograder bundle per lab (the keys just written)."""
    import tempfile

    from labs.course.bundle import build_wheel, write_bundle

    try:
        with tempfile.TemporaryDirectory(prefix="labs-wheel-") as tmp:
            wheel = build_wheel(Path(tmp))
            for lab in labs:
                archive = write_bundle(
                    args.key_dir / f"{lab.stem}.json", args.gradescope, wheel,
                    visibility=args.gradescope_visibility,
                )  # fmt: skip
                print(f"wrote {archive} (upload it as the autograder of {lab.stem} on Gradescope)")
    except (NotebookError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
