"""Interactive widgets that keep working in the static HTML book, offline.

A widget whose callback runs in Python goes dead once the page is static HTML: there is no kernel
to call.  The widgets here are built from front-end links only: every combination of the
controls is rendered ahead of time into an HTML snippet (or an SVG figure), the snippets are
arranged in nested :class:`ipywidgets.Stack` containers, and each control is ``jslink``-ed to the
``selected_index`` of the stacks on its level.  Moving a slider in the browser then flips stacks
in JavaScript, in a running notebook and in the built book alike.

Keep the grid small (a few hundred cells at most): every cell is stored in the page.

ipywidgets 7 (Google Colab ships 7.7.1) has no ``Stack``: there each stack is a ``Box`` that shows
only its selected child, and the controls are linked in the kernel instead, which Colab has
running.  The book itself is built with ipywidgets 8.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets
import traitlets

__all__ = ["explorer", "figure_to_svg"]

_STACK = getattr(widgets, "Stack", None)  # ipywidgets >= 8


class _KernelStack(widgets.Box):
    """A ``Stack`` for ipywidgets 7: a ``Box`` showing only child ``selected_index``."""

    selected_index = traitlets.Int(0)

    def __init__(self, children: list, selected_index: int = 0):
        super().__init__(children=children)
        self.observe(self._show, "selected_index")
        self.selected_index = selected_index
        self._show()

    def _show(self, change: Any = None) -> None:
        for i, child in enumerate(self.children):
            child.layout.display = None if i == self.selected_index else "none"


def _control(name: str, options: Sequence[tuple[str, Any]], kind: str) -> widgets.Widget:
    labels = [label for label, _ in options]
    common = dict(description=name, style={"description_width": "initial"})
    if kind == "dropdown":
        return widgets.Dropdown(options=list(zip(labels, range(len(labels)))), value=0, **common)
    if kind == "buttons":
        return widgets.ToggleButtons(
            options=list(zip(labels, range(len(labels)))), value=0, **common
        )
    if kind == "slider":
        # A SelectionSlider's value is a label: link its index instead.
        return widgets.SelectionSlider(
            options=list(zip(labels, range(len(labels)))),
            value=0,
            continuous_update=True,
            layout=widgets.Layout(width="100%", max_width="420px"),
            **common,
        )
    raise ValueError(
        f"explorer: unknown control kind {kind!r}; use 'slider', 'dropdown' or 'buttons'"
    )


def explorer(
    controls: dict[str, Sequence[tuple[str, Any]]],
    render: Callable[..., str],
    kinds: dict[str, str] | None = None,
    initial: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
) -> widgets.VBox:
    """Build a widget that shows ``render(**values)`` for the values picked with the controls.

    Args:
        controls: ordered mapping ``name -> [(label, value), ...]``; one control per entry.
        render: called once per combination with keyword arguments ``name=value``; returns HTML.
        kinds: per control ``"slider"`` (default), ``"dropdown"`` or ``"buttons"``.
        initial: per control, the index of the option shown first (default 0).
        labels: per control, the text shown next to it (default: its name).

    Returns:
        A ``VBox`` of the controls above the output; display it as the cell's last expression.

    Raises:
        ValueError: no controls, an empty option list, or more than 200 combinations.
    """
    if not controls:
        raise ValueError("explorer: give at least one control")
    names = list(controls)
    sizes = [len(controls[n]) for n in names]
    if min(sizes) == 0:
        empty = [n for n in names if not controls[n]]
        raise ValueError(f"explorer: control(s) {empty} have no options")
    total = 1
    for s in sizes:
        total *= s
    if total > 200:  # about 4 widget models each; past ~1,000 a loaded machine may drop some
        raise ValueError(
            f"explorer: {total} combinations would be stored in the page; keep it at most 200 "
            "(fewer options per control)"
        )
    kinds = kinds or {}
    labels = labels or {}
    ctrls = [_control(labels.get(n, n), controls[n], kinds.get(n, "slider")) for n in names]
    stack_class = _STACK or _KernelStack
    link = widgets.jslink if _STACK else widgets.link  # ipywidgets 7: linked in the kernel
    stacks_per_level: list[list[widgets.Box]] = [[] for _ in names]
    # With a real Stack, one layout serves every view and stack: each layout is a widget model,
    # and all of a page's models pass through the kernel's output channel at once (fewer models,
    # fewer messages to lose on a loaded machine). ipywidgets 7 hides children by their layouts.
    shared = {"layout": widgets.Layout()} if _STACK else {}

    def build(level: int, chosen: tuple[int, ...]) -> widgets.Widget:
        if level == len(names):
            kw = {n: controls[n][i][1] for n, i in zip(names, chosen)}
            return widgets.HTML(render(**kw), **shared)
        children = [build(level + 1, chosen + (i,)) for i in range(sizes[level])]
        stack = stack_class(children=children, selected_index=0, **shared)
        stacks_per_level[level].append(stack)
        return stack

    out = build(0, ())
    out.add_class("book-explorer-view")  # the book's script keeps its height from jumping
    links = []
    for ctrl, stacks in zip(ctrls, stacks_per_level):
        for stack in stacks:
            links.append(link((ctrl, "index"), (stack, "selected_index")))
    for name, ctrl, stacks in zip(names, ctrls, stacks_per_level):
        if initial and name in initial:
            ctrl.index = initial[name]
            for stack in stacks:
                stack.selected_index = initial[name]
    box = widgets.VBox([*ctrls, out])
    box._dlsys_links = links  # keep the links referenced alongside the widget
    return box


def figure_to_svg(fig: Any) -> str:
    """Render a matplotlib figure to an inline ``<svg>`` string and close it.

    Use it inside an :func:`explorer` ``render`` function to show a plot per combination.
    """
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]


def _combinations(controls: dict[str, Sequence[tuple[str, Any]]]):  # used by tests
    names = list(controls)
    for idx in itertools.product(*(range(len(controls[n])) for n in names)):
        yield {n: controls[n][i][1] for n, i in zip(names, idx)}
