"""Find stray output on the executed pages of the book: what a reader should never see.

The book build keeps each executed page as a notebook (``_build/jupyter_execute/book/...``). Every
output that renders (the outputs of cells not tagged ``remove-cell`` or ``remove-output``, and the
glued values the prose quotes) must be free of

* anything a cell wrote to **stderr** (warnings, progress bars, log lines) and **tracebacks**;
* **object reprs** (``<torch._C.Generator at 0x7f...>``): a cell whose last line returns a value;
* **warnings** printed on stdout (``UserWarning:``, ``DeprecationWarning:``, ...);
* **machine paths** (``/tmp/``, ``/root/``, ``/home/``, ``/work/``, the build folder, kernel temp
  files such as ``ipykernel_123/456.py``);
* **ratios rounded into nonsense**: ``0x``, ``1x longer`` (a ratio of 1.49 printed with ``:.0f``
  reads "no longer"); print ratios with enough digits.

``python tests/page_outputs.py [EXECUTED.ipynb ...]`` lists the problems (default: every page of
the last build); ``tools/run_page.py PAGE --save OUT.ipynb`` makes one for a single page.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
EXECUTED = REPO / "_build" / "jupyter_execute"
_RATIO_WORDS = r"(?:longer|shorter|faster|slower|larger|smaller|more|less|fewer|higher|lower)"
PATTERNS = {
    "an object repr": re.compile(r"<[\w.]+(?: object)? at 0x[0-9a-fA-F]+>|\bat 0x[0-9a-fA-F]{6,}"),
    "a warning": re.compile(r"\b\w*Warning\b: |\bwarnings\.warn\("),
    "a traceback": re.compile(r"Traceback \(most recent call last\)"),
    "a machine path": re.compile(
        r"(?<![\w.])(?:/tmp/|/root/|/home/|/work/|/var/folders/|/private/var/|[A-Z]:\\Users\\)"
        r"|ipykernel_\d+|" + re.escape(str(REPO))
    ),
    "a ratio rounded into nonsense": re.compile(
        rf"(?<![\w.])0(?:\.0+)?[x×](?![\w])|(?<![\w.])1\s?[x×]\s+{_RATIO_WORDS}\b"
        rf"|(?<![\w.])[01] times {_RATIO_WORDS}\b"
    ),
}
HIDDEN = {"remove-cell", "remove-output"}


# The MIME type the HTML page shows of a rich output: the first of these that it has (myst-nb's
# order); a styled table's text/plain "<...Styler at 0x...>" never renders beside its text/html.
RENDER_ORDER = (
    "application/vnd.jupyter.widget-view+json", "application/javascript", "text/html",
    "image/svg+xml", "image/png", "image/jpeg", "text/markdown", "text/latex", "text/plain",
)  # fmt: skip
TEXT = {"text/html", "text/markdown", "text/latex", "text/plain"}


def _texts(output) -> list[str]:
    """The text of an output as the page shows it (nothing for an image or a widget)."""
    if output.output_type == "stream":
        return [output.text]
    if output.output_type == "error":
        return ["\n".join(output.get("traceback", []))]
    data = output.get("data", {})
    shown = next((k for k in RENDER_ORDER if k in data), None)
    if shown is None:  # a glued value stored under a prefixed MIME type: read its text
        return [str(v) for k, v in data.items() if k.endswith(("text/plain", "text/html"))]
    return [str(data[shown])] if shown in TEXT else []


def problems_of(nb, name: str) -> list[str]:
    """The stray outputs of one executed notebook, as ``"name (cell i): what: excerpt"``."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        glued = [o for o in cell.get("outputs", []) if "scrapbook" in o.get("metadata", {})]
        shown = [] if HIDDEN & set(cell.metadata.get("tags", [])) else cell.get("outputs", [])
        for output in [*shown, *(o for o in glued if o not in shown)]:
            if output.output_type == "stream" and output.name == "stderr":
                first = next((ln for ln in output.text.splitlines() if ln.strip()), "")
                out.append(f"{name} (cell {i}): output on stderr: {first[:160]}")
            if output.output_type == "error":
                out.append(f"{name} (cell {i}): an error: {output.ename}: {output.evalue[:120]}")
            for text in _texts(output):
                for what, pattern in PATTERNS.items():
                    m = pattern.search(text)
                    if m:
                        start = max(0, m.start() - 60)
                        excerpt = " ".join(text[start : m.end() + 60].split())
                        out.append(f"{name} (cell {i}): {what}: ...{excerpt}...")
    return sorted(dict.fromkeys(out))


def problems(paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        name = path.relative_to(EXECUTED).as_posix() if path.is_relative_to(EXECUTED) else path.name
        out += problems_of(nbformat.read(path, as_version=4), name)
    return out


def executed_pages(root: Path = EXECUTED) -> list[Path]:
    return sorted((root / "book").rglob("*.ipynb"))


if __name__ == "__main__":
    found = problems([Path(p) for p in sys.argv[1:]] or executed_pages())
    print("\n".join(found) or "no stray output")
    sys.exit(1 if found else 0)
