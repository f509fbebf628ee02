"""Read the book's prose and find the claims its run, a guard or a citation does not back.

The rules are written out for authors in ``CLAIMS-RULES.md``; ``tests/test_claims.py`` applies them
to the book. In short, a sentence of a page is a *claim* when it states

* a **typed figure**: a percentage (``12 %``) or a ratio (``4×``, ``4 times faster``) in digits; or
* a **verbal verdict** on measured behaviour (:data:`VERDICTS`): a comparison ("faster", "beats",
  "the weakest"), a multiple ("twice as", "$v$ times the", "an order of magnitude", "several-fold",
  "within a factor of"), a saturation ("saturates", "past the knee", "on the memory roof"), a cost
  verdict ("at no extra cost", "dominates") -- these always; or an equality or quantifier ("the
  same", "unchanged", "mostly", "never", "half", "better") when the sentence is about a run
  (:data:`RUN_MARKERS`, or a paragraph that glues a number, or a lab's "expect"/"look for").

A claim is *backed* when its clause glues the number (``{glue:text}`key```), its sentence cites
(``{cite:p}`key```), its paragraph names a guard (``% guard: name`` after the paragraph of a ``.md``
page, ``<!-- guard: name -->`` at the end of a notebook's Markdown cell, ``:guard: name`` in the
options of a figure's code cell for its caption), or it is a reviewed exception
(``tests/claims_exceptions.yml``). A guard is a comment ``# guard: name`` directly above the
assert(s) that hold the verdict, in a hidden code cell (``remove-cell``; ``remove-input`` in a
chapter) of the same page. Questions, headings, code, URLs and role contents are not claims.

Run ``python tests/claimcheck.py [PAGE ...]`` to list every unbacked claim (and guard problem).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat
import yaml

REPO = Path(__file__).resolve().parent.parent
EXCEPTIONS = Path(__file__).with_name("claims_exceptions.yml")
PAGES = sorted((REPO / "book").rglob("*.md")) + sorted((REPO / "book" / "labs").glob("*.ipynb"))

# --- typed figures (the original rule) ---------------------------------------------------------

NUMBER = r"(?<![\w.])\d(?:[\d,]*\d)?(?:\.\d+)?"
PERCENT = re.compile(NUMBER + r"\s?(?:\\?%|percent\b)")
# "4×", "4x", "4\times" is a ratio unless another factor follows ("2 × 8 GPUs", "2 \times 2",
# "6.1 \times 10^{-5}", "int8 × int8", "4 × d"): then it is a product.
_FACTOR = r"[\d\\{(]|[A-Za-z](?![a-z])|[A-Za-z]+\d"  # what makes the sign a product
RATIO = re.compile(
    NUMBER + rf"(?:\s?(?:×|x\b)(?!\s*(?:\$|{_FACTOR}))|\s?\\times\b(?!\s*(?:{_FACTOR})))"
)
_COMPARATIVE = (
    r"faster|slower|more|less|fewer|larger|smaller|longer|shorter|higher|lower|bigger|cheaper|"
    r"quicker|greater|wider|narrower|heavier|lighter"
)
TIMES = re.compile(NUMBER + rf"\s+times\s+(?:as\b|{_COMPARATIVE})")

# --- verbal verdicts ---------------------------------------------------------------------------

_MULT = (
    r"(?:(?<![\w.])\d[\d,.]*|\$[^$]{1,40}\$|\b(?:two|three|four|five|six|seven|eight|nine|ten|twenty"
    r"|a hundred|hundreds? of|thousands? of|many|several|a few))"
)
#: Verdicts that compare or quantify behaviour by themselves: a claim wherever they stand.
STRONG = {
    "speed comparison": r"\b(?:faster|slower|quicker|speed-?ups?|slowdowns?"
    r"|slow(?:s|ed)? (?:it |them )?down)\b",
    # "the same FLOPs/time/..." compares costs; "for the same 150 steps" is a design condition
    "equality": r"(?<!\bat )(?<!\bfor )(?<!\bon )(?<!\bfrom )(?<!\bin )(?<!\bto )(?<!\bof )"
    r"\bthe same (?:\w+ )?(?:FLOPs?|FLOP/s|time|speed|throughput|latency|bandwidth|memory|bytes"
    r"|traffic|cost|bubble|error|perplexity|accuracy|quality)\b"
    r"|\b(?:costs?|takes?) (?:about |roughly |nearly |exactly |almost )?the same"
    r"(?= as\b| time\b| FLOPs?\b| for\b|[.,;:])",
    "ranking": r"\b(?:beats?|beating|beaten|outperform(?:s|ed)?|wins|won|loses to|lost to"
    r"|(?:stays?|remains?|keeps?) (?:well )?ahead|weakest|strongest|slowest|cheapest"
    r"|most expensive|(?<!index )(?<!varies )fastest(?! dimension| index| varying| -varying))\b",
    "multiple": rf"{_MULT}\s+times\s+(?:as\b|the\b|{_COMPARATIVE})"
    r"|\b(?:twice|half|thrice) as (?!(?:one|a|an|the)\b)"
    r"|\borders? of magnitude\b|\b\w+-fold\b|\bseveral fold\b|\bwithin a factor\b",
    "saturation": r"\b(?:saturat(?:e|es|ed|ing|ion)|knees?|plateau(?:s|ed)"
    r"|(?:curve|line|rate|throughput) (?:then )?flattens)\b"
    r"|\b(?:near|on|at|under|below|above|close to|onto|reaches|reach) the (?:\w+ ){0,3}roofs?\b",
    "cost verdict": r"\b(?:at no (?:extra |additional )?(?:cost|traffic|memory)|for free"
    r"|costs? nothing|no extra (?:cost|traffic|memory|time|bytes|work|messages|communication)"
    r"|dominat(?:e|es|ed|ing))\b",
}
#: Verdicts that are claims when the sentence is about a run (see :data:`RUN_MARKERS`).
QUALIFIED = {
    "equality": r"\b(?:the same as|(?:is|are|was|were|be|stays?|remains?|gives?)\s+(?:exactly |nearly "
    r"|almost |about |roughly |essentially |much )?the same|identical(?:ly)?|equal(?:ly|s)?"
    r"|unchanged|matches|ties with|tied with|as (?:fast|slow|large|small|much|many|good|accurate"
    r"|well|cheap|long|short|often) as)\b",
    "quantifier": r"\b(?:(?<!at )most(?:ly)?|almost(?: all| every| no| always| never)?|nearly(?: all)?"
    r"|never|always|rarely|hardly|barely|negligibl[ey]|every one|none of)\b",
    "multiple": r"\b(?:twice|half|halves|halved|doubles|doubled|triples?|tripled"
    r"|quadruples?|a factor of)\b",
    "ranking": r"\b(?:best|worst|better|worse|cheaper|costlier|pricier|clear(?:ly)? (?:gain|win)s?"
    r"|gains? little|little gain|helps? little)\b",
    "saturation": r"\b(?:fills|filled|bottleneck(?:s|ed)?)\b",
    "change": r"\b(?:grows?|shrinks?|drops?|falls?|rises?)\s+(?:by\s+)?(?:a lot|little|sharply|"
    r"steeply|slightly|dramatically)\b",
}
VERDICTS = {f"{k}": re.compile(v, re.I) for k, v in STRONG.items()} | {
    f"{k} (run)": re.compile(v, re.I) for k, v in QUALIFIED.items()
}
_STRONG_KEYS = set(STRONG)
#: What a PASS line may not say unless a check of its cell describes it: every strong verdict and
#: the qualified multiples and rankings ("matches the reference" is what ``check.close`` asserts).
PASS_VERDICTS = {k: v for k, v in VERDICTS.items() if k in _STRONG_KEYS} | {
    k: VERDICTS[k] for k in ("multiple (run)", "ranking (run)")
}
#: What makes a sentence about the page's run: deictic references to an output, the machine, the
#: measurement; a lab's prediction ("expect", "look for", "you will see").
RUN_MARKERS = re.compile(
    r"\b(?:here|in (?:this|our|the) (?:run|runs|lab|page|chapter's run)|this (?:run|machine|CPU|"
    r"laptop|load|trace|table|figure|plot|histogram|output|setting|configuration|experiment)|"
    r"on (?:this|our|a busy|the build) (?:machine|CPU|laptop|cores?)|measured|measures?|measuring|"
    r"the (?:\w+ )?(?:table|figure|plot|output|outputs|curves?|histogram|trace|timings?|counts?|"
    r"numbers|measurements?|results|run|runs|timeline|panel|bars?) (?:above|below|shows?|show|"
    r"tell|tells|say|says|gives?|give)|(?:above|below)(?: it)?[,.;:)]|"
    r"we (?:see|saw|find|found|get|got|observe|measure|measured|trained|ran)|(?:you|you'll) "
    r"(?:will )?(?:see|find|notice|get|observe)|expect(?:ed)?|look for|in practice here|"
    r"the tiny (?:GPT|model)|our (?:run|CPU|machine|model|tiny)|GLUE)\b",
    re.I,
)
CITATION = re.compile(r"\{cite(?::\w+)?\}")
# Roles whose content is a name, not prose: {glue:text}`key`, {cite:p}`key`, {numref}`fig-1`, ...
ROLE = re.compile(r"\{([\w:-]+)\}`[^`]*`")
ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|et al|vs|cf|approx|Fig|Eq|Sec|resp)\.")
POINTER = re.compile(r"^\s*(?:%\s*guard:\s*(?P<md>.*?)|<!--\s*guard:\s*(?P<html>.*?)\s*-->)\s*$")
GUARD = re.compile(r"^\s*#\s*guards?\s*:\s*(?P<rest>.*?)\s*$", re.I)  # "Guards:" too, to be named
GUARD_NAME = re.compile(r"^[a-z0-9]+(?:[a-z0-9.]*[a-z0-9])?(?:-[a-z0-9.]+)+$")
CLAUSE = re.compile(r";\s|:\s|\s[—–]\s|\s--\s|\s—|—\s")


@dataclass(frozen=True)
class Sentence:
    page: str  # path relative to the repository
    cell: int  # index of the cell in the page's notebook form
    text: str  # the sentence with runs of white space collapsed
    guards: tuple[str, ...] = ()  # the guards its paragraph (or cell, or figure) points at
    about_run: bool = False  # its paragraph glues a number, or it is in a lab
    caption: bool = False


@dataclass(frozen=True)
class Guard:
    page: str
    cell: int
    name: str
    has_assert: bool
    hidden: bool


@dataclass
class Page:
    path: Path
    name: str
    is_lab: bool
    has_runs: bool
    sentences: list[Sentence] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # malformed pointers and guards


def _page_name(path: Path) -> str:
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name


def _notebook(path: Path):
    return jupytext.read(path) if path.suffix == ".md" else nbformat.read(path, as_version=4)


def _prose(source: str) -> str:
    """The Markdown with code, comments, URLs and role contents replaced by neutral words."""
    text = re.sub(r"^(```|~~~).*?^\1\s*$", "\n\n", source, flags=re.S | re.M)  # fenced code
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"^%.*$", "", text, flags=re.M)  # MyST comments (guard pointers included)
    text = re.sub(r"^:{3,}.*$", "\n\n", text, flags=re.M)  # colon-fence directive lines
    text = ROLE.sub(
        lambda m: "CITE" if m.group(1).startswith("cite") else "GLUE"
        if m.group(1).startswith("glue") else "ROLE",
        text,
    )  # fmt: skip
    text = re.sub(r"`[^`\n]*`", "CODE", text)
    text = re.sub(r"\]\([^)\s]*\)", "]", text)  # link targets
    return text


def _split(text: str) -> list[str]:
    """Sentences of prose text (already through :func:`_prose`), headings and table rows kept."""
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
        if parts and parts[-1].strip():
            table_cited = parts[-1].rstrip().endswith(":") and "CITE" in parts[-1]
    return [" ".join(s.split()) for s in out if s.strip()]


def _sentences_of(source: str) -> list[str]:
    return _split(_prose(source))


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def paragraphs(source: str, notebook_cell: bool = False) -> list[tuple[str, tuple[str, ...]]]:
    """``[(paragraph, guard names), ...]`` of a Markdown cell.

    A pointer line covers the paragraph it ends (or, standing alone, the paragraph before it); in
    a notebook's Markdown cell a pointer covers the whole cell.
    """
    source = re.sub(r"^(```|~~~).*?^\1\s*$", "\n\n", source, flags=re.S | re.M)
    raw = re.split(r"\n[ \t]*\n", source)
    out: list[list] = []
    everywhere: list[str] = []  # every pointer of the cell
    for block in raw:
        lines, names = [], []
        for line in block.splitlines():
            m = POINTER.match(line)
            if m:
                names += _names(m.group("md") if m.group("md") is not None else m.group("html"))
            else:
                lines.append(line)
        everywhere += names
        text = "\n".join(lines)
        if text.strip():
            out.append([text, names])
        elif names and out:
            out[-1][1] += names
    if notebook_cell:
        return [(t, tuple(dict.fromkeys(everywhere))) for t, _ in out]
    return [(t, tuple(dict.fromkeys(n))) for t, n in out]


def _hidden(cell, is_lab: bool) -> bool:
    tags = set(cell.metadata.get("tags", []))
    return "remove-cell" in tags or (not is_lab and "remove-input" in tags)


def _guards_of(page: Page, index: int, cell) -> None:
    lines = cell.source.splitlines()
    try:
        asserts = {n.lineno for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Assert)}
    except SyntaxError:  # IPython syntax: fall back to the lines that start with assert
        asserts = {i for i, line in enumerate(lines, 1) if re.match(r"\s*assert\b", line)}
    for i, line in enumerate(lines):
        m = GUARD.match(line)
        if not m:
            continue
        name = m.group("rest")
        if not GUARD_NAME.match(name):
            page.problems.append(
                f"{page.name} (cell {index}): write a guard as '# guard: <name>' (a lowercase "
                f"hyphenated name such as ch21-magnitude-weakest, alone on the line), got {line!r}"
            )
            continue
        block = []  # the guard's lines: up to the next blank line or the next guard
        for j in range(i + 1, len(lines)):
            if not lines[j].strip() or GUARD.match(lines[j]):
                break
            block.append(j + 1)
        page.guards.append(
            Guard(page.name, index, name, bool(asserts & set(block)), _hidden(cell, page.is_lab))
        )


def read_page(path: Path) -> Page:
    """The page's sentences (with their guard pointers) and its guards."""
    nb = _notebook(path)
    is_lab = path.suffix == ".ipynb"
    # a page with runs: a notebook with code cells, or a MyST page with {code-cell}s (a plain
    # Markdown page's fenced examples are not executed)
    runs = any(c.cell_type == "code" for c in nb.cells) and (
        is_lab or "{code-cell}" in path.read_text(encoding="utf-8")
    )
    page = Page(path, _page_name(path), is_lab, runs)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            _guards_of(page, index, cell)
            caption = cell.metadata.get("mystnb", {}).get("figure", {}).get("caption")
            if caption:
                names = cell.metadata.get("guard", ())
                names = tuple(_names(names) if isinstance(names, str) else names)
                for text in _sentences_of(caption):
                    page.sentences.append(
                        Sentence(page.name, index, text, names, is_lab, caption=True)
                    )
            continue
        if cell.cell_type != "markdown":
            continue
        table_cited = False
        for para, names in paragraphs(cell.source, notebook_cell=is_lab):
            prose = _prose(para)
            if table_cited and prose.lstrip().startswith("|"):
                prose = re.sub(r"^(\s*\|.*)$", r"\1 CITE", prose, flags=re.M)
            about = "GLUE" in prose
            for text in _split(prose):
                page.sentences.append(Sentence(page.name, index, text, names, about))
            last = _split(prose)[-1:] if prose.strip() else []
            if last:
                table_cited = last[0].rstrip().endswith(":") and "CITE" in last[0]
    return page


def sentences(path: Path) -> list[Sentence]:
    return read_page(path).sentences


# --- what a sentence claims --------------------------------------------------------------------


def typed(text: str) -> bool:
    """True if the text states a typed percentage or ratio."""
    return any(p.search(text) for p in (PERCENT, RATIO, TIMES))


def clauses(text: str) -> list[str]:
    """The clauses of a sentence: split at ``;``, ``:`` and dashes; a parenthesis is a clause."""
    if text.lstrip().startswith("|"):
        return [text]  # a table row is one statement, backed by a citation anywhere in it
    out = []
    for clause in CLAUSE.split(text):
        inner = re.findall(r"\([^()]*\)", clause)
        out += [re.sub(r"\([^()]*\)", " ", clause), *inner]
    return out


def verdicts(text: str, about_run: bool = False) -> list[str]:
    """The verbal verdicts of a sentence that no glue in their own clause backs: ``["kind: words"]``.

    A qualified verdict ("the same", "mostly", ...) counts only if the sentence is about a run
    (``about_run``, or a run marker in the sentence).
    """
    if text.rstrip().endswith("?") or text.lstrip().startswith("#"):
        return []  # a question or a heading claims nothing
    run = about_run or bool(RUN_MARKERS.search(text))
    found = []
    for clause in clauses(text):
        if "GLUE" in clause or "CITE" in clause:
            continue  # the clause states the measured number itself, or its source
        for kind, pattern in VERDICTS.items():
            if kind not in _STRONG_KEYS and not run:
                continue
            found += [f"{kind}: {m.group(0)}" for m in pattern.finditer(clause)]
    return found


def unbacked(sentence: str, about_run: bool = False, guards: tuple[str, ...] = ()) -> bool:
    """True if the sentence states a typed figure or a verbal verdict with nothing backing it."""
    if guards:
        return False
    return ("CITE" not in sentence and typed(sentence)) or bool(verdicts(sentence, about_run))


def why(s: Sentence) -> str:
    """What makes the sentence a claim, for messages."""
    parts = ["typed figure"] if typed(s.text) and "CITE" not in s.text else []
    return "; ".join(parts + verdicts(s.text, s.about_run))


def load_exceptions() -> list[dict]:
    entries = yaml.safe_load(EXCEPTIONS.read_text(encoding="utf-8")) or []
    for entry in entries:
        missing = {"page", "text", "reason"} - entry.keys()
        assert not missing, f"{EXCEPTIONS.name}: entry {entry} lacks {sorted(missing)}"
        assert entry["reason"].strip(), f"{EXCEPTIONS.name}: entry {entry} gives no reason"
    return entries


def excused(s: Sentence, entries: list[dict]) -> bool:
    return any(e["page"] == s.page and e["text"] in s.text for e in entries)


def claim_findings(page: Page) -> list[Sentence]:
    """The page's unbacked claims (typed figures everywhere; verbal verdicts on pages with runs)."""
    out = []
    for s in page.sentences:
        if s.guards:
            continue
        if ("CITE" not in s.text and typed(s.text)) or (
            page.has_runs and verdicts(s.text, s.about_run)
        ):
            out.append(s)
    return out


def findings(pages: list[Path] = PAGES) -> list[Sentence]:
    return [s for path in pages for s in claim_findings(read_page(path))]


def guard_problems(pages: list[Page]) -> list[str]:
    """Malformed guards, guards without an assert or not hidden, duplicate names, dead pointers."""
    problems = [p for page in pages for p in page.problems]
    seen: dict[str, Guard] = {}
    for page in pages:
        for g in page.guards:
            where = f"{g.page} (cell {g.cell})"
            if g.name in seen:
                first = seen[g.name]
                problems.append(
                    f"{where}: guard {g.name!r} is already defined in {first.page} (cell "
                    f"{first.cell}); guard names are unique in the book"
                )
            seen.setdefault(g.name, g)
            if not g.has_assert:
                problems.append(
                    f"{where}: guard {g.name!r} has no assert directly below it (the lines up to "
                    "the next blank line must hold the assert(s) of the verdict)"
                )
            if not g.hidden:
                tag = "remove-cell" if page.is_lab else "remove-cell (or remove-input)"
                problems.append(f"{where}: guard {g.name!r} is in a visible cell; tag it {tag}")
        own = {g.name for g in page.guards}
        for s in page.sentences:
            for name in s.guards:
                if not GUARD_NAME.match(name):
                    problems.append(f"{s.page} (cell {s.cell}): bad guard name {name!r} in pointer")
                elif name not in own:
                    problems.append(
                        f"{s.page} (cell {s.cell}): points at guard {name!r}, which no hidden cell "
                        "of this page defines ('# guard: <name>' above its asserts)"
                    )
    return sorted(dict.fromkeys(problems))


def lab_glue(page: Page) -> list[str]:
    """Labs cannot glue: a student notebook shows ``{glue}`` roles as raw text."""
    if not page.is_lab:
        return []
    nb = _notebook(page.path)
    return [
        f"{page.name} (cell {i}): glue in a lab (students see raw text); say what to look for"
        for i, c in enumerate(nb.cells)
        if c.cell_type == "markdown" and "{glue" in c.source
    ]


def pass_line_problems(path: Path) -> list[str]:
    """PASS lines printed by a lab's check cells that claim more than the cell's checks assert.

    A verdict phrase in a ``print("PASS...")`` string (``several-fold``, ``faster``, ``the same``)
    must appear in the description (``what``) of one of the cell's assertions: the PASS line says
    only what was checked.
    """
    if path.suffix != ".ipynb":
        return []
    nb = _notebook(path)
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not any(
            t.startswith("exercise-") for t in cell.metadata.get("tags", [])
        ):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        passes, described = [], []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                texts = [_literal(a) for a in [*node.args, *(k.value for k in node.keywords)]]
                texts = [t for t in texts if t]
                if getattr(node.func, "id", None) == "print":
                    passes += [t for t in texts if t.lstrip().startswith("PASS")]
                else:
                    described += texts
        where = " ".join(described).lower()
        for line in passes:
            for kind, pattern in PASS_VERDICTS.items():
                for m in pattern.finditer(line):
                    if m.group(0).lower() not in where:
                        out.append(
                            f"{_page_name(path)} (cell {i}): the PASS line {line!r} says "
                            f"{m.group(0)!r} ({kind.removesuffix(' (run)')}), which no check of "
                            "the cell describes; say only what the checks assert"
                        )
    return out


def _literal(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal(v) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return ""


def main(argv: list[str]) -> int:
    paths = [Path(p).resolve() for p in argv] or PAGES
    pages = [read_page(p) for p in paths]
    entries = load_exceptions()
    bad = 0
    for page in pages:
        for s in claim_findings(page):
            mark = "excepted" if excused(s, entries) else "UNBACKED"
            bad += mark == "UNBACKED"
            print(f"{mark}  {s.page} (cell {s.cell}) [{why(s)}]: {s.text}")
        for problem in lab_glue(page) + pass_line_problems(page.path):
            bad += 1
            print(f"PROBLEM  {problem}")
    book = [read_page(p) for p in PAGES] if argv else pages
    names = {p.name for p in pages}
    for problem in guard_problems(book):
        if problem.split(" ", 1)[0] in names:
            bad += 1
            print(f"GUARD    {problem}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
