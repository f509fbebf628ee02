"""labs.basics.widgets.explorer: every combination pre-rendered, controls linked in the front end."""

from __future__ import annotations

import ipywidgets as widgets
import pytest

from labs.basics import widgets as explorer_module
from labs.basics.widgets import _combinations, _KernelStack, explorer

STACKS = tuple(c for c in (getattr(widgets, "Stack", None), _KernelStack) if c is not None)


def _leaves(w):
    if isinstance(w, STACKS):
        return [leaf for child in w.children for leaf in _leaves(child)]
    return [w]


def test_every_combination_is_rendered_once_in_order():
    controls = {"a": [("one", 1), ("two", 2)], "b": [("x", "x"), ("y", "y"), ("z", "z")]}
    box = explorer(controls, lambda a, b: f"{a}{b}", kinds={"b": "dropdown"})
    leaves = _leaves(box.children[-1])
    assert [leaf.value for leaf in leaves] == ["1x", "1y", "1z", "2x", "2y", "2z"]
    assert len(list(_combinations(controls))) == 6


def test_controls_are_jslinked_to_every_stack_of_their_level():
    box = explorer({"a": [("1", 1), ("2", 2)], "b": [("x", 0), ("y", 1)]}, lambda a, b: "")
    links = box._dlsys_links
    assert len(links) == 1 + 2  # one outer stack, two inner stacks
    assert all(isinstance(link, widgets.widget_link.Link) for link in links)
    assert {link.source[0].description for link in links} == {"a", "b"}


def test_initial_index_and_labels():
    box = explorer(
        {"n": [("8", 8), ("16", 16), ("32", 32)]},
        lambda n: str(n),
        initial={"n": 2},
        labels={"n": "tokens"},
    )
    slider, stack = box.children
    assert slider.description == "tokens" and slider.index == 2 and stack.selected_index == 2


@pytest.mark.parametrize(
    ("controls", "message"),
    [
        ({}, "at least one control"),
        ({"a": []}, "have no options"),
        (
            {"a": [(str(i), i) for i in range(20)], "b": [(str(i), i) for i in range(11)]},
            "at most 200",
        ),
    ],
)
def test_bad_input(controls, message):
    with pytest.raises(ValueError, match=message):
        explorer(controls, lambda **kw: "")


def test_unknown_control_kind():
    with pytest.raises(ValueError, match="unknown control kind 'knob'"):
        explorer({"a": [("1", 1)]}, lambda a: "", kinds={"a": "knob"})


@pytest.mark.parametrize("version", ["installed", "ipywidgets 7"])
def test_without_stack_the_kernel_switches_boxes(version, monkeypatch):
    """ipywidgets 7 (Colab) has no Stack: Boxes show their selected child, linked in the kernel."""
    if version == "ipywidgets 7":
        monkeypatch.setattr(explorer_module, "_STACK", None)
    elif not hasattr(widgets, "Stack"):
        pytest.skip("this ipywidgets has no Stack")
    box = explorer(
        {"a": [("1", 1), ("2", 2)], "b": [("x", "x"), ("y", "y")]}, lambda a, b: f"{a}{b}"
    )
    a, b, outer = box.children
    assert [leaf.value for leaf in _leaves(outer)] == ["1x", "1y", "2x", "2y"]
    if version == "installed":
        return
    assert isinstance(outer, _KernelStack)

    def shown(w):
        (child,) = [c for c in w.children if c.layout.display != "none"]
        return shown(child) if isinstance(child, _KernelStack) else child.value

    assert shown(outer) == "1x"
    a.index, b.index = 1, 1
    assert shown(outer) == "2y"
    b.index = 0
    assert shown(outer) == "2x"


def test_a_full_explorer_stays_under_a_thousand_widget_models():
    """Every model is one message through the kernel's output channel when the page is built
    (ZeroMQ's default high-water mark is 1,000); lab 4's explorer lost some above 2,000."""
    import ipywidgets.widgets.widget as ww

    before = set(ww._instances)
    controls = {"a": [(str(i), i) for i in range(8)], "b": [(str(i), i) for i in range(25)]}
    explorer(controls, lambda a, b: f"{a}, {b}")
    assert len(set(ww._instances) - before) < 800
