"""Every cell of the book that measures picks its device through the one helper, ``labs.device()``.

A code cell *measures* when it calls one of the project's timers or peak-memory functions
(:data:`MEASURING`: ``flops.time_fn`` and ``time_once``, both ``compare_times``,
``peak_memory_bytes``, ``latency_ms``, the matmul and bandwidth sweeps, the GPU probes,
``amp_step``) or a CUDA timing or memory API (:data:`CUDA_TIMING`: ``torch.cuda.Event``,
``torch.cuda.max_memory_allocated``, ...). Such a cell goes *through the helper* when

* its page sets ``dev = labs.device()`` (LABS_DEVICE, else CUDA, else the CPU), and
* every call of a measuring function in the cell passes ``device=``, so that the project's timer
  uses CUDA events and the memory is read on the device the tensors live on; a timer the page
  defines itself (lab 2's exercise) has no such argument, so the cell waits for the device with
  ``synchronize(dev)`` inside what it times;
* it calls no CUDA timing or memory API directly (the helper and the timer do that).

Check cells (tagged ``exercise-N``) are exempt: they are device-independent by design (a solution
right on the CPU is right on CUDA, the grader compares values on the CPU). The other exemptions are
listed in :data:`EXEMPT`, each with its reason.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

from conftest import REPO

MEASURING = {
    "time_fn", "time_once", "compare_times", "peak_memory_bytes", "latency_ms", "sweep",
    "measure_matmul", "peak_matmul_flops", "stream_bandwidth", "copy_bandwidth", "copy_sweep",
    "matmul_peaks", "copy_kernel_occupancy", "amp_step",
}  # fmt: skip
CUDA_TIMING = {
    "Event", "synchronize", "elapsed_time", "max_memory_allocated", "memory_allocated",
    "reset_peak_memory_stats", "max_memory_reserved", "memory_reserved",
}  # fmt: skip
CPU_ONLY = "the CPU is the device under study"
#: (page, a string unique to the cell): why the cell measures on the CPU on every machine
EXEMPT = {
    ("ch06-llm-services.md", "export.ort_logits(session, idx)"):
        "ONNX Runtime's CPU provider against eager PyTorch: both must run on the CPU",
    ("ch06-llm-services.md", "rag.exact_search(db, queries, 10)"):
        "FAISS on numpy arrays: CPU search",
    ("ch06-llm-services.md", '"parse + validate JSON"'):
        "the service's request path (JSON, tokenizer, HTTP) as its CPU server runs it",
    ("ch19-on-device-ai.md", "lat = measure.compare_times"):
        f"on-device inference: {CPU_ONLY} (a phone's or laptop's cores, ONNX Runtime, torch.ao)",
    ("ch19-on-device-ai.md", "lat4 = measure.compare_times"):
        f"on-device inference: {CPU_ONLY} (int4 files, torch.ao int8)",
    ("ch20-model-compression.md", "times = measure.compare_times"):
        "the table includes torch.ao's dynamic int8 (fbgemm), which runs on the CPU only: all "
        "variants are timed side by side there",
    ("ch22-quantization.md", '"torch.ao dynamic int8": lambda: q_lin(xb)'):
        "fbgemm's int8 kernels run on the CPU only; the next cell compares the GPU's kernels",
    ("lab08-gpu-memory.ipynb", "amortised_timer"):
        "lab 8 traces the CPU's cache levels with the student's copy_bandwidth (exercise 2); "
        "Chapter 8 probes the GPU",
    ("lab19-on-device.ipynb", 'onnx_path = export.to_onnx(pruned, workdir / "pruned.onnx")'):
        f"on-device inference: {CPU_ONLY} (the student's latency_ms, ONNX Runtime, torch.ao)",
}  # fmt: skip
PAGES = sorted((REPO / "book" / "chapters").glob("*.md")) + sorted(
    (REPO / "book" / "labs").glob("*.ipynb")
)


def code_cells(path):
    """``[(source, tags)]`` of the page's code cells (MyST chapters and notebooks)."""
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text())
        return [("".join(c["source"]), c.get("metadata", {}).get("tags", []))
                for c in nb["cells"] if c["cell_type"] == "code"]  # fmt: skip
    cells = []
    for m in re.finditer(r"```\{code-cell\}[^\n]*\n(.*?)```", path.read_text(), re.S):
        lines = m.group(1).splitlines()
        tags = next((re.findall(r"[\w-]+", line.split(":", 2)[2]) for line in lines
                     if line.startswith(":tags:")), [])  # fmt: skip
        cells.append(("\n".join(line for line in lines if not line.startswith(":")), tags))
    return cells


def parse(source: str) -> ast.Module:
    """The cell as Python, with IPython magics and shell lines blanked out."""
    return ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line
                               for line in source.splitlines()))  # fmt: skip


def called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def cuda_api(node: ast.AST) -> str | None:
    """``name`` if ``node`` is ``torch.cuda.<name>`` with a timing or memory name."""
    if isinstance(node, ast.Attribute) and node.attr in CUDA_TIMING:
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "cuda":
            return node.attr
    return None


def measuring_cells(path):
    """``[(cell source, problems)]`` for every measuring cell of the page that is not exempt."""
    cells = code_cells(path)
    own_timers = {n.name for src, _ in cells for n in ast.walk(parse(src))
                  if isinstance(n, ast.FunctionDef) and n.name in MEASURING}  # fmt: skip
    out = []
    for src, tags in cells:
        if any(re.fullmatch(r"(graded-)?exercise-\d+", t) for t in tags):
            continue
        tree = parse(src)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and called(n) in MEASURING]
        cuda = sorted({c for n in ast.walk(tree) if (c := cuda_api(n))})
        if not calls and not cuda:
            continue
        if any(page == path.name and key in src for page, key in EXEMPT):
            continue
        problems = [f"torch.cuda.{c} (use the helper's timer and peak memory)" for c in cuda]
        for call in calls:
            if any(k.arg == "device" for k in call.keywords):
                continue
            if called(call) in own_timers and "synchronize(dev)" in src:
                continue  # the page's own timer: what it times waits for the device
            problems.append(f"{called(call)}() without device= (line {call.lineno})")
        out.append((src, problems))
    return out


def sets_dev(path) -> bool:
    return any(re.search(r"^dev = labs\.device\(\)", src, re.M) for src, _ in code_cells(path))


def test_the_rule_finds_measuring_cells():
    """The definition is not vacuous: the book has measuring cells, and the rule flags a bad one."""
    found = {p.name: len(measuring_cells(p)) for p in PAGES}
    assert sum(found.values()) >= 25, found
    for name in ("ch02-preliminaries.md", "ch09-model-efficiency.md", "ch10-llm-inference.md",
                 "ch11-flashattention.md", "lab02-matmul-flops.ipynb", "lab09-roofline.ipynb"):  # fmt: skip
        assert found[name] >= 1, name
    bad = parse("t = flops.time_fn(lambda: a @ b)\nstart = torch.cuda.Event(enable_timing=True)")
    calls = [n for n in ast.walk(bad) if isinstance(n, ast.Call) and called(n) in MEASURING]
    assert calls and not calls[0].keywords
    assert {cuda_api(n) for n in ast.walk(bad)} >= {"Event"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_measuring_cells_use_the_device_helper(page):
    cells = measuring_cells(page)
    if not cells:
        return
    assert sets_dev(page), f"{page.name} measures but never sets dev = labs.device()"
    bad = [
        f"{src.strip().splitlines()[0][:70]!r}: {p}" for src, problems in cells for p in problems
    ]
    assert not bad, f"{page.name}:\n" + "\n".join(bad)


def test_every_exemption_names_a_cell():
    for page, key in EXEMPT:
        path = next(p for p in PAGES if p.name == page)
        hits = [src for src, _ in code_cells(path) if key in src]
        assert len(hits) >= 1, f"EXEMPT names no cell of {page}: {key!r}"
