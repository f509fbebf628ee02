"""The book states no figure or verdict that its run, a guard or a citation does not back.

A figure the prose takes from an executed cell is glued (``{glue:text}`key```); a verdict drawn
from a measurement -- in digits or in words ("the same", "$v$ times", "mostly", "the weakest") --
points at a named guard, a hidden cell that asserts exactly it; a figure or verdict from the
literature cites in its sentence. ``tests/claimcheck.py`` reads the prose of every page (Markdown
cells and figure captions; code, inline code, URLs and role contents left out) and finds

* sentences that state a typed percentage or ratio with no glue or citation;
* on pages with runs, sentences with a verbal verdict (``claimcheck.VERDICTS``: comparisons,
  multiples, saturation, cost verdicts; equalities and quantifiers when the sentence is about a
  run) that no glue in its clause, citation, guard pointer or reviewed exception backs;
* guards that are malformed, duplicated, visible, hold no assert, or that a pointer names but the
  page lacks; glue in a lab (students' notebooks cannot render it); PASS lines of a lab's check
  cells that claim more than the cell's checks describe.

The rules are written out in ``CLAIMS-RULES.md``. Definitions, design parameters, general truths
and figures derived in the sentence itself that the vocabulary catches are listed, each with its
reason, in ``tests/claims_exceptions.yml``; an entry that no longer matches any flagged sentence
fails too, so the list stays reviewed. ``tests/claims_old_findings.yml`` holds the text of twenty
findings of the reading of 2026-11-26 as it stood at 347915e: each must be flagged.

Run ``python tests/test_claims.py [PAGE ...]`` to print every problem with its page and cell.
"""

from __future__ import annotations

import sys
from pathlib import Path

import claimcheck as C
import nbformat
import pytest
import yaml
from claimcheck import _sentences_of, unbacked, verdicts

OLD_FINDINGS = Path(__file__).with_name("claims_old_findings.yml")
FRONT = (
    "---\njupytext:\n  text_representation: {extension: .md, format_name: myst}\n"
    "kernelspec: {display_name: Python 3, language: python, name: python3}\n---\n"
)


def md_page(tmp_path: Path, body: str, name: str = "page.md") -> Path:
    page = tmp_path / name
    page.write_text(FRONT + "# A page\n\n" + body, encoding="utf-8")
    return page


def nb_page(tmp_path: Path, cells: list, name: str = "lab.ipynb") -> Path:
    nb = nbformat.v4.new_notebook(cells=cells)
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def code(source: str, tags=("remove-cell",), **metadata) -> str:
    options = f":tags: [{', '.join(tags)}]\n" if tags else ""
    for key, value in metadata.items():
        options += f":{key}: {value}\n"
    return f"```{{code-cell}} ipython3\n{options}{source}\n```\n\n"


def flagged(path: Path) -> list[str]:
    return [s.text for s in C.claim_findings(C.read_page(path))]


# --- typed figures -----------------------------------------------------------------------------


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
    page = md_page(
        tmp_path,
        "```{code-cell} ipython3\n:mystnb:\n:  figure:\n"
        ":    caption: Pruning half the weights costs 3 % of the accuracy.\n"
        ":    name: fig-x\nprint(1)\n```\n",
    )
    assert flagged(page) == ["Pruning half the weights costs 3 % of the accuracy."]


def test_a_citation_backs_only_its_own_sentence():
    found = [s for s in _sentences_of("A survey {cite:p}`x` says so. Then 40 % got better.")]
    assert [unbacked(s) for s in found] == [False, True]


# --- verbal verdicts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Both cost the same FLOPs.",
        "The fused kernel runs faster than the two separate ones.",
        "Magnitude pruning is the weakest of the three.",
        "Wanda beats magnitude at 2:4.",
        "Interleaving costs $v$ times the point-to-point traffic.",
        "Each micro-batch crosses $v$ times as many stage boundaries.",
        "The error drops by an order of magnitude.",
        "The decomposition cuts the error several-fold.",
        "A good prediction is within a factor of two.",
        "Elementwise operations land near the sloped memory roof.",
        "Both engines were past their knee.",
        "The engine saturates at 16 requests.",
        "Sequence parallelism splits them at no extra traffic.",
        "In a large model the blocks dominate.",
        "Global pruning wins in many convolutional networks.",
        "The dense model given the same training stays ahead.",
        "Sending half as many messages helps.",
    ],
)
def test_a_verdict_is_a_claim_wherever_it_stands(text):
    assert verdicts(_sentences_of(text)[0]), text


@pytest.mark.parametrize(
    "text",
    [
        "In this run the all-reduces are mostly tensor-parallel.",
        "Under this load most batches fill before the timer fires.",
        "The table above shows that the weights are unchanged.",
        "Expect a clear gain for the memory-bound chain.",
        "We measured twice the bytes of the plain step.",
        "Here the two engines are the same as each other.",
    ],
)
def test_an_equality_or_quantifier_is_a_claim_when_the_sentence_is_about_a_run(text):
    assert verdicts(_sentences_of(text)[0]), text


@pytest.mark.parametrize(
    "text",
    [
        "The weights are unchanged.",  # a design statement: nothing says it was measured
        "Most of this chapter is what serving libraries do for you.",
        "The optimizer can never revive a pruned weight.",
        "Every rank builds the same model from the same seed.",
        "We train for the same 150 steps on the same batches.",
        "The SM issues the same instruction at the same time on 32 threads.",
        "Which is faster, and why?",  # a question
        "## Which algorithm wins where",  # a heading
        "It ran {glue:text}`ratio` times faster than eager PyTorch.",  # the clause glues it
        "FlashAttention runs several times faster {cite:p}`dao2022flashattention`.",
        "Run `bench --faster` to see.",  # code
        "Each rank holds at most $p$ micro-batches.",
    ],
)
def test_a_definition_a_design_statement_or_a_backed_verdict_is_not_flagged(text):
    assert not any(unbacked(s) for s in _sentences_of(text)), text


def test_a_glue_backs_only_its_own_clause():
    (s,) = _sentences_of(
        "LoRA cuts the optimizer state by a factor of {glue:text}`r`; the weights are unchanged."
    )
    assert verdicts(s, about_run=True) == ["equality (run): unchanged"]


def test_a_paragraph_that_glues_a_number_is_about_a_run(tmp_path):
    page = md_page(
        tmp_path,
        code("x = 1", tags=()) + "The optimizer state shrinks by {glue:text}`r`; the weights "
        "are unchanged.\n\nThe weights are unchanged.\n",
    )
    assert flagged(page) == ["The optimizer state shrinks by GLUE; the weights are unchanged."]


def test_verbal_verdicts_count_only_on_pages_with_runs(tmp_path):
    assert flagged(md_page(tmp_path, "Ours is faster.\n", "a.md")) == []
    assert flagged(md_page(tmp_path, code("x = 1", tags=()) + "Ours is faster.\n", "b.md")) == [
        "Ours is faster."
    ]


# --- guards and pointers -----------------------------------------------------------------------


def test_a_pointer_after_a_paragraph_backs_every_sentence_of_it(tmp_path):
    page = md_page(
        tmp_path,
        code("t = 1.0\n# guard: ch99-fused-faster\nassert t < 2") + "The fused chain is faster. "
        "It wins by far.\n% guard: ch99-fused-faster\n\nThis one is slower.\n",
    )
    assert flagged(page) == ["This one is slower."]
    assert C.guard_problems([C.read_page(page)]) == []


def test_a_pointer_standing_alone_backs_the_paragraph_before_it(tmp_path):
    page = md_page(
        tmp_path,
        code("# guard: ch99-a\nassert True") + "Ours is faster.\n\n% guard: ch99-a\n",
    )
    assert flagged(page) == []


def test_a_pointer_in_a_notebook_cell_backs_the_whole_cell(tmp_path):
    lab = nb_page(
        tmp_path,
        [
            nbformat.v4.new_code_cell("x = 1"),
            nbformat.v4.new_markdown_cell(
                "Ours is faster.\n\nIt also wins.\n\n<!-- guard: lab99-faster -->"
            ),
            nbformat.v4.new_markdown_cell("And it beats the rest."),
            nbformat.v4.new_code_cell(
                "# guard: lab99-faster\nassert x == 1", metadata={"tags": ["remove-cell"]}
            ),
        ],
    )
    assert flagged(lab) == ["And it beats the rest."]
    assert C.guard_problems([C.read_page(lab)]) == []


def test_a_caption_points_at_its_guard_in_the_cell_options(tmp_path):
    page = md_page(
        tmp_path,
        code("# guard: ch99-roof\nassert True")
        + "```{code-cell} ipython3\n:guard: ch99-roof\n:mystnb:\n:  figure:\n"
        ":    caption: The copy sits on the memory roof.\n:    name: fig-x\nprint(1)\n```\n",
    )
    assert flagged(page) == []


@pytest.mark.parametrize(
    ("cells", "problem"),
    [
        (code("x = 1", tags=()) + "Faster.\n% guard: ch99-gone\n", "no hidden cell"),
        (code("# guard: ch99-a\nx = 1\n\nassert x"), "has no assert"),
        (code("# guard: ch99-a\nassert True", tags=("remove-output",)), "visible cell"),
        (code("# guard: the fused chain is faster\nassert True"), "write a guard as"),
        (code("# guard: ch99-a\nassert True\n\n# guard: ch99-a\nassert 1"), "already defined"),
    ],
)
def test_a_broken_guard_or_pointer_fails(tmp_path, cells, problem):
    problems = C.guard_problems([C.read_page(md_page(tmp_path, cells))])
    assert any(problem in p for p in problems), problems


def test_guard_names_are_unique_across_pages(tmp_path):
    pages = [md_page(tmp_path, code("# guard: ch99-a\nassert True"), n) for n in ("a.md", "b.md")]
    problems = C.guard_problems([C.read_page(p) for p in pages])
    assert any("already defined in" in p for p in problems), problems


def test_a_lab_guard_must_be_removed_from_the_page(tmp_path):
    cell = nbformat.v4.new_code_cell("# guard: lab99-a\nassert True")
    cell.metadata["tags"] = ["remove-input"]  # hidden in a chapter, but students would see it
    problems = C.guard_problems([C.read_page(nb_page(tmp_path, [cell]))])
    assert any("tag it remove-cell" in p for p in problems), problems


def test_a_lab_may_not_glue(tmp_path):
    lab = nb_page(tmp_path, [nbformat.v4.new_markdown_cell("It took {glue:text}`t` s.")])
    assert C.lab_glue(C.read_page(lab))


def test_a_pass_line_says_only_what_its_checks_describe(tmp_path):
    check = (
        'with exercise(4, "x") as check:\n'
        '    check.between(err, 0, 0.5 * naive, "the decomposition at least halves the error")\n'
        '    print("PASS: products match; the error drops several-fold")\n'
    )
    fixed = check.replace("the error drops several-fold", "the error at least halves")
    cells = [nbformat.v4.new_code_cell(s, metadata={"tags": ["exercise-4"]}) for s in (check,)]
    assert "several-fold" in " ".join(C.pass_line_problems(nb_page(tmp_path, cells, "a.ipynb")))
    cells = [nbformat.v4.new_code_cell(s, metadata={"tags": ["exercise-4"]}) for s in (fixed,)]
    assert C.pass_line_problems(nb_page(tmp_path, cells, "b.ipynb")) == []


# --- the old text of the reading's findings ----------------------------------------------------


def _old_findings() -> list[dict]:
    return yaml.safe_load(OLD_FINDINGS.read_text(encoding="utf-8"))


def test_at_least_ten_findings_of_the_reading_are_kept_as_old_text():
    entries = _old_findings()
    assert len(entries) >= 10 and all(e["flag"] in " ".join(e["source"].split()) for e in entries)


@pytest.mark.parametrize("entry", _old_findings(), ids=lambda e: e["finding"][:60])
def test_the_old_text_of_a_finding_is_flagged(tmp_path, entry):
    """Each verdict the reading found unbacked at 347915e is caught by the extended checker."""
    if entry["kind"] == "caption":
        caption = entry["source"].replace('"', '\\"')
        body = (
            f'```{{code-cell}} ipython3\n:mystnb:\n:  figure:\n:    caption: "{caption}"\n'
            ":    name: fig-x\nprint(1)\n```\n"
        )
        page = md_page(tmp_path, body)
    elif entry["page"].endswith(".ipynb"):
        page = nb_page(
            tmp_path,
            [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell(entry["source"])],
        )
    else:
        page = md_page(tmp_path, code("x = 1", tags=()) + entry["source"] + "\n")
    hits = [s for s in flagged(page) if entry["flag"] in s]
    assert hits, f"{entry['finding']}: not flagged; the checker saw {flagged(page)}"


def test_the_old_pass_line_of_lab22_is_flagged(tmp_path):
    """Reading section 1, lab22 cell 19: "the error drops several-fold" where the check asserts 2x."""
    old = (
        'with exercise(4, "LLM.int8() decomposition") as check:\n'
        "    check.between(\n        err,\n        0.0,\n"
        "        0.5 * float((naive - exact).norm() / exact.norm()),\n"
        '        "the decomposition at least halves the relative error of plain int8",\n    )\n'
        '    print("PASS: outlier columns and products match the reference; the error drops '
        'several-fold")\n'
    )
    cell = nbformat.v4.new_code_cell(old, metadata={"tags": ["exercise-4"]})
    assert C.pass_line_problems(nb_page(tmp_path, [cell]))


# --- the book ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def book() -> list[C.Page]:
    return [C.read_page(p) for p in C.PAGES]


def test_every_figure_and_verdict_is_glued_guarded_cited_or_excepted(book):
    entries = C.load_exceptions()
    bad = [s for page in book for s in C.claim_findings(page) if not C.excused(s, entries)]
    assert not bad, (
        "these sentences state a figure or a verdict that nothing backs: glue the number from the "
        "cell that computed it ({glue:text}`key`), point at a hidden guard that asserts exactly "
        "the verdict (% guard: <name> after the paragraph), cite the source in the sentence, "
        "rewrite it to state the measured ratio and its condition, or cut it (CLAIMS-RULES.md); "
        f"a definition or a general truth goes into {C.EXCEPTIONS.name} with its reason:\n"
        + "\n".join(f"  {s.page} (cell {s.cell}) [{C.why(s)}]: {s.text}" for s in bad)
    )


def test_every_exception_still_matches_a_claim(book):
    live = [s for page in book for s in C.claim_findings(page)]
    stale = [e for e in C.load_exceptions() if not any(C.excused(s, [e]) for s in live)]
    assert not stale, f"{C.EXCEPTIONS.name}: these entries match no flagged sentence any more; " + (
        "remove them:\n" + "\n".join(f"  {e['page']}: {e['text']!r}" for e in stale)
    )


def test_every_guard_is_named_hidden_asserting_and_pointed_at_correctly(book):
    problems = C.guard_problems(book)
    assert not problems, "\n".join(problems)


def test_labs_do_not_glue_and_pass_lines_say_only_what_was_checked(book):
    problems = [p for page in book for p in C.lab_glue(page) + C.pass_line_problems(page.path)]
    assert not problems, "\n".join(problems)


if __name__ == "__main__":
    sys.exit(C.main(sys.argv[1:]))
