"""The stray-output scanner of the executed pages (``tests/page_outputs.py``) and its rules.

The scan of the whole book runs in ``tests/test_book.py`` on the build it already makes; here each
rule is shown to catch what it is for, on outputs seen on the book's pages, and to leave ordinary
output alone.
"""

from __future__ import annotations

import nbformat
import pytest
from page_outputs import problems_of

new_output = nbformat.v4.new_output


def page(*outputs, tags=()):
    cell = nbformat.v4.new_code_cell("x", outputs=list(outputs))
    if tags:
        cell.metadata["tags"] = list(tags)
    return nbformat.v4.new_notebook(cells=[cell])


def text(plain: str):
    return new_output("execute_result", data={"text/plain": plain}, execution_count=1)


@pytest.mark.parametrize(
    ("output", "what"),
    [
        (text("<torch._C.Generator at 0x7f1f97218330>"), "object repr"),
        (
            new_output(
                "stream",
                name="stderr",
                text="/tmp/ipykernel_4242/1234.py:67: UserWarning: Converting a tensor with "
                "requires_grad=True to a scalar may lead to unexpected behavior.\n",
            ),
            "stderr",
        ),
        (new_output("stream", name="stdout", text="DeprecationWarning: old API\n"), "a warning"),
        (new_output("stream", name="stdout", text="saved to /root/run/model.pt\n"), "path"),
        (
            new_output("stream", name="stdout", text="time to first token 41 ms, full response "
                       "61 ms (1x longer)\n"),
            "nonsense",
        ),
        (new_output("stream", name="stdout", text="speed-up 0x\n"), "nonsense"),
        (new_output("error", ename="ValueError", evalue="bad", traceback=["Traceback"]), "error"),
    ],
)  # fmt: skip
def test_each_kind_of_stray_output_is_caught(output, what):
    found = problems_of(page(output), "page")
    assert any(what in p for p in found), found


@pytest.mark.parametrize(
    "plain",
    [
        "time to first token 41 ms, full response 61 ms (1.5x longer)",
        "2 × 8 GPUs; 0 × 3 = 0; 10x fewer bytes; address 0x1f",
        "GET /health/ready 200",
        "PASS exercise 1 — 3 checks: a; b; c",
    ],
)
def test_ordinary_output_passes(plain):
    assert problems_of(page(text(plain)), "page") == []


def test_only_what_renders_is_read():
    """A pandas Styler's text/plain repr sits beside the text/html table the page shows."""
    styled = new_output(
        "execute_result",
        data={"text/plain": "<pandas.io.formats.style.Styler at 0x7f031ff83a50>",
              "text/html": "<table><tr><td>1</td></tr></table>"},
        execution_count=1,
    )  # fmt: skip
    assert problems_of(page(styled), "p") == []
    plain = new_output(
        "execute_result",
        data={"text/plain": "<object at 0x7f00aa00bb00>", "image/png": "iVBOR"},
        execution_count=1,
    )
    assert problems_of(page(plain), "p") == []  # the image renders, not the repr


def test_a_removed_cell_does_not_render_but_a_glued_value_does():
    assert problems_of(page(text("<object at 0x7f00aa00bb00>"), tags=["remove-cell"]), "p") == []
    glued = text("1x longer")
    glued.metadata = {"scrapbook": {"name": "ratio", "mime_prefix": ""}}
    assert problems_of(page(glued, tags=["remove-cell"]), "p")
