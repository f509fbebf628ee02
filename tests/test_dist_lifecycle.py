"""A plain program's life on emulated ranks (``python -m labs.dist.run``), as under torchrun:
how a rank ends (``sys.exit``), where its process group starts and stops, how it gets one.

The reproductions the emulator was checked against are in ``tests/adversary/dist/min/``
(``tests/adversary/dist/run.py`` runs one emulated and under torchrun and compares).
"""

from __future__ import annotations

import sys

import pytest

from labs.dist.run import main, run_script


def _script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("import sys\nimport torch\nimport torch.distributed as dist\n" + body)
    return str(path)


@pytest.mark.parametrize("end", ["sys.exit(0)", "sys.exit(None)", "raise SystemExit(0)",
                                 "exit()", "sys.exit(r * 0)"])  # fmt: skip
def test_sys_exit_zero_ends_the_rank_normally(tmp_path, end):
    body = (
        "dist.init_process_group('gloo')\n"
        "r = dist.get_rank()\n"
        "print('rank', r, 'done')\n"
        "dist.destroy_process_group()\n"
        "if r == 0:\n"
        f"    {end}\n"
        "print('rank', r, 'after')\n"
    )
    path = _script(tmp_path, "ok.py", body)
    lines = run_script(path, 2, prefix=False)
    assert lines == [["rank 0 done"], ["rank 1 done", "rank 1 after"]]
    main(["--nproc_per_node", "2", path])  # returns: exit status 0, as torchrun's


def test_sys_exit_nonzero_fails_with_the_code(tmp_path, capsys):
    body = (
        "dist.init_process_group('gloo')\n"
        "r = dist.get_rank()\n"
        "print('rank', r, 'done')\n"
        "dist.barrier()  # both lines are printed before rank 1 leaves (then the run stops)\n"
        "dist.destroy_process_group()\n"
        "if r == 1:\n"
        "    sys.exit(3)\n"
    )
    path = _script(tmp_path, "fail.py", body)
    with pytest.raises(SystemExit) as info:  # torchrun: rc 1, "rank 1 ... exitcode: 3"
        main(["--nproc_per_node", "2", path])
    assert info.value.code == 1
    out = capsys.readouterr()
    assert "[default0]:rank 0 done" in out.out and "[default1]:rank 1 done" in out.out
    assert "rank 1 exitcode 3" in out.err


def test_a_rank_outside_the_world_is_torchs_dist_error(tmp_path):
    """gloo raises torch's DistError (a RuntimeError) for send(dst=world_size + 3), after the
    group's timeout; emulated: at once, a class that is that error (and a ValueError)."""
    body = (
        "dist.init_process_group('gloo')\n"
        "for kw in ({'dst': dist.get_world_size() + 3}, {'dst': None, 'group_dst': 7}):\n"
        "    try:\n"
        "        dist.send(torch.ones(1), **kw)\n"
        "    except dist.DistError as e:\n"
        "        print(isinstance(e, RuntimeError), isinstance(e, ValueError))\n"
        "dist.destroy_process_group()\n"
    )
    lines = run_script(_script(tmp_path, "dst.py", body), 2, prefix=False)
    assert lines == [["True True", "True True"]] * 2


def test_a_ranks_stdout_has_an_encoding_and_a_buffer(tmp_path):
    body = (
        "r = int(__import__('os').environ['RANK'])\n"
        "sys.stdout.buffer.write(f'bytes {r} \\u00e9\\n'.encode(sys.stdout.encoding))\n"
        "sys.stdout.buffer.flush()\n"
        "print(sys.stdout.encoding.lower().replace('-', '') in ('utf8', 'ascii'),\n"
        "      sys.stdout.isatty(), isinstance(sys.stdout.errors, str))\n"
        "sys.stdout.write(f'last {r}')\n"
    )
    lines = run_script(_script(tmp_path, "out.py", body), 2, prefix=False)
    assert lines == [[f"bytes {r} \u00e9", "True False True", f"last {r}"] for r in range(2)]


def test_the_scripts_folder_comes_first_on_sys_path(tmp_path, monkeypatch, capsys):
    """As for ``python script.py`` (and torchrun): a module next to the script imports."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "sibling_mod_for_labs_dist.py").write_text("VALUE = 42\n")
    path = _script(sub, "s.py", "import sibling_mod_for_labs_dist as m\nprint(m.VALUE)\n")
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    main(["--standalone", "--nproc_per_node", "2", path])  # torchrun's flag is accepted
    assert sys.path == before
    assert capsys.readouterr().out.splitlines() == ["[default0]:42", "[default1]:42"]


def test_a_module_runs_with_dash_m(tmp_path, monkeypatch, capsys):
    """``python -m labs.dist.run --nproc_per_node 2 -m pkg.mod``, as torchrun's ``-m``."""
    pkg = tmp_path / "labs_dist_pkg_for_dash_m"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    _script(pkg, "prog.py", "dist.init_process_group('gloo')\nprint(__name__, dist.get_rank())\n")
    monkeypatch.chdir(tmp_path)
    main(["--nproc_per_node", "2", "-m", "labs_dist_pkg_for_dash_m.prog"])
    assert capsys.readouterr().out.splitlines() == [
        "[default0]:__main__ 0",
        "[default1]:__main__ 1",
    ]
