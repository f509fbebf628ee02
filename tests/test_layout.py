"""The package reads like the book: a subpackage per part, small modules, no shims, no cycles.

See ``labs/__init__.py`` (the index) and CONTRIBUTING.md.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from conftest import REPO

LABS = REPO / "labs"
TOP_LEVEL = {"__init__.py", "core.py", "gpt.py", "data.py"}
MAX_LINES = 320  # "no module over ~300 lines"
# modules that used to sit at the top of labs/ (moved into the part subpackages)
REMOVED = (
    "memory flops widgets roofline activations checkpoint lora quant triton_attention "
    "triton_attention_bwd collectives data_parallel ddp_torchrun tensor_parallel parallel3d "
    "pipeline pipeline_schedules pipeline_sim pipeline_exec pipeline_plot dualpipe pp_torchrun "
    "zero zero_formulas zero_state zero_trainer fsdp_train fsdp_setup fsdp_runs grade release"
).split()


def modules() -> dict[str, Path]:
    out = {}
    for path in LABS.rglob("*.py"):
        parts = path.relative_to(LABS).with_suffix("").parts
        name = ".".join(("labs", *parts)).removesuffix(".__init__")
        out[name] = path
    return out


def test_only_shared_modules_at_the_top():
    top = {p.name for p in LABS.glob("*.py")}
    assert top == TOP_LEVEL, f"move {sorted(top - TOP_LEVEL)} into the part's subpackage"


def test_no_module_is_too_long():
    long = {n: len(p.read_text().splitlines()) for n, p in modules().items()}
    long = {n: k for n, k in long.items() if k > MAX_LINES}
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


def test_nothing_imports_a_removed_module():
    files = subprocess.run(
        ["git", "ls-files", "*.py", "*.ipynb", "*.md", "*.toml", "*.yml", "*.sh"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    names = "|".join(REMOVED)
    pattern = re.compile(
        rf"(?<![\w.])labs\.({names})\b(?!\.(flash|triton_fwd|triton_bwd)\b)"
        rf"|from labs import [\w, ]*\b({names})\b"
    )
    hits = []
    for f in files:
        text = (REPO / f).read_text(encoding="utf-8", errors="replace")
        for i, line in enumerate(text.splitlines(), 1):
            m = pattern.search(line)
            if m and not line.lstrip().startswith("from labs import attention"):
                hits.append(f"{f}:{i}: {line.strip()[:100]}")
    assert not hits, "old module paths:\n" + "\n".join(hits[:30])


def test_no_import_cycles_and_no_pure_reexport_modules():
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        deps = set()
        body = [
            n
            for n in tree.body
            if not (isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
        ]
        for node in body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("labs"):
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    deps.add(full if full in mods else node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("labs")}
        graph[name] = {d for d in deps if d in mods and d != name}
        if not name.endswith("__init__") and path.name != "__init__.py":
            defs = [
                n
                for n in body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Assign)
            ]
            assert defs or path.name == "__main__.py", f"{name} defines nothing: a re-export shim?"

    def package_of(m: str) -> str:
        return m if mods[m].name == "__init__.py" else m.rsplit(".", 1)[0]

    # a package's __init__ may import its own submodules; any other cycle is an error
    state: dict[str, int] = {}

    def visit(n: str, stack: list[str]) -> None:
        state[n] = 1
        for d in graph[n]:
            if mods[n].name == "__init__.py" and d.startswith(n + "."):
                continue
            if state.get(d) == 1:
                cycle = stack[stack.index(d) :] + [d] if d in stack else [n, d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d, [*stack, d])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    assert package_of("labs.parallel.pipeline.sim") == "labs.parallel.pipeline"


def test_index_names_every_subpackage():
    index = (LABS / "__init__.py").read_text()
    subpackages = sorted(p.parent.name for p in LABS.glob("*/__init__.py"))
    missing = [s for s in subpackages if f":mod:`labs.{s}`" not in index]
    assert not missing, f"labs/__init__.py does not describe {missing}"
