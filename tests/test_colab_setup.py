"""The first cell of every lab: on Colab (simulated) it installs labs and what the labs need,
keeping Colab's torch; elsewhere it does nothing.  tools/compat.py runs it for real on Colab's
versions (the "colab" profile of tools/test.sh)."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
import types

import pytest
import yaml

from conftest import REPO
from labs.course import colab
from labs.course.setup_cell import setup_cell_source


def _run_setup_cell(monkeypatch, on_colab: bool, installed: bool = True) -> tuple[list, list]:
    pip_calls, installs = [], []
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda *a, **kw: pip_calls.append(a[0]) or types.SimpleNamespace(returncode=0),  # fmt: skip
    )
    monkeypatch.setattr(colab, "install_requirements", lambda: installs.append(True))
    real_version = md.version
    if not installed:

        def version(name):
            if name == "dlsys-labs":
                raise md.PackageNotFoundError(name)
            return real_version(name)

        monkeypatch.setattr(md, "version", version)
    if on_colab:
        google = types.ModuleType("google")
        google.colab = types.ModuleType("google.colab")
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", google.colab)
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(setup_cell_source(), "<setup cell>", "exec"), {})
    return pip_calls, installs


def test_on_colab_it_installs_labs_from_the_configured_repository_then_its_requirements(
    monkeypatch,
):
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    url, branch = config["repository"]["url"], config["repository"]["branch"]
    calls, installs = _run_setup_cell(monkeypatch, on_colab=True, installed=False)
    assert len(calls) == 1
    cmd = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert f"dlsys-labs @ git+{url}@{branch}" in cmd
    assert "--no-deps" in cmd, "keep Colab's CUDA torch: labs itself goes in without dependencies"
    assert installs == [True], "then the requirements, all but torch"


def test_on_colab_a_second_run_does_not_reinstall_labs(monkeypatch):
    calls, installs = _run_setup_cell(monkeypatch, on_colab=True, installed=True)
    assert calls == [] and installs == [True]


def test_on_colab_a_failed_install_says_what_to_do(monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **kw: types.SimpleNamespace(returncode=1))
    monkeypatch.setattr(md, "version", lambda name: (_ for _ in ()).throw(md.PackageNotFoundError))
    google = types.ModuleType("google.colab")
    monkeypatch.setitem(sys.modules, "google.colab", google)
    with pytest.raises(RuntimeError, match="could not install dlsys-labs @ git.*internet"):
        exec(compile(setup_cell_source(), "<setup cell>", "exec"), {})


def test_elsewhere_it_does_nothing(monkeypatch):
    assert _run_setup_cell(monkeypatch, on_colab=False) == ([], [])


def test_launch_buttons_use_the_same_repository_setting():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert config["launch_buttons"]["binderhub_url"]
    assert config["html"]["use_repository_button"] is True
    assert config["repository"]["url"] in setup_cell_source()


# -- labs.course.colab.install_requirements -----------------------------------------------------
def _fake_env(monkeypatch, requires: list[str], versions: dict[str, str]):
    monkeypatch.setattr(colab.md, "requires", lambda dist: requires)

    def version(name):
        if name.lower() not in versions:
            raise md.PackageNotFoundError(name)
        return versions[name.lower()]

    monkeypatch.setattr(colab.md, "version", version)
    calls = []

    def run(cmd, **kw):
        constraints = cmd[cmd.index("-c") + 1]
        calls.append((cmd, open(constraints).read().split()))
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(colab.subprocess, "run", run)
    return calls


COLAB_LIKE = {"torch": "2.11.0+cu128", "numpy": "2.0.2", "ipywidgets": "7.7.1"}
REQUIRES = [
    "torch>=2.11,<2.14",
    "numpy>=1.26,<3",
    "ipywidgets>=7.7.1,<9",
    "sacrebleu>=2.4,<3",
    "onnxruntime>=1.18,<2",
    'pytest>=8; extra == "test"',
    "triton>=3; extra == \"triton\" and platform_system == 'Linux'",
]


def test_installs_only_what_is_missing_and_holds_torch_and_the_rest(monkeypatch, capsys):
    calls = _fake_env(monkeypatch, REQUIRES, COLAB_LIKE)
    assert colab.install_requirements() == ["sacrebleu<3,>=2.4", "onnxruntime<2,>=1.18"]
    (cmd, held), = calls  # fmt: skip
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert not any(a.startswith(("torch", "pytest", "triton")) for a in cmd[4:])
    assert sorted(held) == ["ipywidgets==7.7.1", "numpy==2.0.2", "torch==2.11.0+cu128"]
    out = capsys.readouterr().out
    assert out == "Set-up: installed 2 packages the labs need; kept torch 2.11.0+cu128.\n"


def test_second_run_installs_nothing_and_prints_nothing(monkeypatch, capsys):
    calls = _fake_env(
        monkeypatch, REQUIRES, {**COLAB_LIKE, "sacrebleu": "2.5", "onnxruntime": "1.2"}
    )
    # onnxruntime 1.2 is too old: it is the only one to install
    assert colab.install_requirements() == ["onnxruntime<2,>=1.18"]
    calls.clear()
    monkeypatch.setattr(
        colab.md, "version", lambda n: {**COLAB_LIKE, "sacrebleu": "2.5", "onnxruntime": "1.20"}[n]
    )
    capsys.readouterr()
    assert colab.install_requirements() == [] and calls == []
    assert capsys.readouterr().out == ""


def test_a_failed_install_names_the_packages_and_quotes_pip(monkeypatch):
    _fake_env(monkeypatch, REQUIRES, COLAB_LIKE)
    monkeypatch.setattr(
        colab.subprocess,
        "run",
        lambda cmd, **kw: types.SimpleNamespace(
            returncode=1, stdout="", stderr="ERROR: No matching distribution found for sacrebleu"
        ),
    )
    with pytest.raises(RuntimeError) as err:
        colab.install_requirements()
    text = str(err.value)
    assert "sacrebleu" in text and "torch==2.11.0+cu128" in text and "internet" in text
    assert text.endswith("No matching distribution found for sacrebleu")


def test_the_installed_package_itself_needs_nothing_here():
    # this environment has every requirement: the cell would install nothing
    missing, held = colab.missing_requirements()
    assert missing == [], f"the project's own environment lacks {missing}"
    assert any(h.startswith("torch==") for h in held)
