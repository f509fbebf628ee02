"""Prove that a lab's checks reject plausible wrong answers, not only the empty stub.

A check that passes ``raise NotImplementedError`` is easy to write; one that also rejects an
off-by-one, a missing rescale or a mean where the median was asked is what makes a grade mean
something.  Authors list such mistakes as :class:`Wrong` records (``tests/wrong_answers/labNN.py``)
and :func:`check_wrong_answers` runs them:

1. the solution notebook runs once, top to bottom, in a fresh Jupyter kernel (from its own folder);
2. for each wrong answer, the cells from the exercise's first solution cell to its last check cell
   or graded variant run again with the mutation applied; the mutated solution cells must
   themselves run without error (a wrong answer is code that *works* but is wrong) and at least
   one check cell (or graded variant) of the exercise must fail;
3. the original cells run again, so the next wrong answer starts from the solution's state.

Example::

    Wrong(1, "counts a multiply-add as one FLOP", old="2 * m * k * n", new="m * k * n")
    Wrong(2, "median instead of mean", block="return float(np.median(times))")
"""

from __future__ import annotations

import queue
import textwrap
from dataclasses import dataclass
from pathlib import Path

from labs.course.notebooks import BEGIN_ARGS_RE, BEGIN_RE, END_RE, LabInfo, parse_lab

__all__ = ["Wrong", "Outcome", "apply_wrong", "check_wrong_answers"]


@dataclass(frozen=True)
class Wrong:
    """One plausible wrong answer to exercise ``exercise``.

    Give either ``old``/``new`` (replace every occurrence of ``old`` inside the exercise's solution
    blocks; ``old`` must occur) or ``block`` (the new body of solution block number ``part`` of the
    exercise, counted in notebook order from 0; it is re-indented to the marker's indentation).
    """

    exercise: int
    why: str
    old: str | None = None
    new: str | None = None
    block: str | None = None
    part: int = 0

    def __post_init__(self) -> None:
        if (self.block is None) == (self.old is None):
            raise ValueError(f"Wrong({self.exercise}, {self.why!r}): give either old/new or block")
        if self.old is not None and self.new is None:
            raise ValueError(f"Wrong({self.exercise}, {self.why!r}): old= needs new=")


@dataclass
class Outcome:
    """What the checks said about one wrong answer."""

    wrong: Wrong
    rejected: bool
    detail: str  #: the failing check's first error line, or why the wrong answer is invalid


def _blocks(source: str, number: int) -> list[tuple[int, int, str]]:
    """``(begin_line, end_line, indent)`` of each solution block of exercise ``number``."""
    found, start, indent = [], None, ""
    for i, line in enumerate(source.splitlines()):
        begin = BEGIN_RE.match(line)
        if begin:
            args = BEGIN_ARGS_RE.match(begin.group("rest"))
            if args and int(args.group("num")) == number:
                start, indent = i, begin.group("indent")
        elif END_RE.match(line) and start is not None:
            found.append((start, i, indent))
            start = None
    return found


def apply_wrong(info: LabInfo, wrong: Wrong) -> dict[int, str]:
    """The mutated sources, ``{cell index: new source}``, of ``wrong`` applied to a parsed lab."""
    ex = info.exercises.get(wrong.exercise)
    if ex is None:
        raise ValueError(f"{info.path.name}: no exercise {wrong.exercise} (for {wrong.why!r})")
    changed: dict[int, str] = {}
    if wrong.old is not None:
        for index in ex.solution_cells:
            lines = info.nb.cells[index].source.splitlines()
            for begin, end, _ in _blocks(info.nb.cells[index].source, wrong.exercise):
                body = "\n".join(lines[begin + 1 : end])
                if wrong.old in body:
                    lines[begin + 1 : end] = body.replace(wrong.old, wrong.new).splitlines()
                    changed[index] = "\n".join(lines)
        if not changed:
            raise ValueError(
                f"{info.path.name}, exercise {wrong.exercise} ({wrong.why!r}): {wrong.old!r} does "
                "not occur in its solution blocks"
            )
        return changed
    blocks = [
        (i, b) for i in ex.solution_cells for b in _blocks(info.nb.cells[i].source, ex.number)
    ]
    if not 0 <= wrong.part < len(blocks):
        raise ValueError(
            f"{info.path.name}, exercise {wrong.exercise} ({wrong.why!r}): part={wrong.part}, but "
            f"the exercise has {len(blocks)} solution block(s)"
        )
    index, (begin, end, indent) = blocks[wrong.part]
    lines = info.nb.cells[index].source.splitlines()
    body = textwrap.indent(textwrap.dedent(wrong.block).strip("\n"), indent)
    lines[begin + 1 : end] = body.splitlines()
    return {index: "\n".join(lines)}


class _Kernel:
    """A Jupyter kernel running in ``cwd``: run code, get the error line (or None)."""

    def __init__(self, cwd: Path):
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd))

    def run(self, source: str, timeout: float) -> str | None:
        errors: list[str] = []

        def hook(msg: dict) -> None:
            if msg["header"]["msg_type"] == "error":
                errors.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")

        try:
            reply = self.kc.execute_interactive(
                source, timeout=timeout, output_hook=hook, allow_stdin=False, stop_on_error=True
            )
        except (TimeoutError, queue.Empty):
            self.km.interrupt_kernel()
            return f"timeout after {timeout:.0f} s"
        if reply["content"]["status"] != "ok":
            return errors[0].splitlines()[0] if errors else reply["content"].get("ename", "error")
        return None

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def check_wrong_answers(
    path: str | Path, wrongs: list[Wrong], timeout: float = 180
) -> list[Outcome]:
    """Run ``wrongs`` against the solution notebook ``path``; one :class:`Outcome` each.

    Raises:
        ValueError: a wrong answer names no exercise of the lab or its ``old`` text is absent.
        RuntimeError: the solution itself fails, or a cell fails when the original is restored.
    """
    info = parse_lab(path)
    mutations = [apply_wrong(info, w) for w in wrongs]  # validate every record before running
    cells = info.nb.cells
    kernel = _Kernel(info.path.parent)
    try:
        for i, cell in enumerate(cells):
            if cell.cell_type == "code" and (err := kernel.run(cell.source, timeout)):
                raise RuntimeError(f"{info.path.name}: the solution fails at cell {i}: {err}")
        outcomes = []
        for wrong, changed in zip(wrongs, mutations):
            ex = info.exercises[wrong.exercise]
            checks = [*ex.check_cells, *ex.graded_cells]  # the visible checks and graded variants
            span = [
                i
                for i in range(min(ex.solution_cells), max(checks) + 1)
                if cells[i].cell_type == "code"
            ]
            invalid, failed = "", ""
            for i in span:
                err = kernel.run(changed.get(i, cells[i].source), timeout)
                if err and i in changed and not invalid:
                    invalid = f"the wrong answer itself raises in cell {i}: {err}"
                if err and i in checks and not failed:
                    failed = err
            for i in span:  # restore the solution's state for the next wrong answer
                if err := kernel.run(cells[i].source, timeout):
                    raise RuntimeError(
                        f"{info.path.name}: cell {i} fails after restoring the solution "
                        f"(following wrong answer {wrong.why!r}): {err}"
                    )
            if invalid:
                outcomes.append(Outcome(wrong, False, invalid))
            else:
                outcomes.append(Outcome(wrong, bool(failed), failed or "every check passed"))
        return outcomes
    finally:
        kernel.close()
