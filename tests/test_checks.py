"""The grading assertions fail with useful messages, and pass when they should."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from labs.course.checks import CheckFailure, ReferenceUsed, exercise


def test_passing_checks_print_one_line_saying_what_was_verified(capsys):
    with exercise(1, "demo") as check:
        check.equal(48, 48, "int")
        check.equal((1, 2), (1, 2), "tuple")
        check.equal(np.arange(3), np.arange(3), "array")
        check.close(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]), "tensor", rtol=1e-6)
        check.true(True, "condition")
        check.raises(ValueError, int, "x", what="int('x')")
        check.between(0.5, 0, 1, "fraction")
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    assert out.startswith("PASS exercise 1: demo — 7 checks: int; tuple; array; tensor;"), out


def test_a_long_pass_line_is_shortened(capsys):
    with exercise(2) as check:
        for i in range(40):
            check.equal(i, i, f"value number {i}")
    out = capsys.readouterr().out.strip()
    assert out.startswith("PASS exercise 2 — 40 checks: value number 0; value number 1")
    assert out.endswith("more)") and len(out) < 220


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            lambda c: c.equal(24, 48, "matmul_flops(2, 3, 4)"),
            "matmul_flops(2, 3, 4): expected 48, got 24",
        ),
        (lambda c: c.equal(True, 1, "flag"), "expected 1, got True"),
        (lambda c: c.close([1.0, 2.0], [1.0, 3.0], "vector"), "max abs error 1"),
        (lambda c: c.close(np.ones(3), np.ones(4), "shape"), "expected shape (4,), got shape (3,)"),
        (lambda c: c.close(None, 1.0, "value"), "got None"),
        (lambda c: c.close([np.nan], [1.0], "nan"), "non-finite"),
        (lambda c: c.raises(ValueError, lambda: None, what="no error"), "nothing was raised"),
        (lambda c: c.between(3.0, 0, 1, "fraction"), "expected a value in [0, 1], got 3"),
        (
            lambda c: c.true(False, "the loss decreased", hint="check the sign"),
            "Hint: check the sign",
        ),
    ],
)
def test_failures_name_the_exercise_and_the_part(body, fragment):
    with pytest.raises(CheckFailure) as info:
        with exercise(7, "demo") as check:
            body(check)
    message = str(info.value)
    assert message.startswith("Exercise 7 (demo) -- ")
    assert fragment in message


def test_a_stub_is_reported_as_not_implemented():
    def stub():
        raise NotImplementedError("Exercise 2: count the operations")

    with pytest.raises(CheckFailure, match=r"Exercise 2 -- not implemented yet: Exercise 2: count"):
        with exercise(2) as check:
            check.equal(stub(), 1, "stub()")


def test_a_missing_name_points_to_the_cell_that_should_define_it():
    with pytest.raises(CheckFailure, match="has not run successfully"):
        with exercise(3):
            undefined_name  # noqa: B018, F821


def test_an_error_inside_a_check_names_the_exercise():
    with pytest.raises(CheckFailure) as info:
        with exercise(4, "shapes") as check:
            check.equal(1, 1, "first")
            raise TypeError("unsupported operand")
    assert str(info.value) == (
        "Exercise 4 (shapes) -- the code under test raised TypeError after 1 passing check(s): "
        "unsupported operand"
    )


def test_a_block_without_assertions_fails():
    with pytest.raises(CheckFailure, match="Exercise 5 -- no assertion ran"):
        with exercise(5):
            pass


def test_a_forbidden_reference_becomes_a_failure_of_the_exercise():
    with pytest.raises(CheckFailure, match="Exercise 6 -- calls labs.basics.flops.matmul_flops"):
        with exercise(6):
            raise ReferenceUsed("calls labs.basics.flops.matmul_flops")


def test_exercise_needing_a_missing_component_is_not_applicable(capsys):
    """``needs=`` a missing module: one N/A line naming it and how to install it, no failure."""
    from labs.course.checks import exercise, missing_components

    assert missing_components(["math", "no_such_module_xyz", "no-such-executable"]) == [
        "no_such_module_xyz",
        "no-such-executable",
    ]
    with exercise(6, "a kernel", needs=["no_such_module_xyz"]) as check:
        check.equal(no_such_name, 1, "never reached")  # noqa: F821 - the missing component's name
    out = capsys.readouterr().out.strip()
    assert out.startswith("N/A exercise 6: a kernel — needs no_such_module_xyz (install: ")
    assert "pip install no_such_module_xyz" in out and "PASS" not in out


def test_exercise_with_its_components_present_runs_as_usual(capsys):
    from labs.course.checks import CheckFailure, exercise

    with exercise(2, "present", needs=["math"]) as check:
        check.equal(1 + 1, 2, "sum")
    assert capsys.readouterr().out.startswith("PASS exercise 2: present")
    try:
        with exercise(2, "present", needs=["math"]) as check:
            check.equal(1 + 1, 3, "sum")
    except CheckFailure:
        pass
    else:
        raise AssertionError("a failing check passed although nothing was missing")
