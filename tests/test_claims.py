"""The book states no typed percentage or ratio that its run or a citation does not back.

A figure the prose takes from an executed cell is glued (``{glue:text}`key```), so the page shows
what the run computed; a figure from the literature carries a citation in the same sentence. This
test reads the prose of every chapter and lab (Markdown cells and figure captions; code, inline
code, URLs and the contents of roles are left out) and fails on a sentence that states a
percentage (``12 %``, ``12\\%``, ``12 percent``) or a ratio (``4×``, ``4x``, ``4\\times`` not
followed by another factor, ``4 times faster``) with neither. The few sentences where such a
number is a definition, a design parameter or derived in the sentence itself are listed, each
with the reason it was accepted, in ``tests/claims_exceptions.yml``; an entry that no longer
matches any sentence fails too, so the list stays reviewed.

Run ``python tests/test_claims.py`` to print every unbacked sentence with its page and cell.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
EXCEPTIONS = Path(__file__).with_name("claims_exceptions.yml")
PAGES = sorted((REPO / "book").rglob("*.md")) + sorted((REPO / "book" / "labs").glob("*.ipynb"))

NUMBER = r"(?<![\w.])\d(?:[\d,]*\d)?(?:\.\d+)?"
PERCENT = re.compile(NUMBER + r"\s?(?:\\?%|percent\b)")
# "4×", "4x", "4\times" is a ratio unless another factor follows ("2 × 8 GPUs", "2 \times 2",
# "6.1 \times 10^{-5}", "int8 × int8", "4 × d"): then it is a product.
_FACTOR = r"[\d\\{(]|[A-Za-z](?![a-z])|[A-Za-z]+\d"  # what makes the sign a product
RATIO = re.compile(
    NUMBER + rf"(?:\s?(?:×|x\b)(?!\s*(?:\$|{_FACTOR}))|\s?\\times\b(?!\s*(?:{_FACTOR})))"
)
TIMES = re.compile(
    NUMBER + r"\s+times\s+(?:as\b|faster|slower|more|less|fewer|larger|smaller|longer|shorter|"
    r"higher|lower|bigger|cheaper|quicker)"
)
CITATION = re.compile(r"\{cite(?::\w+)?\}")
# Roles whose content is a name, not prose: {glue:text}`key`, {cite:p}`key`, {numref}`fig-1`, ...
ROLE = re.compile(r"\{([\w:-]+)\}`[^`]*`")
ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|et al|vs|cf|approx|Fig|Eq|Sec|resp)\.")


@dataclass(frozen=True)
class Sentence:
    page: str  # path relative to the repository
    cell: int  # index of the Markdown cell in the page's notebook form
    text: str  # the sentence with runs of white space collapsed


def _markdown_cells(path: Path) -> list[tuple[int, str]]:
    """The page's Markdown cells and its figure captions (a caption is prose the reader reads)."""
    nb = jupytext.read(path) if path.suffix == ".md" else nbformat.read(path, as_version=4)
    out = []
    for i, c in enumerate(nb.cells):
        if c.cell_type == "markdown":
            out.append((i, c.source))
        caption = c.metadata.get("mystnb", {}).get("figure", {}).get("caption")
        if c.cell_type == "code" and caption:
            out.append((i, caption))
    return out


def _prose(source: str) -> str:
    """The Markdown with code, comments, URLs and role contents replaced by neutral words."""
    text = re.sub(r"^(```|~~~).*?^\1\s*$", "\n\n", source, flags=re.S | re.M)  # fenced code
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"^:{3,}.*$", "\n\n", text, flags=re.M)  # colon-fence directive lines
    text = ROLE.sub(lambda m: "CITE" if m.group(1).startswith("cite") else "ROLE", text)
    text = re.sub(r"`[^`\n]*`", "CODE", text)
    text = re.sub(r"\]\([^)\s]*\)", "]", text)  # link targets
    return text


def _sentences_of(source: str) -> list[str]:
    text = _prose(source)
    text = ABBREVIATIONS.sub(lambda m: m.group(1).replace(".", "") + "\u2024", text)
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[-*+] |\d+\. |\||#))", text)
    out: list[str] = []
    table_cited = False  # a table introduced by a citing sentence ending in ":" is cited by it
    for block in blocks:
        if block.lstrip().startswith("|"):  # a table row is one statement
            out.append(block + (" CITE" if table_cited else ""))
            continue
        parts = re.split(r"(?<=[.!?])[)\]*_\"']*\s+(?=[A-Z0-9(\[{$*_\"'])", block)
        out += parts
        table_cited = parts[-1].rstrip().endswith(":") and "CITE" in parts[-1]
    return [" ".join(s.split()) for s in out if s.strip()]


def sentences(path: Path) -> list[Sentence]:
    page = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
    return [
        Sentence(page, cell, text)
        for cell, source in _markdown_cells(path)
        for text in _sentences_of(source)
    ]


def unbacked(sentence: str) -> bool:
    """True if the sentence states a typed percentage or ratio and cites nothing."""
    if "CITE" in sentence:
        return False
    return any(p.search(sentence) for p in (PERCENT, RATIO, TIMES))


def load_exceptions() -> list[dict]:
    entries = yaml.safe_load(EXCEPTIONS.read_text(encoding="utf-8")) or []
    for entry in entries:
        missing = {"page", "text", "reason"} - entry.keys()
        assert not missing, f"{EXCEPTIONS.name}: entry {entry} lacks {sorted(missing)}"
        assert entry["reason"].strip(), f"{EXCEPTIONS.name}: entry {entry} gives no reason"
    return entries


def _excused(s: Sentence, entries: list[dict]) -> bool:
    return any(e["page"] == s.page and e["text"] in s.text for e in entries)


def findings(pages: list[Path] = PAGES) -> list[Sentence]:
    return [s for path in pages for s in sentences(path) if unbacked(s.text)]


# --- the checker itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The cache shrinks by 8x for Llama-2-70B.",
        "The fused kernel is 3.5× faster here.",
        "Pruning to 50 % leaves the file as large.",
        "About 33% more arithmetic.",
        "A relative spacing of $2^{-10} \\approx 0.1\\%$.",
        "Stage 3 sends 1.5 times as much.",
        "Within 2 percent of fp32.",
        "It shrinks the weights by $4\\times$.",
    ],
)
def test_a_typed_figure_is_caught(text):
    assert unbacked(_sentences_of(text)[0]), text


@pytest.mark.parametrize(
    "text",
    [
        "Checkpointing cut the saved bytes by a factor of {glue:text}`ckpt_mem_ratio`.",
        "It uses {glue:text}`ch09_util` of the chip.",
        "Its paper reports 1.68× faster training {cite:p}`ren2021zero`.",
        "{cite:t}`hu2022lora` report 10,000 times fewer trainable parameters.",
        "The smallest 3D layout has $2 \\times 2 \\times 2 = 8$ devices.",
        "Hybrid sharding on 2 × 8 GPUs.",
        "The smallest normal value is $6.1 \\times 10^{-5}$.",
        "A row vector (a $1 \\times k$ matrix).",
        "The int8 × int8 product accumulates in int32.",
        "Run `python bench.py --ratio 4x` to see.",
        "Open [the log](https://example.org/50%25) for details.",
    ],
)
def test_a_backed_or_unrelated_figure_passes(text):
    assert not any(unbacked(s) for s in _sentences_of(text)), text


def test_a_table_is_cited_by_the_sentence_that_introduces_it():
    cited = "The authors compare them {cite:p}`x`:\n\n| a | b |\n|---|---|\n| one | 2× |\n"
    uncited = "We compare them:\n\n| a | b |\n|---|---|\n| one | 2× |\n"
    assert not any(unbacked(s) for s in _sentences_of(cited))
    assert any(unbacked(s) for s in _sentences_of(uncited))


def test_figure_captions_are_read_too(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "---\njupytext:\n  text_representation: {extension: .md, format_name: myst}\n"
        "kernelspec: {display_name: Python 3, language: python, name: python3}\n---\n"
        "# A page\n\n```{code-cell} ipython3\n:mystnb:\n:  figure:\n"
        ":    caption: Pruning half the weights costs 3 % of the accuracy.\n"
        ":    name: fig-x\nprint(1)\n```\n"
    )
    assert [s.text for s in findings([page])] == [
        "Pruning half the weights costs 3 % of the accuracy."
    ]


def test_a_citation_backs_only_its_own_sentence():
    found = [s for s in _sentences_of("A survey {cite:p}`x` says so. Then 40 % got better.")]
    assert [unbacked(s) for s in found] == [False, True]


# --- the book ----------------------------------------------------------------------------------


def test_every_typed_percentage_or_ratio_is_glued_cited_or_excepted():
    entries = load_exceptions()
    bad = [s for s in findings() if not _excused(s, entries)]
    assert not bad, (
        "these sentences state a percentage or ratio that is neither glued from the cell that "
        "computed it ({glue:text}`key`) nor cited in the same sentence ({cite:p}`key`); glue it, "
        f"cite it, or (if it is a definition or a design parameter) list it in {EXCEPTIONS.name} "
        "with the reason:\n" + "\n".join(f"  {s.page} (cell {s.cell}): {s.text}" for s in bad)
    )


def test_every_exception_still_matches_a_sentence():
    live = findings()
    stale = [e for e in load_exceptions() if not any(_excused(s, [e]) for s in live)]
    assert not stale, f"{EXCEPTIONS.name}: these entries match no unbacked sentence any more; " + (
        "remove them:\n" + "\n".join(f"  {e['page']}: {e['text']!r}" for e in stale)
    )


if __name__ == "__main__":
    entries = load_exceptions()
    for s in findings([Path(p).resolve() for p in sys.argv[1:]] or PAGES):
        mark = "excepted" if _excused(s, entries) else "UNBACKED"
        print(f"{mark}  {s.page} (cell {s.cell}): {s.text}")
