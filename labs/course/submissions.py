"""Finding the submissions in a class folder, and keeping one per student and lab.

:func:`walk` lists the notebooks under a folder without recursion (a stack of folders, each read
once with ``os.scandir``): a student's tree thousands of folders deep cannot raise
``RecursionError`` and cost the class its gradebook (the red team's finding 5). Hidden folders
(``.ipynb_checkpoints``, ``.git``) are never entered; folders deeper than :data:`MAX_DEPTH`
below the class folder are not searched, and a folder that cannot be read is skipped, each with a
line that says so; symbolic links are refused, never followed. :func:`discover` turns the listing
into ``(student, notebook)`` pairs; :func:`keep_first` drops a student's second submission for a
lab *before* anything is graded (finding 7: every copy used to get a full kernel run first), and
:func:`duplicates` does the same over results (for merged shards). :func:`digest` and
:func:`load` read a submission: one over :data:`NOTEBOOK_LIMIT` bytes is ``invalid`` unread
(finding 6), and each is read only when it is graded, and only if unchanged since the listing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from labs.course.isolation import OUTPUT_LIMIT
from labs.course.key import find_key, load_key
from labs.course.notebooks import NotebookError, load_notebook
from labs.course.results import NotebookResult

__all__ = ["MAX_DEPTH", "NOTEBOOK_LIMIT", "walk", "discover", "keep_first", "duplicates",
           "digest", "load"]  # fmt: skip

MAX_DEPTH = 16  #: folder levels searched below the class folder (the student's is level 1)
NOTEBOOK_LIMIT = OUTPUT_LIMIT  #: bytes of a submitted notebook (64 MiB, a cell's output limit)


def walk(folder: Path, skip: tuple[str, ...] = (".",)) -> tuple[list[Path], list[str]]:
    """``([notebook], [refused])`` under ``folder``, sorted; never recursive, never a link.

    Entries whose name starts with one of ``skip`` (hidden ones by default) are passed over
    silently; everything else not searched or not listed is a line of ``refused``.
    """
    found: list[Path] = []
    refused: list[str] = []
    stack: list[tuple[Path, int]] = [(Path(folder), 0)]
    while stack:
        here, depth = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            refused.append(f"{here.relative_to(folder)}: cannot be read ({err.strerror or err})")
            continue
        for entry in entries:
            if entry.name.startswith(skip):
                continue
            path = here / entry.name
            rel = path.relative_to(folder)
            try:
                if entry.is_symlink():
                    if entry.name.endswith(".ipynb") or entry.is_dir():
                        refused.append(f"{rel}: a symbolic link (not graded)")
                elif entry.is_dir(follow_symlinks=False):
                    if depth + 1 > MAX_DEPTH:
                        refused.append(f"{rel}: more than {MAX_DEPTH} folders deep (not searched)")
                    else:
                        stack.append((path, depth + 1))
                elif entry.name.endswith(".ipynb") and entry.is_file(follow_symlinks=False):
                    found.append(path)
            except OSError as err:
                refused.append(f"{rel}: cannot be read ({err.strerror or err})")
    return sorted(found), refused


def discover(class_dir: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """``([(student, notebook)], [refused])`` under a class folder, sorted by path.

    The student is the first folder under the class folder (a notebook directly in it is its own
    student, by file name); see :func:`walk` for what is skipped and refused.
    """
    paths, refused = walk(class_dir)
    found = []
    for path in paths:
        rel = path.relative_to(class_dir)
        found.append((rel.parts[0] if len(rel.parts) > 1 else path.stem, path))
    return found, refused


def keep_first(
    found: list[tuple[str, Path]], key: dict | None, key_dir
) -> tuple[list[tuple[str, Path]], list[Path]]:
    """``(kept, dropped)``: the first notebook by path of each student and lab, the others.

    A notebook's lab is its key's (``key``, or the one found by its name in ``key_dir``); one
    with no key is kept (it is graded ``invalid``, saying why).
    """
    labs: dict[Path, str] = {}
    seen: set[tuple[str, str]] = set()
    kept, dropped = [], []
    for student, path in sorted(found, key=lambda sp: sp[1]):
        try:
            if key is not None:
                lab = key["lab"]
            else:
                where = find_key(path, key_dir)
                lab = labs.get(where) or labs.setdefault(where, load_key(where)["lab"])
        except (NotebookError, KeyError):
            kept.append((student, path))
            continue
        if (student, lab) in seen:
            dropped.append(path)
        else:
            seen.add((student, lab))
            kept.append((student, path))
    return kept, dropped


def duplicates(results: list[NotebookResult], students: dict[str, str]) -> list[NotebookResult]:
    """Keep one submission per student and lab (the first by path); return the others."""
    seen: set[tuple[str, str]] = set()
    extra = []
    for r in results:
        if r.notebook not in students:  # notebooks named on the command line: all kept
            continue
        who = (students[r.notebook], r.lab)
        if r.lab and who in seen:
            extra.append(r)
        seen.add(who)
    return extra


def digest(path) -> str | NotebookError:
    """The SHA-256 of a submitted notebook (read in chunks), or why it will not be read."""
    try:
        size = os.stat(path).st_size
        if size > NOTEBOOK_LIMIT:
            return NotebookError(f"{path}: {size / 2**20:.0f} MiB, over the {NOTEBOOK_LIMIT >> 20}"
                                 " MiB limit for a notebook; not read (clear its outputs)")  # fmt: skip
        sha = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(2**20), b""):
                sha.update(chunk)
        return sha.hexdigest()
    except FileNotFoundError:
        return NotebookError(f"{path}: no such notebook file")
    except OSError as err:
        return NotebookError(f"{path}: cannot be read ({err.strerror or err})")


def load(path, sha256: str | NotebookError) -> Any:
    """The notebook, if it still has ``sha256`` (from :func:`digest`), or why it is not graded
    (a :class:`NotebookError`)."""
    if isinstance(sha256, NotebookError):
        return sha256
    try:
        with open(path, "rb") as f:
            data = f.read(NOTEBOOK_LIMIT + 1)
        if hashlib.sha256(data).hexdigest() != sha256:
            return NotebookError(f"{path}: changed while the class was graded; not graded")
        return load_notebook(path, data)
    except OSError as err:
        return NotebookError(f"{path}: cannot be read ({err.strerror or err})")
    except NotebookError as err:
        return err
