"""The verdict outside the kernel: rewriting, plain data, judging, and exercises not applicable."""

from __future__ import annotations

import base64

import numpy as np

from labs.course.grade import grade_notebooks
from labs.course.gradefile import rows
from labs.course.rewrite import rewrite
from labs.course.verdict import NotPlain, decode, judge
from notebook_factory import cell, good_lab, write, write_lab_and_key

CHECK = """from labs.course.checks import exercise
with exercise(3, "sums") as check:
    expected = reference_sum([1, 2, 3])
    x = rng.standard_normal(3)
    check.equal(my_sum([1, 2, 3]), expected, "my_sum([1, 2, 3])")
    check.close(my_sum(x), float(np.sum(x)), "my_sum of normals", rtol=1e-9)
    check.true(my_sum([]) == 0, "empty sum")
    check.raises(TypeError, my_sum, None, what="None is refused")"""


def test_the_student_version_computes_only_got_values():
    code, bind = rewrite(CHECK, student=True)
    assert "reference_sum" not in code and "expected" not in code  # dropped: only fed expected
    assert "rng.standard_normal" in code  # kept: it draws the inputs that follow
    assert "check.equal(my_sum([1, 2, 3]))" in code
    assert "check.close(my_sum(x))" in code and "np.sum" not in code
    assert "check.compare(my_sum([]), 0, 'Eq')" in code
    assert "check.raises(None, my_sum, None)" in code and "TypeError" not in code
    assert "if check.runs:" in code and bind == ["exercise"]
    full, _ = rewrite(CHECK, student=False)
    assert "reference_sum" in full and "rtol=1e-09" in full and "'None is refused'" in full


def test_an_assignment_other_cells_read_is_kept():
    code, _ = rewrite(CHECK, student=True, keep={"expected"})
    assert "expected = reference_sum([1, 2, 3])" in code


def test_expected_values_in_loop_items_and_helper_arguments_stay_out_of_the_kernel():
    source = """def helper(check, got, expected, x):
    check.close(got, expected, "w")
    check.equal(x)
with exercise(1) as check:
    for a, b, want in [(1, 2, 12345), (4, 5, 67890)]:
        helper(check, add(a, b), reference_add(a, b), torch.randn(3))
        helper(check, add(a, b), expected=want, x=1)
    for want, seed in [(11111, 1), (22222, 2)]:
        check.equal(add(seed, 0), want)
    for (want,) in [(33333,)]:
        check.equal(add(1, 1), want)"""
    code, _ = rewrite(source, student=True)
    for secret in ("12345", "67890", "11111", "22222", "33333", "reference_add", "want"):
        assert secret not in code, (secret, code)
    assert "for a, b in [(1, 2), (4, 5)]:" in code
    assert "helper(check, add(a, b), None, torch.randn(3))" in code  # the draw stays
    assert "helper(check, add(a, b), expected=None, x=1)" in code
    assert "for seed, in [(1,), (2,)]:" in code and "for _ in [None]:" in code
    full, _ = rewrite(source, student=False)
    assert "12345" in full and "reference_add(a, b)" in full


def _methods_run(tree) -> set[str]:
    """Attributes called by the statements of ``tree`` outside function definitions, and inside
    the helpers those statements call (by name, transitively)."""
    import ast

    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    todo = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)]
    seen, attrs = set(), set()
    while todo:
        for node in ast.walk(todo.pop()):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Attribute):
                attrs.add(node.func.attr)
            elif isinstance(node.func, ast.Name) and node.func.id in defs.keys() - seen:
                seen.add(node.func.id)
                todo.append(defs[node.func.id])
    return attrs


def test_every_exercise_has_a_value_check_only_the_grader_can_judge():
    """No exercise is graded on observations alone (a truth value, a comparison both of whose
    sides the kernel computes, an exception): each has an equal/close/between check, whose
    expected value is computed only in the reference run."""
    import ast
    import json

    from labs.course.key import KEY_DIR
    from labs.course.protect import definitions

    lacking = []
    for path in sorted(KEY_DIR.glob("*.json")):
        key = json.loads(path.read_text())
        prelude, methods = [], {}  # as the grader runs them: earlier checks' helpers first
        for c in key["cells"]:
            if "check" not in c:
                continue
            number, k = c["check"]
            source = key["exercises"][str(number)]["checks"][k]["source"]
            tree = ast.parse(rewrite("\n".join([*prelude, source]), student=True)[0])
            methods.setdefault(number, set()).update(_methods_run(tree))
            prelude.append(definitions(source))
        lacking += [
            f"{key['lab']} exercise {n}"
            for n in key["exercises"]
            if not methods.get(int(n), set()) & {"equal", "close", "between"}
        ]
    assert not lacking, f"exercises with no value check: {lacking}"


def _nd(arr):
    return {"nd": [arr.dtype.str, list(arr.shape), base64.b64encode(arr.tobytes()).decode()]}


def test_decode_plain_data_and_refuse_the_rest():
    arr = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert np.array_equal(decode(_nd(arr)), arr)
    assert decode({"t": [1, {"l": [2.5, None]}, "x"]}) == (1, [2.5, None], "x")
    assert decode({"d": [["a", {"set": [1, 2]}]]}) == {"a": {1, 2}}
    assert np.isnan(decode({"f": "nan"}))
    assert decode({"bad": "mod.Anything"}) == NotPlain("mod.Anything")
    bad = _nd(arr)
    bad["nd"][1] = [4, 4]  # the shape does not match the bytes
    assert isinstance(decode(bad), NotPlain)
    assert isinstance(decode({"nd": ["|O", [1], ""]}), NotPlain)  # object arrays never
    assert isinstance(decode({"eval": "__import__('os')"}), NotPlain)


def _events(got, *rest, method="equal", kw=None):
    return [["begin", 1, "t"], ["call", method, got, list(rest), kw or {}], ["end"]]


def test_judge_compares_in_the_grader():
    ref = _events(42, 42, "f(21)")
    (v,) = judge(ref, _events(42))
    assert (v.status, v.message) == ("pass", "PASS exercise 1: t — 1 check: f(21)")
    (v,) = judge(ref, _events(41))
    assert v.status == "fail" and "f(21): expected 42, got 41" in v.message
    (v,) = judge(ref, _events({"bad": "x.AlwaysEqual"}))
    assert v.status == "fail" and "x.AlwaysEqual, which is not plain data" in v.message
    (v,) = judge(ref, [["begin", 1, "t"], ["end"]])  # a forged "nothing to check"
    assert v.status == "fail" and "ran 0 assertion(s) where the key's run ran 1" in v.message
    (v,) = judge(ref, [["begin", 1, "t"], ["error", ["NotImplementedError"], "Exercise 1: f"]])
    assert "not implemented yet" in v.message
    for garbled in ([["begin", 1, "t"], ["error", [], 3]], [["begin", 1, "t"], ["call"]], [7]):
        (v,) = judge(ref, garbled)
        assert v.status == "fail", garbled
    (v,) = judge(_events(41, 42, "f(21)"), _events(42))  # the key's own run fails its check
    assert v.status == "key"
    cond = _events({"l": [3, 3, "Eq"]}, "same", method="compare")
    (v,) = judge(cond, _events({"l": [3, 3, "Eq"]}, method="compare"))
    assert v.status == "pass"
    (v,) = judge(cond, _events({"l": [3, {"bad": "x.Eq"}, "Eq"]}, method="compare"))
    assert v.status == "fail"
    below = _events({"l": [0.5, 1.0, "Lt"]}, "error 0.5 < 1.0", method="compare")
    (v,) = judge(below, _events({"l": [2.5, 1.0, "Lt"]}, method="compare"))
    assert v.status == "fail" and "(this submission: 2.5 < 1.0 does not hold)" in v.message, v


def _grade_variant(tmp_path, name: str, cells: dict, extra_at: int, extra: str):
    """Grade ``good_lab()`` with ``cells`` (index -> source) changed in the key and the submission
    alike, and one cell ``extra`` the submission inserts before its cell ``extra_at``."""
    nb, sub = good_lab(), good_lab()
    for i, source in cells.items():
        nb.cells[i].source = sub.cells[i].source = source
    _, key = write_lab_and_key(tmp_path / "instructor", name, nb)
    sub.cells.insert(extra_at, cell(extra))
    (r,) = grade_notebooks([write(tmp_path / "s" / f"{name}.ipynb", sub)], key=key)
    return r


def test_an_exercise_whose_needs_are_missing_is_not_applicable(tmp_path):
    needs = (
        "from labs.course.checks import exercise\n"
        'with exercise(2, "area", needs=["no_such_module_xyz"]) as check:\n'
        "    check.close(area, math.pi, 'area')"
    )
    r = _grade_variant(tmp_path, "lab97-needs", {5: needs}, 4, "import no_such_module_xyz")
    e1, e2 = r.exercises
    assert (e1.outcome, e1.status) == ("PASS", "graded")
    assert (e2.outcome, e2.status) == ("N/A", "not applicable")
    assert e2.error == (
        "N/A exercise 2: needs no_such_module_xyz "
        "(install: no_such_module_xyz: pip install no_such_module_xyz)"
    )
    row = rows([r], {})[1]
    assert (row["outcome"], row["points"], row["status"]) == ("N/A", "", "not applicable")


def test_check_inputs_from_the_global_generators_do_not_depend_on_earlier_draws(tmp_path):
    """An honest submission whose own code draws random numbers before a check that takes its
    inputs from torch's, numpy's and Python's global generators still gets the key's inputs."""
    check = (
        "from labs.course.checks import exercise\n"
        "with exercise(1, 'double') as check:\n"
        "    x = torch.randn(3)\n"
        "    check.close(double(x), 2 * x, 'torch input')\n"
        "    y = np.random.standard_normal(2)\n"
        "    check.close(double(y), 2 * y, 'numpy input')\n"
        "    z = random.random()\n"
        "    check.close(double(z), 2 * z, 'random input')"
    )
    imports = "import math\nimport random\nimport numpy as np\nimport torch"
    own_draws = "torch.randn(7), np.random.rand(5), random.random()  # its own"
    r = _grade_variant(tmp_path, "lab96-seeded", {1: imports, 3: check}, 3, own_draws)
    assert [e.outcome for e in r.exercises] == ["PASS", "PASS"], [e.error for e in r.exercises]


def test_the_kernel_encodes_exact_types_only():
    from pathlib import Path

    import torch

    import labs.course

    ns = {
        "ARGS": {"mode": "reference", "mark": "m ", "nonce": "n", "na": [], "bind": []},
        "USER_NS": {},
        "CHECK_CODE": compile("pass", "<check>", "exec"),
    }
    exec(
        compile(
            Path(labs.course.__file__).with_name("recorder.py").read_text(), "<recorder>", "exec"
        ),
        ns,
    )
    encode = ns["encode"]

    class Sly(float):
        pass

    class LookAlike:
        pass

    LookAlike.__module__, LookAlike.__qualname__ = "builtins", "float"
    assert encode(Sly(1.0)) == {
        "bad": f"{__name__}.test_the_kernel_encodes_exact_types_only.<locals>.Sly"
    }
    assert encode(LookAlike) == {"bad": "the class builtins.float"}
    assert encode(float) == {"cls": "builtins.float"}
    assert decode(encode(torch.Size([2, 3]))) == (2, 3)
    assert decode(encode(range(3))) == [0, 1, 2]
    t = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    assert np.array_equal(decode(encode(t)), np.array([1.5, -2.0], dtype=np.float32))
    assert decode(encode({"a": (1, 2.5, None, "s", True)})) == {"a": (1, 2.5, None, "s", True)}


def _record(source: str, student: bool, user_ns: dict) -> list:
    """Run a check cell through rewrite + recorder in this process; return the events."""
    import io
    import json
    from contextlib import redirect_stdout
    from pathlib import Path

    import labs.course

    code, bind = rewrite(source, student)
    args = {"mode": "student" if student else "reference", "mark": "m ", "nonce": "n",
            "na": [], "bind": bind}  # fmt: skip
    ns = {"ARGS": args, "USER_NS": user_ns, "CHECK_CODE": compile(code, "<check>", "exec")}
    out = io.StringIO()
    with redirect_stdout(out):
        exec(
            compile(Path(labs.course.__file__).with_name("recorder.py").read_text(), "<r>", "exec"),
            ns,
        )
    line = [x for x in out.getvalue().splitlines() if x.startswith("m n ")][-1]
    return json.loads(line[4:])


def test_recorded_values_round_trip_and_compare_in_the_grader():
    from collections import Counter

    import torch

    source = """from labs.course.checks import exercise
with exercise(1, "round trip") as check:
    check.close(peak(torch.arange(5.0)), torch.arange(5.0).max(), "0-d tensors keep their shape")
    check.true(set(ops()) <= {"send", "recv"}, "only send and recv")
    check.true(Counter(ops()) <= Counter(send=2, recv=2), "a multiset")
    check.true("bias" in buffers(), "a name among the buffers")
    check.equal(type(peak(torch.ones(1)).item()), float, "a float")"""
    good = {
        "torch": torch, "Counter": Counter, "peak": lambda x: x.max(),
        "ops": lambda: ["send", "recv"], "buffers": lambda: {"bias": torch.zeros(2)},
    }  # fmt: skip
    ref = _record(source, False, dict(good))
    (v,) = judge(ref, _record(source, True, dict(good)))
    assert v.status == "pass", v
    bad = dict(good, ops=lambda: ["send", "all_reduce"], buffers=lambda: {"weight": 1})
    (v,) = judge(ref, _record(source, True, bad))
    assert v.status == "fail" and "only send and recv" in v.message, v
