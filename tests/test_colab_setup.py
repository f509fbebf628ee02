"""The first cell of every lab installs labs on Colab (simulated) and does nothing elsewhere."""

from __future__ import annotations

import subprocess
import sys
import types

import yaml

from conftest import REPO
from labs.course.notebooks import setup_cell_source


def _run_setup_cell(monkeypatch, on_colab: bool) -> list:
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **kw: calls.append((a, kw)))
    if on_colab:
        google = types.ModuleType("google")
        colab = types.ModuleType("google.colab")
        google.colab = colab
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", colab)
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(setup_cell_source(), "<setup cell>", "exec"), {})
    return calls


def test_on_colab_it_pip_installs_labs_from_the_configured_repository(monkeypatch):
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    url, branch = config["repository"]["url"], config["repository"]["branch"]
    calls = _run_setup_cell(monkeypatch, on_colab=True)
    assert len(calls) == 1
    (cmd,), kwargs = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert f"dlsys-labs @ git+{url}@{branch}" in cmd
    assert "--no-deps" in cmd, "keep Colab's CUDA torch: install labs without dependencies"
    assert kwargs.get("check") is True


def test_elsewhere_it_does_nothing(monkeypatch):
    assert _run_setup_cell(monkeypatch, on_colab=False) == []


def test_launch_buttons_use_the_same_repository_setting():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert config["launch_buttons"]["binderhub_url"]
    assert config["html"]["use_repository_button"] is True
    assert config["repository"]["url"] in setup_cell_source()
