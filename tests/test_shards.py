"""``--shard K/N``: a deterministic, balanced slice of a class; ``merge`` refuses what is not one class.

No kernel here: shards are dealt from listings and merged from JSON gradebooks written by
:func:`labs.course.gradefile.payload`. The graded round trip (two shards merged equal the unsharded
gradebook, byte for byte) is in ``tests/test_gradebook.py``; the guide's Slurm and Kubernetes
examples are checked in ``tests/test_instructor_guide.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from labs.course import shards
from labs.course.gradefile import payload
from labs.course.results import ExerciseResult, NotebookResult

CLASS = Path("class")


def listing(counts: dict[str, int]) -> list[tuple[str, Path]]:
    return [(s, CLASS / s / f"lab{i + 2:02d}.ipynb") for s, n in counts.items() for i in range(n)]


def test_parse_shard():
    assert shards.parse_shard("2/4") == (2, 4) and shards.parse_shard(" 1 / 1 ") == (1, 1)
    for bad in ("0/4", "5/4", "2", "a/b", "-1/3", "2/0"):
        with pytest.raises(shards.ShardError, match="expected K/N with 1 <= K <= N"):
            shards.parse_shard(bad)


def test_shards_cover_the_class_once_whatever_the_file_system_order():
    found = listing({f"s{i:02d}": 1 + i % 4 for i in range(23)})
    dealt = shards.assign(found, 4)
    for seed in range(5):
        shuffled = found[:]
        random.Random(seed).shuffle(shuffled)
        assert shards.assign(shuffled, 4) == dealt  # not the order the files were listed in
    flat = [p for shard in dealt for _, p in shard]
    assert sorted(flat) == sorted(p for _, p in found) and len(set(flat)) == len(found)


def test_shards_keep_a_students_notebooks_together_and_are_balanced():
    counts = {f"s{i:02d}": 1 + (i * 7) % 5 for i in range(40)}
    dealt = shards.assign(listing(counts), 6)
    for shard in dealt:
        for student in {s for s, _ in shard}:
            assert sum(s == student for s, _ in shard) == counts[student]
    loads = [len(s) for s in dealt]
    assert max(loads) - min(loads) <= max(counts.values()), loads
    assert shards.assign(listing({"a": 1}), 3) == [[("a", CLASS / "a" / "lab02.ipynb")], [], []]


def _shard_file(tmp_path, k, n, found, subs, name=None, cls="abc") -> Path:
    results = [
        NotebookResult(str(p), [ExerciseResult(str(p), 1, True, "", verified="ok")], lab="lab02")
        for _, p in subs
    ]
    shard = {"index": k, "count": n, "class": cls, "total": len(found),
             "submissions": sorted(str(p.relative_to(CLASS)) for _, p in subs)}  # fmt: skip
    doc = payload(results, {str(p): s for s, p in subs}, {"lab02": {1: 1}}, shard)
    path = tmp_path / (name or f"shard-{k}.json")
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_merge_returns_an_unsharded_runs_order(tmp_path):
    found = listing({"carol": 1, "alice": 2, "bob": 1, "a-b": 1})
    files = [
        _shard_file(tmp_path, k + 1, 3, found, s) for k, s in enumerate(shards.assign(found, 3))
    ]
    results, students, points = shards.merge(files[::-1])
    assert [r.notebook for r in results] == [str(p) for p in sorted(p for _, p in found)]
    assert students[str(CLASS / "a-b" / "lab02.ipynb")] == "a-b" and points == {"lab02": {1: 1}}


def test_merge_refuses_missing_twice_overlapping_foreign_and_unreadable_shards(tmp_path):
    found = listing({"alice": 1, "bob": 1, "carol": 1})
    one, two, three = shards.assign(found, 3)
    f1, f2, f3 = (
        _shard_file(tmp_path, k, 3, found, s) for k, s in [(1, one), (2, two), (3, three)]
    )
    cases = {
        "missing shard(s) 3/3: grade them": [f1, f2],
        "shard 2/3 given twice": [f1, f2, f2, f3],
        "shards overlap: bob/lab02.ipynb": [f1, f2, _shard_file(tmp_path, 3, 3, found, two, "x.json")],
        "of another class listing": [f1, f2, _shard_file(tmp_path, 3, 3, found, three, "y", "zzz")],
        "the shards hold 2 submissions, the class has 3": [
            f1, f2, _shard_file(tmp_path, 3, 3, found, [], "z.json")
        ],
        "not a JSON gradebook of labs-grade": [f1, f2, f3, tmp_path / "absent.json"],
        "name the shards": [],
    }  # fmt: skip
    for message, files in cases.items():
        with pytest.raises(
            shards.ShardError, match=message.replace("(", r"\(").replace(")", r"\)")
        ):
            shards.merge(files)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(payload([], {}, {})), encoding="utf-8")
    assert shards.merge([plain]) == ([], {}, {})  # one unsharded gradebook: exported again
    with pytest.raises(shards.ShardError, match="is not a shard"):
        shards.merge([f1, plain])


@pytest.mark.parametrize("names", [("new line", "new\nline"), ("alice", "alice ")])
def test_folders_whose_names_clean_alike_stay_two_students_after_merge(tmp_path, names):
    """Red team #10: the merge keyed students by the cleaned name, so one knocked out the other
    as a "second submission"; it keys by the exact folder name, as an unsharded run does."""
    from labs.course.gradefile import rows
    from labs.course.submissions import duplicates

    found = [(s, CLASS / s / "lab02.ipynb") for s in names]
    passed = {names[0]: True, names[1]: False}
    results = {
        str(p): NotebookResult(
            str(p),
            [ExerciseResult(str(p), 1, passed[s], "" if passed[s] else "wrong", verified="ok")],
            lab="lab02",
        )  # fmt: skip
        for s, p in found
    }
    students = {str(p): s for s, p in found}
    unsharded = [results[str(p)] for _, p in sorted(found, key=lambda sp: sp[1])]
    assert duplicates(unsharded, students) == []
    files = []
    for k, mine in enumerate(shards.assign(found, 2), 1):
        shard = {"index": k, "count": 2, "class": "abc", "total": 2,
                 "submissions": sorted(str(p.relative_to(CLASS)) for _, p in mine)}  # fmt: skip
        doc = payload([results[str(p)] for _, p in mine], students, {"lab02": {1: 1}}, shard)
        files.append(tmp_path / f"shard-{k}.json")
        files[-1].write_text(json.dumps(doc), encoding="utf-8")
    merged, merged_students, points = shards.merge(files)
    assert duplicates(merged, merged_students) == []
    assert rows(merged, merged_students, points) == rows(unsharded, students, points)
    assert sum(r["points"] == "1" for r in rows(merged, merged_students, points)) == 1
