"""pyproject.toml (pip) and environment.yml (conda) must list the same dependencies."""

from __future__ import annotations

import re

import tomllib
import yaml

from conftest import REPO


def _normalise(req: str) -> str:
    name, spec = re.match(r"^([A-Za-z0-9_.\-\[\]]+)\s*(.*)$", req.strip()).groups()
    name = re.sub(r"[-_.]+", "-", name).lower()
    return name + "".join(sorted(spec.replace(" ", "").split(",")))


def pip_requirements() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs.extend(extra)
    return {_normalise(r) for r in reqs}


def conda_requirements() -> set[str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {_normalise(r) for r in pip_section if not r.startswith("-e")}


def test_environment_yml_matches_pyproject():
    pip, conda = pip_requirements(), conda_requirements()
    assert pip == conda, (
        f"only in pyproject.toml: {sorted(pip - conda)}; only in environment.yml: "
        f"{sorted(conda - pip)}. Edit both so they list the same packages and ranges."
    )


def test_torch_range_admits_the_cpu_build_on_disk():
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (torch_req,) = [Requirement(r) for r in project["dependencies"] if r.startswith("torch")]
    assert "2.13.0" in torch_req.specifier, f"{torch_req} must admit 2.13.0 (the CPU build here)"
    assert torch_req.specifier.filter(["2.13.0", "3.0.0"]) is not None
    assert "3.0.0" not in torch_req.specifier, f"{torch_req} needs an upper bound"


def test_colab_torch_and_the_lowest_torch_are_what_compat_runs():
    """tools/compat.py runs the lowest torch the range admits and Colab's: both must be admitted."""
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (torch_req,) = [Requirement(r) for r in project["dependencies"] if r.startswith("torch")]
    lines = (REPO / "tools" / "compat" / "colab.txt").read_text().splitlines()
    (colab,) = [line.split("==")[1] for line in lines if line.startswith("torch==")]
    assert colab in torch_req.specifier, f"Colab's torch {colab} is outside {torch_req}"
    lowest = [s.version for s in torch_req.specifier if s.operator == ">="]
    assert lowest and lowest[0] in torch_req.specifier, f"{torch_req} needs a '>=' lower bound"


def test_setup_script_pins_torch():
    text = (REPO / "tools" / "setup.sh").read_text()
    assert "TORCH_SPEC:-torch==2.13.0" in text
    assert '"$TORCH_SPEC" -e ".[book,test]"' in text, "torch must be named in the same pip command"


def test_compat_copy_of_the_emulator_tests_collects(tmp_path):
    """tools/compat.py runs the emulator tests from a copy of tests/ that holds only what it lists:
    every helper module they import must travel with them (``procgroup`` once did not, and the
    compat sweep failed on collection in CI)."""
    import importlib.util
    import subprocess
    import sys

    spec = importlib.util.spec_from_file_location("compat", REPO / "tools" / "compat.py")
    compat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compat)
    assert "procgroup.py" in compat.test_helpers(compat.DIST_TESTS)
    dest = compat.copy_tests(tmp_path / "tests")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=dest,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
