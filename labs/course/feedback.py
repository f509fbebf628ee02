"""Feedback is data: the one escaping function for everything the grader prints or writes.

A failure message is text the *student's* code chose (an exception message, a repr), so it may hold
terminal escape sequences that redraw a FAIL row as PASS, a carriage return or backspaces that
overwrite what came before, bidirectional overrides that show ``FAIL`` as ``LIAF`` or reorder a
line, or a NUL that truncates it. :func:`escape` turns every such character into its visible
Python escape (``\\x1b``, ``\\r``, ``\\u202e``, ``\\x00``) and leaves all other text alone; it is
idempotent (escaped text has nothing left to escape). :func:`clean` also folds a multi-line
message onto one line. The table, the summary, the progress bar, the CSV and JSON gradebooks,
Gradescope's ``results.json`` and the Canvas and Moodle exports all go through it.

:func:`spreadsheet_cell` guards a CSV cell against formula injection (OWASP, "CSV Injection"): a
text cell that starts with ``=``, ``+``, ``-`` or ``@`` (or their full-width forms) gets a leading
``'``, so that a spreadsheet or an LMS import reads it as text, never as a formula; numbers are
left alone.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["escape", "clean", "spreadsheet_cell", "feedback_line", "number"]

# Unicode categories that never belong in a feedback line: controls (C0, DEL, C1), format
# characters (bidirectional overrides and isolates, zero-width characters, the BOM, tag
# characters), line and paragraph separators, and lone surrogates (undecodable bytes).
_UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_FOLD = re.compile(r"[ \t\n]+")
_FORMULA = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def _escaped(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape(text: object) -> str:
    """``text`` with every control, format and separator character written as its escape.

    >>> escape("\\x1b[32mPASS\\x1b[0m")
    '\\\\x1b[32mPASS\\\\x1b[0m'
    """
    text = str(text)
    if text.isprintable():  # the common case: nothing to do
        return text
    return "".join(_escaped(ch) if unicodedata.category(ch) in _UNSAFE else ch for ch in text)


def clean(text: object) -> str:
    """One line of inert text: runs of spaces, tabs and line breaks (``\\n``, ``\\r\\n``) folded
    to one space, then :func:`escape` (a lone carriage return stays visible as ``\\r``)."""
    return escape(_FOLD.sub(" ", str(text).replace("\r\n", "\n")).strip(" "))


def spreadsheet_cell(text: object) -> str:
    """A CSV cell no spreadsheet evaluates: :func:`clean`, and a ``'`` before a formula (one
    that starts with ``= + - @``, or their full-width forms, after any leading spaces)."""
    text = clean(text)
    bare = text.lstrip()  # every Unicode space (U+00A0, U+3000, ...): spreadsheets skip them too
    if bare.startswith(_FORMULA) and not _NUMBER.match(bare):
        return "'" + text
    return text


def number(value: float) -> str:
    """Points as an LMS reads them: ``3``, ``1.5``, ``0.25`` (no trailing zeros, no exponent)."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def feedback_line(exercise) -> str:
    """What ``labs-grade`` prints for one exercise (an :class:`~labs.course.results.ExerciseResult`):
    number, PASS/FAIL/N/A, status and the reason or what was verified, escaped."""
    return (
        f"{exercise.exercise or '-':<9} {exercise.outcome:<7} {exercise.status:<9} "
        f"{clean(exercise.message)}"
    )
