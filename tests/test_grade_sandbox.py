"""The grading sandbox: its own folder and package copy, no grader variables, killed on timeout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labs.course.isolation import isolation_available
from labs.course.sandbox import Sandbox


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state  # a zombie waiting for its parent is dead


@pytest.fixture(scope="module")
def box():
    with Sandbox() as b:
        yield b


def test_folder_package_and_environment(box):
    r = box.run(
        "import os, labs\nprint(os.getcwd())\nprint(labs.__file__)\n"
        "print(sorted(k for k in os.environ if k.startswith('LABS') or k == 'PWD'))",
        timeout=30,
    )
    cwd, package, leaked = r.stdout.splitlines()
    assert r.status == "ok" and cwd == str(box.dir / "work")
    assert package == str(box.package_dir / "__init__.py")
    assert not (Path(package).parents[1] / "book").exists()
    assert leaked == "[]"


def test_a_new_sandbox_drops_grader_variables():
    os.environ["LABS_GRADE_RECORD"] = "/tmp/should-not-leak"
    try:
        with Sandbox() as b:
            r = b.run("import os\nprint(os.environ.get('LABS_GRADE_RECORD'))", timeout=30)
    finally:
        del os.environ["LABS_GRADE_RECORD"]
    assert r.stdout.strip() == "None"


@pytest.mark.skipif(bool(isolation_available()), reason=isolation_available() or "isolated")
def test_no_network_but_loopback_works(box):
    r = box.run(
        "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=2)\n"
        "except OSError as err:\n    print(type(err).__name__)\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "socket.create_connection(s.getsockname(), timeout=2).close(); print('loopback')",
        timeout=30,
    )
    assert r.status == "ok", r
    assert r.stdout.split() == ["OSError", "loopback"]


def _sleepers(marker: str) -> list[int]:
    """Host pids of live ``sleep <marker>`` processes (the kernel sees its own pid numbers)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and (proc / "cmdline").read_bytes() == f"sleep\0{marker}\0".encode()
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return [p for p in found if _alive(p)]


def test_timeout_kills_the_process_group_even_if_sigint_is_ignored():
    with Sandbox() as b:
        r = b.run("import subprocess\nprint(subprocess.Popen(['sleep', '301.25']).pid)", timeout=30)
        (child,) = _sleepers("301.25")
        r = b.run(
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
            timeout=2,
        )
        assert (r.status, r.error) == ("timeout", "timeout after 2 s")
        assert not b.alive() and not _alive(child)
        assert b.run("print(1)", timeout=5).status == "died"
    assert b.dir is None  # the folder is gone
