"""tools/gpu-check.sh on a CPU machine: its plan (--list), its one-line exit without CUDA, and its
runner and report (on two tiny pages, with --allow-cpu)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
import gpu_check  # noqa: E402

SCRIPT = ["bash", str(REPO / "tools" / "gpu-check.sh")]
ENV = {"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}


def run(*args, env=ENV):
    return subprocess.run([*SCRIPT, *args], capture_output=True, text=True, timeout=120, env=env)


def test_list_names_every_page_and_the_gpu_tests():
    out = run("--list")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    pages = {line.split()[-1] for line in lines if line.strip().startswith("page")}
    want = {str(p.relative_to(REPO)) for p in gpu_check.CHAPTERS + gpu_check.LABS}
    assert pages == want and len(pages) >= 44
    tests = [line.split()[-1] for line in lines if line.strip().startswith("tests")]
    assert "tests/test_gpu.py" in tests and "tests/test_triton_attention.py" in tests
    assert all((REPO / t).exists() for t in tests)


def test_quick_list_is_the_gpu_pages():
    out = run("--quick", "--list")
    pages = [
        line.split()[-1] for line in out.stdout.splitlines() if line.strip().startswith("page")
    ]
    assert out.returncode == 0 and 10 <= len(pages) < 44
    assert all(p.split("/")[-1].split("-")[0] in gpu_check.QUICK for p in pages)
    assert every_quick_name_is_a_page()


def every_quick_name_is_a_page() -> bool:
    names = {p.name.split("-")[0] for p in gpu_check.CHAPTERS + gpu_check.LABS}
    missing = set(gpu_check.QUICK) - names
    assert not missing, f"QUICK names pages that do not exist: {missing}"
    return True


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_one_line_and_exit_0():
    out = run()
    assert out.returncode == 0
    assert out.stdout.count("\n") == 1 and out.stdout.startswith("gpu-check: no CUDA GPU"), (
        out.stdout
    )
    assert "nothing to check" in out.stdout


PAGE = """---
jupytext:
  text_representation: {{extension: .md, format_name: myst}}
kernelspec: {{display_name: Python 3, language: python, name: python3}}
---

# A page

```{{code-cell}} ipython3
import labs
print(labs.device())
{body}
```
"""


def test_runner_and_report_on_a_cpu(tmp_path):
    ok, bad = tmp_path / "ok.md", tmp_path / "bad.md"
    ok.write_text(PAGE.format(body="x = 1"))
    bad.write_text(PAGE.format(body="raise ValueError('broken on purpose')"))
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gpu_check.py"), "--allow-cpu", "--no-tests",
         "--jobs", "2", "--page", str(ok), str(bad), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr  # one page failed
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    status = {r["page"].split("/")[-1]: r["status"] for r in report["pages"]}
    assert status == {"ok.md": "PASS", "bad.md": "FAIL"}
    assert "broken on purpose" in report["pages"][1]["error"]
    env = report["environment"]
    assert env["torch"] == torch.__version__ and env["date"].endswith("UTC")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "**1 failed**" in md and "| torch |" in md and "| PASS |" in md and "| FAIL |" in md


def test_junit_results(tmp_path):
    xml = tmp_path / "t.xml"
    xml.write_text(
        '<testsuites><testsuite><testcase classname="tests.test_gpu" name="test_a" time="1.5"/>'
        '<testcase classname="tests.test_gpu" name="test_b" time="0.1"><failure message="boom"/>'
        '</testcase><testcase classname="tests.test_gpu" name="test_c" time="0">'
        '<skipped message="needs sm80"/></testcase></testsuite></testsuites>'
    )
    got = gpu_check.parse_junit(xml)
    assert [(r["test"], r["status"]) for r in got] == [
        ("test_gpu::test_a", "PASS"), ("test_gpu::test_b", "FAIL"), ("test_gpu::test_c", "SKIP")
    ]  # fmt: skip
    assert got[1]["message"] == "boom" and got[0]["seconds"] == 1.5
