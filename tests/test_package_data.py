"""Everything a lab loads ships in the wheel, and no lab reads the repository by a relative path.

(tools/compat.py, part of tools/test.sh, installs that wheel into fresh environments and runs every
lab alone in an empty folder.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile

from conftest import LABS, REPO


def test_the_wheel_holds_every_file_of_the_package(tmp_path):
    # the wheel tools/compat.py installs, built the same way
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "compat.py"), "--build-wheel", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wheel = out.strip().splitlines()[-1]
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(
        ["git", "ls-files", "labs"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    if not tracked:  # not a git checkout: every file on disk
        tracked = [str(p.relative_to(REPO)) for p in (REPO / "labs").rglob("*") if p.is_file()]
    wanted = [f for f in tracked if "__pycache__" not in f and not f.endswith(".pyc")]
    missing = [f for f in wanted if f not in names]
    assert not missing, (
        f"not in the wheel: {missing}; add them to [tool.setuptools.package-data] in pyproject.toml"
    )
    assert any(n.endswith(".txt") for n in names) and any(n.endswith(".pt") for n in names)


# a path into the checkout: ../, book/, labs/<data>, instructor/, student/, tests/, tools/
REPO_PATH = re.compile(r"""["'](\.\./|(book|labs|instructor|student|tests|tools)/[\w./-]+)""")


def test_no_lab_reads_the_repository_by_a_relative_path():
    found = []
    for lab in LABS:
        nb = json.loads(lab.read_text())
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "code":
                for m in REPO_PATH.finditer("".join(cell["source"])):
                    found.append(f"{lab.name}, cell {i}: {m.group(0)}")
    assert not found, (
        "labs must load data from the package (importlib.resources), not the checkout: "
        + str(found)
    )
