"""The verdict outside the kernel: rewriting, plain data, judging, and exercises not applicable."""

from __future__ import annotations

import ast
import base64

import numpy as np

from labs.course.decode import NotPlain, decode
from labs.course.grade import grade_notebooks
from labs.course.gradefile import rows
from labs.course.rewrite import rewrite
from labs.course.verdict import judge
from notebook_factory import cell, good_lab, write, write_lab_and_key

CHECK = """from labs.course.checks import exercise
with exercise(3, "sums") as check:
    expected = reference_sum([1, 2, 3])
    x = rng.standard_normal(3)
    check.equal(my_sum([1, 2, 3]), expected, "my_sum([1, 2, 3])")
    check.close(my_sum(x), float(np.sum(x)), "my_sum of normals", rtol=1e-9)
    check.between(my_sum([]), -0.5, 0.5, "empty sum")
    check.shares_memory(view(x), x, True, "a view")
    check.props(my_sum([1]), {"type": int}, "an int")
    check.raises(TypeError, my_sum, None, what="None is refused", match="NoneType")"""


def test_the_student_version_computes_only_got_values():
    code, bind = rewrite(CHECK, student=True)
    assert "reference_sum" not in code and "expected" not in code  # dropped: only fed expected
    assert "rng.standard_normal" in code  # kept: it draws the inputs that follow
    assert "check.equal(my_sum([1, 2, 3]))" in code
    assert "check.close(my_sum(x))" in code and "np.sum" not in code
    assert "check.between(my_sum([]))" in code and "0.5" not in code
    assert "check.shares_memory(view(x), x)" in code and "True" not in code
    assert "check.props(my_sum([1]))" in code and "int" not in code
    assert "check.raises(None, my_sum, None)" in code and "TypeError" not in code
    assert "NoneType" not in code
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
    import json

    from labs.course.key import KEY_DIR, check_source
    from labs.course.snippet import definitions

    lacking = []
    for path in sorted(KEY_DIR.glob("*.json")):
        key = json.loads(path.read_text())
        prelude, methods = [], {}  # as the grader runs them: earlier checks' helpers first
        for c in key["cells"]:
            if "check" not in c:
                continue
            number, k = c["check"]
            source = check_source(key, number, k)
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


def _events(got, *rest, method="equal", kw=None, facts=None):
    return [["begin", 1, "t"], ["call", method, got, facts or {}, list(rest), kw or {}], ["end"]]


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
    for method in ("true", "compare", "_fail", "__init__"):  # no verdict taken from a kernel
        (v,) = judge(_events(True, "a condition", method=method), _events(True, method=method))
        assert v.status == "key" and "not an assertion" in v.message, v


def test_an_error_says_what_it_interrupted_and_what_was_expected():
    ref = [["begin", 1, "t"], ["call", "equal", 1, {}, [1, "first"], {}],
           ["call", "close", 0.5, {}, [0.5, "the ratio"], {}], ["end"]]  # fmt: skip
    mine = [["begin", 1, "t"], ["call", "equal", 1, {}, [], {}],
            ["error", ["builtins.IndexError", "builtins.LookupError"], "index 3 out of range"]]  # fmt: skip
    (v,) = judge(ref, mine)
    assert v.message == (
        "CheckFailure: Exercise 1 (t) -- the ratio: expected 0.5, but the code under test "
        "raised IndexError after 1 passing check(s): index 3 out of range"
    ), v.message


def test_facts_are_judged_in_the_grader():
    """Types, flags and aliasing come back as data; the expected side is the reference run's."""
    t = {"type": "torch.Tensor", "mro": ["torch.Tensor", "builtins.object"], "dtype": "torch.int8",
         "requires_grad": False, "memory": [0, 0, 16]}  # fmt: skip
    view, copy = dict(t, memory=[0, 4, 8]), dict(t, memory=[1, 0, 16])
    pair = {"type": "builtins.tuple", "items": [view, t]}
    ref = _events(None, True, "a view", method="shares_memory", facts=pair)
    assert judge(ref, _events(None, method="shares_memory", facts=pair))[0].status == "pass"
    (v,) = judge(ref, _events(None, method="shares_memory", facts=dict(pair, items=[copy, t])))
    assert "expected the two to share memory (a view), but they do not" in v.message
    dtype = _events(None, {"d": [["dtype", {"dt": "torch.int8"}]]}, "dtype", method="props",
                    facts=t)  # fmt: skip
    assert judge(dtype, _events(None, method="props", facts=t))[0].status == "pass"
    (v,) = judge(dtype, _events(None, method="props", facts=dict(t, dtype="torch.int16")))
    assert "expected dtype 'torch.int8', got 'torch.int16'" in v.message
    inst = _events(None, {"cls": "builtins.object"}, "any", method="instance", facts=t)
    assert judge(inst, _events(None, method="instance", facts=t))[0].status == "pass"
    (v,) = judge(inst, _events(None, method="instance", facts={"mro": "builtins.object"}))
    assert v.status == "fail"  # a malformed fact is dropped, not believed


def test_raises_judges_the_type_and_the_message_the_key_gives():
    ref = _events({"raised": [["builtins.ValueError"], "p must be a power of two"]},
                  {"cls": "builtins.ValueError"}, method="raises",
                  kw={"what": "bad p", "match": "(?i)power"})  # fmt: skip

    def mine(names, message):
        return _events({"raised": [names, message]}, method="raises")

    assert judge(ref, mine(["builtins.ValueError"], "not a power of 2"))[0].status == "pass"
    (v,) = judge(ref, mine(["builtins.ValueError"], "bad p"))
    assert "expected ValueError with a message matching '(?i)power', got ValueError: bad p" in (
        v.message
    )
    (v,) = judge(ref, mine(["builtins.KeyError"], "power"))
    assert "got KeyError: power" in v.message
    (v,) = judge(ref, _events({"raised": None}, method="raises"))
    assert "nothing was raised" in v.message


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

    import torch

    ns = {
        "ARGS": {"mode": "reference", "mark": "m ", "nonce": "n", "na": [], "bind": []},
        "USER_NS": {},
        "CHECK_CODE": compile("pass", "<check>", "exec"),
    }
    exec(compile(_kernel_text(), "<recorder>", "exec"), ns)
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


def _kernel_text() -> str:
    from pathlib import Path

    import labs.course

    here = Path(labs.course.__file__).parent
    return (here / "plaindata.py").read_text() + "\n" + (here / "recorder.py").read_text()


def _record(source: str, student: bool, user_ns: dict) -> list:
    """Run a check cell through rewrite + recorder in this process; return the events."""
    import io
    import json
    from contextlib import redirect_stdout

    code, bind = rewrite(source, student)
    args = {"mode": "student" if student else "reference", "mark": "m ", "nonce": "n",
            "na": [], "bind": bind}  # fmt: skip
    ns = {"ARGS": args, "USER_NS": user_ns, "CHECK_CODE": compile(code, "<check>", "exec")}
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(_kernel_text(), "<r>", "exec"), ns)
    line = [x for x in out.getvalue().splitlines() if x.startswith("m n ")][-1]
    return json.loads(line[4:])


def test_recorded_values_round_trip_and_compare_in_the_grader():
    from collections import Counter

    import torch

    source = """from labs.course.checks import exercise
with exercise(1, "round trip") as check:
    check.close(peak(torch.arange(5.0)), torch.arange(5.0).max(), "0-d tensors keep their shape")
    check.equal(sorted(set(ops())), ["recv", "send"], "only send and recv")
    check.equal(Counter(ops()), Counter(send=1, recv=1), "a multiset")
    check.props(buffers().get("bias"), {"type": torch.Tensor}, "a buffer named bias")
    check.props(peak(torch.ones(1)).item(), {"type": float}, "a float")
    x = torch.arange(6.0)
    check.shares_memory(view(x), x, True, "a view")"""
    good = {
        "torch": torch, "Counter": Counter, "peak": lambda x: x.max(),
        "ops": lambda: ["send", "recv"], "buffers": lambda: {"bias": torch.zeros(2)},
        "view": lambda x: x[2:],
    }  # fmt: skip
    ref = _record(source, False, dict(good))
    (v,) = judge(ref, _record(source, True, dict(good)))
    assert v.status == "pass", v
    bad = dict(good, ops=lambda: ["send", "all_reduce"], buffers=lambda: {"weight": 1})
    (v,) = judge(ref, _record(source, True, bad))
    assert v.status == "fail" and "only send and recv" in v.message, v
    (v,) = judge(ref, _record(source, True, dict(good, view=lambda x: x.clone())))
    assert v.status == "fail" and "a view: expected the two to share memory" in v.message, v


def test_the_recorder_returns_the_facts_of_a_value():
    """(iii) type, dtype, shape, strides, flags, device and memory, as plain data."""
    import torch

    source = """from labs.course.checks import exercise
with exercise(1, "facts") as check:
    check.equal(a)
    check.equal(a.T)
    check.equal(a[1])
    check.equal(b)
    check.equal(n[:, ::2])
    check.equal((a, n))"""
    a = torch.zeros(3, 4, requires_grad=True)
    b = (a * 2).to(torch.float64)
    n = np.zeros((2, 6), dtype=np.int16)
    events = _record(source, True, {"a": a, "b": b, "n": n, "np": np})
    facts = [ev[3] for ev in events if ev[0] == "call"]
    assert facts[0] == {
        "type": "torch.Tensor", "mro": ["torch.Tensor", "torch._C.TensorBase", "builtins.object"],
        "dtype": "torch.float32", "shape": [3, 4], "strides": [4, 1], "requires_grad": True,
        "is_leaf": True, "device": "cpu", "contiguous": True, "memory": [0, 0, 48],
    }  # fmt: skip
    assert (facts[1]["shape"], facts[1]["strides"], facts[1]["contiguous"]) == (
        [4, 3],
        [1, 4],
        False,
    )
    assert facts[1]["memory"] == [0, 0, 48]  # the same storage: token 0
    assert facts[2]["memory"] == [0, 16, 32]  # row 1: bytes 16..32 of it
    assert (facts[3]["dtype"], facts[3]["is_leaf"], facts[3]["memory"][0]) == ("torch.float64",
                                                                                False, 1)  # fmt: skip
    assert facts[4]["dtype"] == "int16" and facts[4]["strides"] == [12, 4]
    assert facts[4]["memory"] == [2, 0, 22] and facts[4]["contiguous"] is False
    assert [f["type"] for f in facts[5]["items"]] == ["torch.Tensor", "numpy.ndarray"]
    assert facts[5]["items"][1]["memory"] == [2, 0, 24]  # the same token as n[:, ::2]


def test_no_snippet_sent_to_a_submission_holds_an_expected_side_or_a_verdict():
    """(i) Walks every key: what a submission's kernel gets for each check computes only the
    student's side of each assertion (no expected expression, no name or helper that only fed
    one, no exception type or pattern), and no assertion takes a condition the kernel judged."""
    import ast
    import json

    from labs.course.checks import ASSERTIONS as METHODS
    from labs.course.key import KEY_DIR, check_source
    from labs.course.reference import _keep
    from labs.course.snippet import definitions

    truths = (ast.Compare, ast.BoolOp)
    problems = []
    for path in sorted(KEY_DIR.glob("*.json")):
        key = json.loads(path.read_text())
        keep, prelude = _keep(key), []
        for c in key["cells"]:
            if "check" not in c:
                continue
            source = check_source(key, *c["check"])
            full = ast.parse(rewrite("\n".join([*prelude, source]), student=False)[0])
            code = rewrite("\n".join([*prelude, source]), student=True, keep=keep)[0]
            prelude.append(definitions(source))
            where = f"{key['lab']} check {c['check']}"
            tree = ast.parse(code)
            expected, got = _sides(full)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    n = node.func.attr
                    if n in ("true", "compare"):
                        problems.append(f"{where}: check.{n} judges a condition")
                    elif (
                        n in METHODS
                        and n != "raises"
                        and (len(node.args) > METHODS[n] or node.keywords)
                    ):
                        problems.append(f"{where}: {ast.unparse(node)} sends an expected side")
                    elif n in METHODS and any(isinstance(a, truths) for a in node.args):
                        problems.append(f"{where}: {ast.unparse(node)} sends a truth value")
            text = {ast.dump(n) for n in ast.walk(tree)}
            leaked = [e for e in expected if ast.dump(e) in text and ast.dump(e) not in got]
            problems += [f"{where}: sends the expected {ast.unparse(e)!r}" for e in leaked
                         if not _literal(e)]  # fmt: skip
            only = _expected_only_names(full) - keep
            bound = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
                     for t in ast.walk(n.targets[0]) if isinstance(t, ast.Name)}  # fmt: skip
            bound |= {t.id for n in ast.walk(tree) if isinstance(n, ast.For)
                      and isinstance(n.iter, ast.List | ast.Tuple)
                      for t in ast.walk(n.target) if isinstance(t, ast.Name)}  # fmt: skip
            bound |= {
                n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)
            }
            problems += [f"{where}: computes {name!r}, which only feeds expected values"
                         for name in sorted(only & bound)]  # fmt: skip
    assert not problems, "\n".join(problems[:40])


def _literal(node) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return isinstance(node, ast.Name | ast.Attribute)
    return True


def _sides(tree) -> tuple[list, set]:
    """(expected-side argument nodes, dumps of every node outside them) of a check."""
    from labs.course.checks import ASSERTIONS as METHODS

    expected, inside = [], set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in METHODS):  # fmt: skip
            continue
        n, kw = METHODS[node.func.attr], [k.value for k in node.keywords]
        theirs = node.args[:1] + kw if node.func.attr == "raises" else node.args[n:] + kw
        expected += theirs
        inside |= {id(x) for a in theirs for x in ast.walk(a)}
    outside = {ast.dump(x) for x in ast.walk(tree) if id(x) not in inside}
    return expected, outside


def _expected_only_names(tree) -> set[str]:
    """Names read only by expected arguments, or by assignments and helpers that only feed them."""
    from labs.course.checks import ASSERTIONS as METHODS

    in_expected, parents = set(), {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and (node.func.attr in METHODS)
        ):
            n, kw = METHODS[node.func.attr], [k.value for k in node.keywords]
            parts = node.args[:1] + kw if node.func.attr == "raises" else node.args[n:] + kw
            in_expected |= {id(x) for p in parts for x in ast.walk(p)}

    def binders(x) -> list[set[str]]:  # the names of the assignments and defs around x
        out, node = [], x
        while id(node) in parents:
            up = parents[id(node)]
            if isinstance(up, ast.Assign) and node is up.value:
                out.append({t.id for t in ast.walk(up.targets[0]) if isinstance(t, ast.Name)})
            elif isinstance(up, ast.FunctionDef | ast.ClassDef):
                out.append({up.name})
            node = up
        return out

    loads: dict[str, list] = {}
    for x in ast.walk(tree):
        if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load):
            loads.setdefault(x.id, []).append(x)
    only: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, nodes in loads.items():
            if name not in only and all(
                id(x) in in_expected or any(b and b <= only for b in binders(x)) for x in nodes
            ):
                only.add(name)
                changed = True
    return only


def test_graded_variants_run_after_the_checks_and_uses_references_cells_do_not(tmp_path):
    """A graded variant (hidden from the student) catches an answer fitted to the visible
    check; a cell tagged uses-references is not run in a submission's kernel."""
    from labs.course.notebooks import parse_lab
    from labs.course.student import student_version

    nb = good_lab()
    graded = cell(
        "from labs.course.checks import exercise\nwith exercise(1, 'double') as check:\n"
        "    check.equal(double(5), 10, 'double(5)')",
        "graded-exercise-1",
        "remove-cell",
    )
    nb.cells.insert(4, graded)
    nb.cells.append(cell("raise RuntimeError('needs a reference')", "uses-references"))
    # a guard of the prose asserts the book's own run: not run in a submission's kernel either
    nb.cells.append(cell("# guard: lab95-never\nassert False, 'a guard ran'", "remove-cell"))
    sol, key = write_lab_and_key(tmp_path / "instructor", "lab95-graded", nb)
    student = student_version(parse_lab(sol))
    assert not any("graded-exercise-1" in c.metadata.get("tags", []) for c in student.cells)
    fitted = student_version(parse_lab(sol))
    fitted.cells[2].source = "def double(x):\n    return 42"  # right for the visible check only
    fitted.cells[5].source = "area = math.pi"
    subs = [write(tmp_path / "s" / name / "lab95.ipynb", n)
            for name, n in (("solution", nb), ("fitted", fitted))]  # fmt: skip
    r_sol, r_fit = grade_notebooks(subs, key=key)
    assert [e.outcome for e in r_sol.exercises] == ["PASS", "PASS"], r_sol
    assert not r_sol.failed_cells  # neither the uses-references cell nor the guard was run
    assert not any("guard:" in c.source for c in student.cells)  # nor given to the student
    assert r_sol.exercises[0].verified.count("PASS exercise 1") == 1  # the visible check
    assert "PASS hidden check 1 of 1 of exercise 1" in r_sol.exercises[0].verified  # its variant
    assert "double(5)" not in r_sol.exercises[0].verified
    assert r_fit.exercises[0].outcome == "FAIL"
    # red team #8: a hidden check's inputs and expected values reach no output a student sees
    # (feedback, CSV, exports, Gradescope); the instructor's JSON gradebook keeps them
    assert r_fit.exercises[0].error == "CheckFailure: hidden check 1 of 1 of exercise 1 failed"
    assert "double(5): expected 10, got 42" in r_fit.exercises[0].detail
    import json as _json

    from labs.course import gradescope
    from labs.course.feedback import feedback_line
    from labs.course.gradefile import payload

    k = _json.loads(key.read_text())
    seen = [feedback_line(e) for r in (r_sol, r_fit) for e in r.exercises]
    seen += [str(row) for row in rows([r_sol, r_fit], {}, {})]
    seen += [_json.dumps(gradescope.results(k, r)) for r in (r_sol, r_fit)]
    seen += [str(r.failed_cells) for r in (r_sol, r_fit)]
    assert not [line for line in seen if "double(5)" in line or "expected 10" in line]
    assert "double(5): expected 10" in _json.dumps(payload([r_fit], {}, {}))


def test_a_failure_says_what_was_expected_where_the_values_differ():
    """Issue 35: no "got non-finite values nan" alone; the expected value, the shapes and dtypes,
    and the first element that differs."""
    want = np.array([[0.5, 0.25], [1.0, 2.0]], dtype=np.float32)
    got = want.copy()
    got[1, 0] = np.nan
    ref = _events(_nd(want), _nd(want), "o = z / l", method="close")
    (v,) = judge(ref, _events(_nd(got), method="close"))
    assert v.status == "fail"
    assert "o = z / l: expected [[0.5 0.25] [1. 2. ]] (shape (2, 2), float32)" in v.message
    assert "got [[0.5 0.25] [ nan 2. ]] (shape (2, 2), float32)" in v.message
    assert "first difference at index (1, 0): expected 1.0, got nan" in v.message
    (v,) = judge(ref, _events(_nd(want.astype(np.float64)[:1]), method="close"))
    assert "shape (1, 2), float64): shape (1, 2), not (2, 2)" in v.message


SNOOP = '''import sys as _sys


def double(x):
    """Looks for the grader's check text in every frame above it and raises with what it found."""
    found, f = [], _sys._getframe(1)
    while f is not None:
        for space in (f.f_globals, f.f_locals):
            for v in list(space.values()):
                for w in (list(v.values()) if isinstance(v, dict) else [v]):
                    if isinstance(w, str) and "check.equal(" in w:
                        found.append(w)
        f = f.f_back
    raise RuntimeError("LEAK " + (found[0] if found else "none").replace("\\n", " | ") + "x" * 400)
'''


def test_an_exception_in_a_check_shows_its_type_and_a_short_message_only(tmp_path):
    """Red team minor (a): the kernel held the grader's rewritten check source where the student's
    code could read it and put it in the failure line; the line quotes the exception's type and
    at most ``MESSAGE_LIMIT`` characters of its message."""
    from labs.course.verdict import MESSAGE_LIMIT, _error_message

    r = _grade_variant(tmp_path, "lab96-snoop", {}, 3, SNOOP)
    e1 = r.exercises[0]
    assert e1.outcome == "FAIL" and "raised RuntimeError" in e1.error, e1.error
    assert "LEAK" in e1.error and "check.equal(" not in e1.error and "ARGS" not in e1.error
    assert len(e1.error) < MESSAGE_LIMIT + 200, e1.error
    line = _error_message("Exercise 1", ["RuntimeError"], "x\n" * 400, 0, "")
    assert line.endswith("… (cut)") and len(line) < MESSAGE_LIMIT + 100 and "\n" not in line
