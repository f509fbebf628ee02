"""The book builds with zero warnings, and renders math and widgets offline in headless Chromium.

The build runs first (module fixture): ``tools/build-book.sh --skip-setup`` — the README's build
command minus the set-up that ``tools/test.sh`` has already done.  Then Chromium, with name
resolution and the network disabled, loads pages from disk and we read the DOM it produced.
A screenshot of Chapter 1 (with its memory calculator) is kept in ``_build/artifacts/``.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import page_outputs
import pytest
from bs4 import BeautifulSoup

from conftest import CHROMIUM, IN_CI, LABS, REPO
from labs.course.notebooks import parse_lab

HTML = REPO / "_build" / "html"
REMOTE = re.compile(r"^(https?:)?//")
SPHINX_WARNING = re.compile(r"(^|: )(WARNING|ERROR|CRITICAL|SEVERE): ")
ARTIFACTS = REPO / "_build" / "artifacts"
OFFLINE_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>", "--run-all-compositor-stages-before-draw",
    "--hide-scrollbars", "--virtual-time-budget=15000",
]  # fmt: skip


# Everything here shares one book build, made once per worker (session scope: pytest would tear a
# module fixture down if a worker ran another module's tests in between); tools/test.sh runs each
# test module whole on one worker.
@pytest.fixture(scope="session")
def built_book():
    def build() -> subprocess.CompletedProcess:
        # One build at a time in this checkout: two pytest workers (or two test runs) building
        # into the same _build/ corrupt each other's caches and search index.
        lock_path = REPO / "_build" / ".book-build.lock"
        lock_path.parent.mkdir(exist_ok=True)
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return subprocess.run(
                ["bash", "tools/build-book.sh", "--skip-setup"],
                cwd=REPO, capture_output=True, text=True, timeout=1800,
            )  # fmt: skip

    result = build()
    log = result.stdout + result.stderr
    if result.returncode:
        # Seen on fresh clones under load: jupyter-cache failing to store an executed page, the
        # search index vanishing before its rename. One more build reuses the cache; a real
        # failure (a raising cell, a warning) fails it again.
        result = build()
        log = result.stdout + result.stderr
    # Sphinx's own warnings ("file:line: WARNING: ..."); not the kernels' "[IPKernelApp] WARNING |".
    warnings = [line for line in log.splitlines() if SPHINX_WARNING.search(line)]
    assert result.returncode == 0, "book build failed:\n" + "\n".join(warnings[-40:]) + log[-3000:]
    assert not warnings, "the build must have zero warnings:\n" + "\n".join(warnings)
    return HTML


def test_no_page_shows_stray_output(built_book):
    """No rendered output shows an object repr, stderr, a warning, a traceback, a machine path
    or a ratio rounded into nonsense (tests/page_outputs.py; its rules: tests/test_page_outputs.py)."""
    pages = page_outputs.executed_pages()
    assert len(pages) >= 44, f"expected every chapter and lab executed, found {len(pages)}"
    found = page_outputs.problems(pages)
    assert not found, "stray output on the executed pages:\n" + "\n".join(found)


def chromium(*args: str) -> str:
    if CHROMIUM is None:
        if IN_CI:
            pytest.fail("chromium is not installed; tools/test.sh installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed (tools/test.sh installs it when root)")
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [CHROMIUM, *OFFLINE_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_no_page_loads_anything_from_a_cdn(built_book):
    offenders = []
    for page in built_book.rglob("*.html"):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        urls = [t.get("src", "") for t in soup.find_all("script")]
        urls += [t.get("href", "") for t in soup.find_all("link", rel="stylesheet")]
        offenders += [f"{page.relative_to(built_book)}: {u}" for u in urls if REMOTE.match(u)]
    assert not offenders, "pages load remote assets:\n" + "\n".join(offenders[:20])
    assert (built_book / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    assert (built_book / "_static" / "widgets" / "embed-amd.js").is_file()


def test_figures_are_in_the_pages(built_book):
    """A kernel with a non-inline matplotlib backend (e.g. MPLBACKEND=Agg) silently drops plots."""
    page = built_book / "book" / "chapters" / "ch02-preliminaries.html"
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    images = soup.select("div.cell_output img")
    assert images, f"{page.name}: the achieved-FLOP/s figure is missing from the page"


def test_math_is_typeset_and_widgets_render_offline(built_book):
    page = built_book / "book" / "chapters" / "ch01-introduction.html"
    dom = chromium("--dump-dom", page.as_uri())
    assert len(re.findall(r"<mjx-container", dom)) >= 5, "MathJax did not typeset the page"
    assert "widget-slider" in dom, "the memory calculator's slider did not render"
    assert "widget-dropdown" in dom, "the memory calculator's drop-down lists did not render"
    assert "GPUs needed" in dom, "the calculator's output did not render"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "ch01-introduction.png"  # the whole page, calculator included
    chromium("--window-size=1280,8000", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 20_000, "screenshot missing or blank"


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_solutions_are_collapsed_and_checks_visible(built_book, lab):
    page = built_book / lab.relative_to(REPO).with_suffix(".html")
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    info = parse_lab(lab)
    hidden = soup.select("div.cell.tag_hide-input")
    n_solution_cells = len({i for ex in info.exercises.values() for i in ex.solution_cells})
    assert len(hidden) >= n_solution_cells
    for cell in hidden:
        details = cell.find("details")
        assert details is not None and "hide" in details.get("class", [])
    assert "Show solution" in page.read_text(encoding="utf-8")
    for num in info.exercises:
        checks = soup.select(f"div.cell.tag_exercise-{num}")
        assert checks, f"{page.name}: no check cell of exercise {num} in the page"
        assert all(c.find("details") is None for c in checks), "check cells must stay visible"


def test_a_failing_cell_fails_the_build(tmp_path):
    """The build configuration turns a raising cell into a build failure (and a good one passes)."""

    def build(cell_source: str) -> subprocess.CompletedProcess:
        book = tmp_path / ("bad" if "raise" in cell_source else "good")
        book.mkdir()
        shutil.copy(REPO / "_config.yml", book / "_config.yml")
        for name in ("vendor", "book"):
            (book / name).mkdir()
        (book / "vendor" / ".keep").write_text("")
        (book / "book" / "assets").mkdir()
        (book / "book" / "assets" / "book.css").write_text("")
        (book / "book" / "assets" / "book.js").write_text("")
        shutil.copy(REPO / "book" / "references.bib", book / "book" / "references.bib")
        shutil.copytree(REPO / "book" / "_ext", book / "book" / "_ext")
        (book / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
        (book / "book" / "page.md").write_text(
            textwrap.dedent(f"""\
            ---
            jupytext:
              text_representation: {{extension: .md, format_name: myst}}
            kernelspec: {{display_name: Python 3, language: python, name: python3}}
            ---
            # A page

            ```{{code-cell}} ipython3
            {cell_source}
            ```
            """)
        )
        jb = Path(REPO / ".venv" / "bin" / "jupyter-book")
        return subprocess.run(
            [str(jb), "build", str(book), "--builder", "html", "-W", "-n", "--keep-going"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip

    good = build("print(6 * 7)")
    assert good.returncode == 0, good.stdout[-3000:]
    bad = build("raise RuntimeError('boom in a cell')")
    assert bad.returncode != 0
    assert "boom in a cell" in bad.stdout + bad.stderr


# --- The book as its readers see it: a real browser (Playwright driving Debian's chromium), a
# phone (390 px) and a desktop (1280 px), every request outside the build folder refused.


def _pages(html: Path) -> list[Path]:
    return sorted(
        p for p in html.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts
    )


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        if IN_CI:
            pytest.fail("chromium is not installed; tools/test.sh installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed (tools/test.sh installs it when root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def _open(browser, url: str, width: int, problems: list[str] | None = None):
    """A page at ``width`` px; console errors, page errors and refused requests go to problems."""
    page = browser.new_page(viewport={"width": width, "height": 800})
    page.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())  # offline, as a reader
    if problems is not None:
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url}"))
    page.goto(url)
    page.wait_for_timeout(600)
    return page


SIDEBAR = """() => [...document.querySelectorAll('.bd-sidebar-primary')].some((s) => {
  const r = s.getBoundingClientRect(); const cs = getComputedStyle(s);
  return cs.visibility === 'visible' && cs.display !== 'none' && r.right > 50 && r.left >= -1; })"""
# (on a phone the theme moves the sidebar, classes and all, into a <dialog> it opens as a drawer)


@pytest.mark.parametrize("width", [390, 1280])
def test_the_sidebar_navigation_is_reachable(built_book, browser, width):
    page = _open(
        browser, (built_book / "book" / "chapters" / "ch02-preliminaries.html").as_uri(), width
    )
    toggle = [t for t in page.query_selector_all("button.primary-toggle") if t.is_visible()]
    assert toggle, f"{width} px: no visible button opens the navigation"
    shown = page.evaluate(SIDEBAR)
    assert shown == (width >= 992), (
        f"{width} px: sidebar initially {'shown' if shown else 'hidden'}"
    )
    toggle[0].click()
    page.wait_for_timeout(500)
    assert page.evaluate(SIDEBAR) != shown, (
        f"{width} px: the toggle does not open/close the sidebar"
    )
    if not shown:  # on a phone the opened drawer must lead somewhere
        link = page.query_selector(".bd-sidebar-primary a[href*='ch12-collective']")
        assert link is not None and link.is_visible(), "the opened drawer shows no chapter links"
    page.close()


def test_no_console_errors_and_nothing_wider_than_a_phone(built_book, browser):
    bad = []
    for path in _pages(built_book):
        problems: list[str] = []
        page = _open(browser, path.as_uri(), 390, problems)
        width = page.evaluate("document.documentElement.scrollWidth")
        # elements sticking out of the page that no scroll box contains
        loose = page.evaluate("""() => { const out = [];
          for (const e of document.querySelectorAll('article *')) {
            const r = e.getBoundingClientRect(); if (r.right <= 392 || r.width === 0) continue;
            let p = e.parentElement, boxed = false;
            while (p) { if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX))
              { boxed = true; break; } p = p.parentElement; }
            if (!boxed) out.push(e.tagName.toLowerCase() + '.' + String(e.className).slice(0, 40));
          } return out.slice(0, 3); }""")
        name = path.relative_to(built_book)
        if problems:
            bad.append(f"{name}: console: {problems[:3]}")
        if width > 390 or loose:
            bad.append(f"{name}: {width} px wide at a 390 px screen; outside scroll boxes: {loose}")
        page.close()
    assert not bad, "\n".join(bad)


def test_computed_tables_render_as_tables(built_book):
    raw = []
    for path in _pages(built_book):
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        for out in soup.select("div.cell_output"):
            if re.search(r"^\s*\|?\s*:?-{3,}:?\s*\|", out.get_text("\n"), re.M):
                raw.append(str(path.relative_to(built_book)))
    assert not raw, f"Markdown tables shown as raw text in: {sorted(set(raw))}"


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_launch_buttons_open_the_student_notebook(built_book, lab):
    page = built_book / lab.relative_to(REPO).with_suffix(".html")
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    links = [a.get("href", "") for a in soup.select("a") if "colab.research" in a.get("href", "")]
    assert links, f"{page.name}: no Colab launch button"
    assert all(h.endswith(f"/student/{lab.name}") for h in links), links
    assert "book/labs/" not in " ".join(
        a.get("href", "") for a in soup.select(".dropdown-launch-buttons a")
    )


def test_every_figure_is_numbered_captioned_and_described(built_book):
    bad = []
    for path in _pages(built_book):
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        for img in soup.select("div.cell_output img"):
            fig = img.find_parent("figure")
            caption = fig.find("figcaption") if fig else None
            alt = img.get("alt", "")
            where = f"{path.relative_to(built_book)}: {img.get('src', '')[-40:]}"
            if caption is None or not caption.select_one(".caption-number"):
                bad.append(f"{where}: no numbered caption")
            if (
                len(alt) < 15
                or re.search(r"\.(png|svg|jpe?g)$", alt)
                or alt.startswith(("../", "_"))
            ):
                bad.append(f"{where}: alt text {alt!r} does not describe the figure")
    assert not bad, "\n".join(bad)


def test_solution_markers_read_as_comments(built_book):
    shown = [
        str(p.relative_to(built_book))
        for p in _pages(built_book)
        if "BEGIN SOLUTION" in p.read_text(encoding="utf-8")
    ]
    assert not shown, f"solution markers visible in: {shown}"


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_each_check_prints_what_it_verified(built_book, lab):
    page = built_book / lab.relative_to(REPO).with_suffix(".html")
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    for num in parse_lab(lab).exercises:
        for cell in soup.select(f"div.cell.tag_exercise-{num}"):
            out = cell.select_one("div.cell_output")
            text = out.get_text(" ") if out else ""
            assert f"PASS exercise {num}" in text, (
                f"{page.name}: a check of exercise {num} is silent"
            )
