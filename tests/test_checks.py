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
        check.equal(float("nan"), float("nan"), "nan")
        check.raises(ValueError, int, "x", what="int('x')", match="invalid literal")
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
        (
            lambda c: c.close(np.ones(3), np.ones(4), "shape"),
            "expected [1. 1. 1. 1.] (shape (4,), float64), got [1. 1. 1.] (shape (3,), float64)",
        ),
        (lambda c: c.close(None, 1.0, "value"), "got None"),
        (  # a nan says where it is and what was expected there (issue 35)
            lambda c: c.close([0.5, np.nan], [0.5, 0.25], "nan"),
            "nan: expected [0.5, 0.25], got [0.5, nan]; first difference at index (1,): "
            "expected 0.25, got nan (tolerance",
        ),
        (
            lambda c: c.equal(torch.tensor([[1, 2], [3, 4]]), torch.tensor([[1, 2], [3, 5]]), "m"),
            "(shape (2, 2), int64); first difference at index (1, 1): expected 5, got 4",
        ),
        (lambda c: c.raises(ValueError, lambda: None, what="no error"), "nothing was raised"),
        (
            lambda c: c.raises(ValueError, int, "x", what="message", match="power of two"),
            "expected ValueError with a message matching 'power of two', got ValueError: "
            "invalid literal",
        ),
        (lambda c: c.raises(KeyError, int, "x", what="type"), "expected KeyError, got ValueError"),
        (lambda c: c.between(3.0, 0, 1, "fraction"), "expected a value in [0, 1], got 3"),
        (lambda c: c.between(True, 0, 1, "flag"), "expected a number in [0, 1], got True"),
        (
            lambda c: c.instance(np.float32(1), float, "a float"),
            "expected an instance of float, got numpy.float32",
        ),
        (
            lambda c: c.props(torch.ones(2), {"dtype": torch.float64}, "dtype"),
            "dtype: expected dtype 'torch.float64', got 'torch.float32' (torch.Tensor)",
        ),
        (
            lambda c: c.props(torch.ones(2), {"requires_grad": True}, "grad"),
            "expected requires_grad True, got False",
        ),
        (lambda c: c.props(3, {"type": float}, "type"), "expected type 'builtins.float', got"),
        (lambda c: c.props(3, {"colour": 1}, "fact"), "no fact 'colour'"),
        (
            lambda c: (lambda t: c.shares_memory(t, t[1:], False, "copy"))(torch.ones(3)),
            "copy: expected the two to not share memory (a copy), but they do",
        ),
        (
            lambda c: c.shares_memory(torch.ones(3), torch.ones(3), True, "view"),
            "view: expected the two to share memory (a view), but they do not",
        ),
        (lambda c: c.uses(lambda a, b: a == b, ["compare_digest"], "digest"), "to use compare"),
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


def test_facts_pass_when_they_hold(capsys):
    t = torch.zeros(4, 3)
    with exercise(8, "facts") as check:
        check.instance(np.float64(1.0), float, "numpy's float64 is a float")
        check.instance(True, int, "a bool is an int")
        check.props(t.T, {"type": torch.Tensor, "dtype": torch.float32, "shape": (3, 4),
                          "strides": (1, 3), "contiguous": False, "device": "cpu"}, "t.T")  # fmt: skip
        check.props(np.zeros(2, np.int8), {"dtype": np.int8, "shape": [2]}, "numpy array")
        check.shares_memory(t[1], t, True, "a row is a view")
        check.shares_memory(t[0], t[1], False, "two rows do not overlap")
        check.shares_memory(t.clone(), t, False, "a clone is a copy")
        check.uses(lambda a: __import__("hmac").compare_digest(a, a), ["compare_digest"], "uses")
    assert capsys.readouterr().out.startswith("PASS exercise 8: facts — 8 checks")


def test_a_forbidden_reference_becomes_a_failure_of_the_exercise():
    with pytest.raises(CheckFailure, match="Exercise 6 -- calls labs.basics.flops.matmul_flops"):
        with exercise(6):
            raise ReferenceUsed("calls labs.basics.flops.matmul_flops")


def test_exercise_needing_a_missing_component_is_not_applicable(capsys):
    """``needs=`` a missing module: one N/A line naming it and how to install it, no failure."""
    from labs.course.checks import exercise
    from labs.course.needs import missing_components

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
