"""DualPipe and DualPipeV as pipeline schedules (Chapter 18).

DualPipe (DeepSeek-AI, 2024) feeds half of the micro-batches into the pipeline at rank 0 and half at
rank p - 1; every rank holds two stages, one per direction, so the weights exist twice.  It overlaps
the forward chunk of one micro-batch with the backward chunk of another (``Action.overlap``: the
authors' "F&B") and defers weight gradients as zero-bubble schedules do.  DualPipeV cuts DualPipe in
half into a V shape with one copy of the weights.

The per-rank step lists follow the structure of the reference implementation (``dualpipe.py`` in the
``deepseek-ai/DualPipe`` repository); the result is a :class:`labs.parallel.pipeline.Schedule`, so
:func:`labs.parallel.pipeline.simulate`, :func:`labs.parallel.pipeline.draw_timeline` and
:func:`labs.parallel.pipeline.execute.run_schedule` work on it unchanged.
"""

from __future__ import annotations

from collections import deque

from labs.parallel.pipeline.schedules import Action, Schedule, _need

__all__ = ["dualpipe", "dualpipe_v"]


def _dualpipe_program(half_rank: int, half_ranks: int, half_chunks: int, middle: bool):
    """The per-rank step list of DeepSeek's DualPipe (``dualpipe.py``, DeepSeek-AI 2025) as
    (op, phase, split) triples.  Phase 0 is the direction that starts on this rank's side; "F&"
    is a forward overlapped with the backward that follows it."""
    prog = []
    n1 = (half_ranks - half_rank - 1) * 2
    prog += [("F", 0, False)] * n1
    for _ in range(half_rank + 1):
        prog += [("F", 0, False), ("F", 1, False)]
    for _ in range(half_ranks - half_rank - 1):
        prog += [("B", 1, True), ("W", None, None), ("F", 1, False)]
    for i in range(half_chunks - 2 * half_ranks + half_rank + 1):
        first = "F" if (i == 0 and middle) else "F&"  # the middle ranks do not overlap the first
        prog += [(first, 0, False), ("B", 1, False), ("F&", 1, False), ("B", 0, False)]
    for _ in range(half_ranks - half_rank - 1):
        prog += [("B", 1, False), ("F&", 1, False), ("B", 0, False)]
    step6, split = half_rank + 1, False
    for i in range(step6):
        if i == step6 // 2 and half_rank % 2 == 1:
            split = True
        prog.append(("B", 1, split))
        if i == step6 // 2 and half_rank % 2 == 0:
            split = True
        prog.append(("B", 0, split))
    for _ in range(half_ranks - half_rank - 1):
        prog += [("W", None, None), ("B", 0, True)]
    prog += [("W", None, None)] * (half_rank + 1)
    return prog


def _program_to_actions(prog, chunk_of_phase, mb_of) -> list[Action]:
    """Number the micro-batches of each phase in order and resolve W to the oldest pending B."""
    nf, nb = [0, 0], [0, 0]
    pending: deque[tuple[int, int]] = deque()
    out = []
    for op, phase, split in prog:
        if op == "W":
            mb, chunk = pending.popleft()
            out.append(Action("W", mb, chunk))
            continue
        counter = nb if op == "B" else nf
        mb, chunk = mb_of(phase, counter[phase]), chunk_of_phase(phase)
        counter[phase] += 1
        out.append(Action(op[0], mb, chunk, overlap=op == "F&"))
        if op == "B" and split:
            pending.append((mb, chunk))
    return out


def dualpipe(p: int, m: int) -> Schedule:
    """DualPipe (DeepSeek-V3, 2024): m/2 micro-batches enter at rank 0 and m/2 at rank p - 1.
    Rank r holds stage r for the first direction (chunk 0) and stage p - 1 - r for the second
    (chunk 1), so the weights exist twice.  Needs p even, m even and m >= 2p."""
    _need(p >= 2 and p % 2 == 0, f"dualpipe: p must be even and >= 2, got {p}")
    _need(m % 2 == 0 and m >= 2 * p, f"dualpipe: m must be even and >= 2p = {2 * p}, got {m}")
    half = m // 2
    acts = []
    for r in range(p):
        second = int(r >= p // 2)
        prog = _dualpipe_program(min(r, p - 1 - r), p // 2, half, r in (p // 2 - 1, p // 2))
        acts.append(
            _program_to_actions(
                prog,
                chunk_of_phase=lambda ph, s=second: ph ^ s,
                mb_of=lambda ph, i, s=second: (ph ^ s) * half + i,
            )
        )
    routes = [[(r, 0) for r in range(p)]] * half + [[(p - 1 - r, 1) for r in range(p)]] * half
    return Schedule("DualPipe", p, m, 2, acts, routes, copies=2)


def dualpipe_v(p: int, m: int) -> Schedule:
    """DualPipeV: DualPipe "cut in half" into a V shape.  The model has 2p stages; rank r holds
    stage r (chunk 0) and stage 2p - 1 - r (chunk 1); every micro-batch goes down the ranks and
    back up.  One copy of the weights.  Needs m >= 2p."""
    _need(p >= 1 and m >= 2 * p, f"dualpipe_v: need m >= 2p = {2 * p}, got p={p}, m={m}")
    acts = []
    for r in range(p):
        prog = _dualpipe_program(r, p, m, r == p - 1)
        acts.append(_program_to_actions(prog, lambda ph: ph, lambda ph, i: i))
    route = [(r, 0) for r in range(p)] + [(p - 1 - r, 1) for r in range(p)]
    return Schedule("DualPipeV", p, m, 2, acts, [route] * m)
