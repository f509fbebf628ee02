"""``labs-grade``: grade submissions or a whole class folder into one gradebook.

Usage::

    labs-grade SUBMISSION.ipynb [...]                 # table + grade-results.json
    labs-grade --class DIR --gradebook gradebook.csv --jobs 4
    labs-grade --class DIR --export canvas canvas.csv --roster roster.csv
    labs-grade --class DIR --shard 2/8 --gradebook shard-2.json   # one machine of eight
    labs-grade merge shard-*.json --gradebook gradebook.csv       # ... joined into one gradebook
    labs-grade --gradescope /autograder                           # Gradescope's run_autograder

``--class DIR`` grades ``DIR/<student>/<lab>.ipynb`` (a flat folder ``DIR/<student>.ipynb`` works
too; the lab is recognised by the ``labNN`` in the file name, or give ``--key``).  The gradebook
(:mod:`labs.course.gradefile`) has one row per student x lab x exercise: ``student, lab, exercise,
outcome (PASS/FAIL/N/A), points, max_points (as the key sets them), status
(graded/invalid/timeout/tampered/not applicable), message, notebook``; ``.json`` gives the same
grouped by notebook.  ``--export canvas|moodle FILE`` also writes the LMS's gradebook import
(:mod:`labs.course.exports`) through ``--roster``.  ``--shard K/N`` grades the K-th of N slices of
the class (:mod:`labs.course.shards`); ``labs-grade merge`` joins the N shards' JSON gradebooks
into the gradebook an unsharded run writes.  ``--gradescope ROOT`` grades ``ROOT/submission`` into
Gradescope's ``ROOT/results/results.json`` (:mod:`labs.course.gradescope`).  Everything printed
or written is escaped (:mod:`labs.course.feedback`).

Exit status: 0 when everything was graded (FAILs, invalid, tampered or timed-out submissions
included); 1 with ``--strict`` if any exercise failed; 2 for a usage error (no submission found,
a missing file, an unreadable key or roster, shards that do not make one class); 3 when the grader
itself failed (no kernel could start, the gradebook could not be written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labs.course import exports, shards
from labs.course.feedback import escape
from labs.course.grade import grade_notebooks
from labs.course.gradefile import Points, write_gradebook
from labs.course.key import KEY_DIR, find_key, load_key
from labs.course.notebooks import NotebookError
from labs.course.points import key_points
from labs.course.reference import CELL_TIMEOUT, NOTEBOOK_TIMEOUT, GraderError
from labs.course.report import Progress, summary, table
from labs.course.submissions import discover, duplicates, keep_first

__all__ = ["lab_points", "build_parser", "merge_parser", "main"]


def lab_points(paths, key: dict | None, key_dir: Path) -> Points:
    """``{lab: {exercise: points}}`` from the keys the submissions are graded against."""
    points: Points = {}
    keys = [key] if key is not None else []
    for p in paths if key is None else ():
        try:
            keys.append(load_key(find_key(p, key_dir)))
        except NotebookError:
            continue  # graded as invalid: no key, no points
    for k in keys:
        points.setdefault(k["lab"], key_points(k))
    return points


def _err(text: str) -> None:
    print(f"error: {text}", file=sys.stderr)


def _finish(results, students, points, args, out: Path, shard=None, class_mode=True) -> int:
    """Print the table and summary, write the gradebook and the exports; the exit status."""
    extra = duplicates(results, students)
    for r in extra:
        print(f"note: {escape(r.notebook)} is a second submission for {escape(r.lab)} by the same "
              "student; only the first (by path) is in the gradebook", file=sys.stderr)  # fmt: skip
    results = [r for r in results if r not in extra]
    print(table(results))
    for line in sorted({r.isolation for r in results if r.isolation}):
        print(f"note: {escape(line)}")
    if class_mode:
        print()
        print(summary(results, students))
    try:
        write_gradebook(results, students, out, points, shard)
        for kind, path in args.export or []:
            done = exports.write_export(kind, Path(path), results, students, points, args.roster)
            for line in done.left_out:
                print(f"{kind} export: {line}", file=sys.stderr)
            print(f"{kind} export: {len(done.records) - (kind == 'canvas')} student(s) written "
                  f"to {escape(path)}; {done.note}")  # fmt: skip
    except OSError as err:
        _err(f"cannot write {escape(err.filename or out)}: {escape(err.strerror or err)}")
        return 3
    except exports.RosterError as err:
        _err(escape(err))
        return 2
    total = sum(e.outcome != "N/A" for r in results for e in r.exercises)
    passed = sum(e.passed for r in results for e in r.exercises)
    print(f"{passed} passed, {total - passed} failed; results written to {escape(out)}")
    return 1 if args.strict and passed < total else 0


def _outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gradebook", "--results", dest="gradebook", type=Path,
        help="output file, .csv (one row per exercise) or .json (default: gradebook.csv with "
        "--class, grade-results.json otherwise; a shard writes JSON)",
    )  # fmt: skip
    parser.add_argument(
        "--export", nargs=2, action="append", metavar=("FORMAT", "FILE"),
        help=f"also write an LMS gradebook import: FORMAT is {' or '.join(exports.FORMATS)} "
        "(needs --roster; may be repeated)",
    )  # fmt: skip
    parser.add_argument("--roster", type=Path, help="CSV mapping folder names to LMS identities")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any exercise failed")


def _read_roster(args) -> str:
    """Check --export/--roster and read the roster into ``args.roster``; '' or the error."""
    for kind, _ in args.export or []:
        if kind not in exports.FORMATS:
            return f"--export {escape(kind)}: expected {' or '.join(exports.FORMATS)}"
    if args.export and args.roster is None:
        return "--export needs --roster ROSTER.csv (folder names -> LMS identities)"
    if args.roster is not None:
        try:
            args.roster = exports.read_roster(args.roster)
        except exports.RosterError as err:
            return escape(err)
    return ""


def merge_parser() -> argparse.ArgumentParser:
    """The arguments of ``labs-grade merge``."""
    parser = argparse.ArgumentParser(
        prog="labs-grade merge",
        description="Join the JSON gradebooks of the N shards of a class (--shard K/N) into the "
        "gradebook an unsharded run writes.",
    )
    parser.add_argument("shards", nargs="+", type=Path, help="the shards' JSON gradebooks")
    _outputs(parser)
    return parser


def merge_main(argv: list[str]) -> int:
    """``labs-grade merge SHARD.json ...``: the shards' gradebooks joined into one."""
    parser = merge_parser()
    args = parser.parse_args(argv)
    problem = _read_roster(args)
    if problem:
        _err(problem)
        return 2
    try:
        results, students, points = shards.merge(args.shards)
    except shards.ShardError as err:
        _err(escape(err))
        return 2
    return _finish(results, students, points, args, args.gradebook or Path("gradebook.csv"))


def build_parser() -> argparse.ArgumentParser:
    """The arguments of ``labs-grade`` (``merge`` has :func:`merge_parser`)."""
    parser = argparse.ArgumentParser(
        prog="labs-grade",
        description="Grade lab submissions against the answer keys, each in a sandboxed kernel.",
        epilog="Also: labs-grade merge SHARD.json ... (see its --help). Exit status: 0 graded "
        "(even with FAILs), 1 with --strict if anything failed, 2 usage error, 3 the grader "
        "itself failed.",
    )
    parser.add_argument("submissions", nargs="*", type=Path, help="submitted notebooks")
    parser.add_argument("--class", dest="class_dir", type=Path, help="a class folder to grade")
    _outputs(parser)
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
    parser.add_argument("--shard", help="grade only slice K of N of the class (K/N, with --class)")
    parser.add_argument(
        "--gradescope", type=Path, metavar="ROOT",
        help="grade ROOT/submission for Gradescope into ROOT/results/results.json "
        "(what a bundle's run_autograder runs; ROOT is /autograder there)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.gradescope is not None:
        from labs.course.gradescope import run

        return run(args.gradescope, isolate=not args.no_isolation)
    problem = _read_roster(args)
    shard = None
    if args.shard is not None:
        if args.class_dir is None or args.submissions:
            problem = problem or "--shard K/N slices a class: use it with --class DIR alone"
        elif args.export:
            problem = problem or (
                "--export with --shard would export one slice: export from the merged shards "
                "(labs-grade merge SHARD.json ... --roster R --export ...)"
            )
        else:
            try:
                shard = shards.parse_shard(args.shard)
            except shards.ShardError as err:
                problem = problem or escape(err)
    if problem:
        _err(problem)
        return 2

    students: dict[str, str] = {}
    paths: list[Path] = list(args.submissions)
    description = None
    try:
        key = load_key(args.key) if args.key else None
    except NotebookError as err:
        _err(escape(err))
        return 2
    if args.class_dir is not None:
        if not args.class_dir.is_dir():
            _err(f"--class {escape(args.class_dir)}: no such folder")
            return 2
        found, refused = discover(args.class_dir)
        for line in refused:
            print(f"refused: {escape(line)}", file=sys.stderr)
        if shard is not None:
            mine = shards.assign(found, shard[1])[shard[0] - 1]
            description = shards.describe(*shard, found, mine, args.class_dir)
            print(f"shard {shard[0]}/{shard[1]}: {len(mine)} of {len(found)} submissions",
                  file=sys.stderr)  # fmt: skip
            found = mine
        found, dropped = keep_first(found, key, args.keys)  # before grading: one run each
        for p in dropped:
            print(f"note: {escape(p)} is a second submission for its lab by the same student; "
                  "only the first (by path) is graded", file=sys.stderr)  # fmt: skip
        students.update({str(p): s for s, p in found})
        paths += [p for _, p in found]
    if not paths and shard is None:
        _err("no submission to grade (give notebooks or --class DIR)")
        return 2
    missing = [p for p in args.submissions if not p.is_file()]
    if missing:
        _err(f"{escape(missing[0])}: no such notebook file")
        return 2
    if shard is not None:
        out = args.gradebook or Path(f"gradebook-shard-{shard[0]}-of-{shard[1]}.json")
        if out.suffix.lower() != ".json":
            _err(f"--shard writes a JSON gradebook (labs-grade merge reads it): not {escape(out)}")
            return 2
    else:
        out = args.gradebook or Path("gradebook.csv" if args.class_dir else "grade-results.json")
    progress = Progress(len(paths)) if args.class_dir is not None else None
    try:
        results = grade_notebooks(
            paths, args.timeout, notebook_timeout=args.notebook_timeout, jobs=args.jobs,
            key=args.key or None, key_dir=args.keys, isolate=not args.no_isolation,
            on_done=progress,
        ) if paths else []  # fmt: skip
    except GraderError as err:
        _err(f"the grader failed: {escape(err)}")
        return 3
    points = lab_points(paths, key, args.keys)
    return _finish(results, students, points, args, out, description, args.class_dir is not None)
