"""A class graded on many machines: ``--shard K/N`` slices it, ``labs-grade merge`` joins it.

Every machine runs the same command with its own ``K`` (a Slurm array task, a Kubernetes Indexed
Job's completion index: the instructor guide shows both). Each lists the whole class folder
(:func:`labs.course.submissions.discover`, sorted: file-system order never matters), deals the
students to ``N`` shards by :func:`assign`, grades its own and writes a JSON gradebook that says
which shard it is: its index, ``N``, a fingerprint of the whole class listing and the submissions
it graded. All of a student's notebooks land in the same shard (so a second submission is spotted
there), and shards are balanced by submission count (most submissions first, each to the lightest
shard so far; ties by name).

:func:`merge` refuses shards of different classes or counts, a shard given twice, overlapping
shards and missing ones, each with what to do; otherwise it returns the results in the order an
unsharded run has them, so the merged gradebook is byte for byte the unsharded one.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from labs.course.feedback import escape
from labs.course.gradefile import Points, read_json
from labs.course.results import NotebookResult

__all__ = ["ShardError", "parse_shard", "fingerprint", "assign", "describe", "merge"]


class ShardError(ValueError):
    """Shards that do not make one class (a usage error: exit 2)."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)`` with ``1 <= K <= N``."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ShardError(
            f"--shard {escape(text)}: expected K/N with 1 <= K <= N, e.g. --shard 2/4 (the second "
            "of four shards; a Slurm array task passes --shard $((SLURM_ARRAY_TASK_ID+1))/N)"
        )
    return int(m.group(1)), int(m.group(2))


def fingerprint(found: list[tuple[str, Path]], class_dir: Path) -> str:
    """SHA-256 of the class listing (student and path relative to the class folder)."""
    listing = sorted(f"{s}\0{p.relative_to(class_dir).as_posix()}" for s, p in found)
    return hashlib.sha256("\n".join(listing).encode()).hexdigest()


def assign(found: list[tuple[str, Path]], count: int) -> list[list[tuple[str, Path]]]:
    """Deal the class to ``count`` shards: whole students, balanced by submission count."""
    per: dict[str, list[tuple[str, Path]]] = {}
    for student, path in sorted(found, key=lambda sp: (sp[0], sp[1])):
        per.setdefault(student, []).append((student, path))
    loads, shards = [0] * count, [[] for _ in range(count)]
    for student in sorted(per, key=lambda s: (-len(per[s]), s)):
        lightest = min(range(count), key=lambda i: (loads[i], i))
        loads[lightest] += len(per[student])
        shards[lightest] += per[student]
    return [sorted(s, key=lambda sp: sp[1]) for s in shards]


def describe(k: int, n: int, found, mine, class_dir: Path) -> dict:
    """What a shard's JSON gradebook says about itself."""
    return {
        "index": k,
        "count": n,
        "class": fingerprint(found, class_dir),
        "total": len(found),
        "submissions": sorted(p.relative_to(class_dir).as_posix() for _, p in mine),
    }


def merge(paths: list[Path]) -> tuple[list[NotebookResult], dict[str, str], Points]:
    """The results of ``N`` shard gradebooks as one class, in an unsharded run's order.

    One JSON gradebook without a shard is accepted alone (to export it again).

    Raises:
        ShardError: unreadable files, shards of different classes or counts, a shard given
            twice, overlapping or missing shards.
    """
    if not paths:
        raise ShardError("labs-grade merge: name the shards' JSON gradebooks")
    docs = []
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            docs.append((path, doc, read_json(doc)))
        except (OSError, ValueError) as err:
            raise ShardError(
                f"{escape(path)}: not a JSON gradebook of labs-grade ({escape(err)}); a shard "
                "writes one with --shard K/N --gradebook FILE.json"
            ) from err
    plain = [p for p, doc, _ in docs if "shard" not in doc]
    if plain and len(docs) == 1:
        return docs[0][2]
    if plain:
        raise ShardError(
            f"{escape(plain[0])} is not a shard (graded without --shard): merge only the N "
            "gradebooks of one --shard K/N run"
        )
    first = docs[0][1]["shard"]
    n, cls, total = first.get("count"), first.get("class"), first.get("total")
    by_index: dict[int, Path] = {}
    seen: dict[str, Path] = {}
    for path, doc, _ in docs:
        s = doc["shard"]
        if (s.get("count"), s.get("class")) != (n, cls):
            raise ShardError(
                f"{escape(path)} is shard {s.get('index')}/{s.get('count')} of another class "
                f"listing than {escape(docs[0][0])} (shard {first.get('index')}/{n}): merge the "
                "shards of one run over one class folder"
            )
        k = s.get("index")
        if k in by_index:
            raise ShardError(f"shard {k}/{n} given twice: {escape(by_index[k])} and {escape(path)}")
        by_index[k] = path
        for sub in s.get("submissions", []):
            if sub in seen:
                raise ShardError(
                    f"shards overlap: {escape(sub)} is in {escape(seen[sub])} and {escape(path)}"
                )
            seen[sub] = path
    missing = [k for k in range(1, n + 1) if k not in by_index]
    if missing:
        which = ", ".join(f"{k}/{n}" for k in missing)
        raise ShardError(
            f"missing shard(s) {which}: grade them (labs-grade --class ... --shard {missing[0]}/{n}"
            " --gradebook ...json) and merge all N"
        )
    if len(seen) != total:
        raise ShardError(
            f"the shards hold {len(seen)} submissions, the class has {total}: a shard file was "
            "edited or comes from another run"
        )
    results, students, points = [], {}, {}
    for _, _, (rs, st, pts) in docs:
        results += rs
        students.update(st)
        for lab, ex in pts.items():
            points.setdefault(lab, {}).update(ex)
    results.sort(key=lambda r: Path(r.notebook))  # discover()'s order: sorted paths
    return results, students, points
