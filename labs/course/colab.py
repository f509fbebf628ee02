"""What the first cell of every lab does on Google Colab: install the packages the labs need.

The set-up cell (:func:`labs.course.setup_cell.setup_cell_source`) installs ``labs`` itself with
``pip install --no-deps`` and then calls :func:`install_requirements`, which installs the
requirements of ``dlsys-labs`` that the runtime lacks (on Colab: ``sacrebleu``, ``onnxruntime``,
``faiss-cpu``, ...) while holding what is already there at its installed version: Colab's own
CUDA build of torch above all, and numpy, pandas, ipywidgets, which a running kernel may have
imported already.  Running it again installs nothing and prints nothing.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import subprocess
import sys
import tempfile

__all__ = ["missing_requirements", "install_requirements"]

DIST = "dlsys-labs"
# Never installed or upgraded by the set-up cell: Colab's CUDA build stays (the labs are tested
# with torch 2.13; see the appendix "Running the labs").
KEEP = ("torch",)


def _requirement_class():
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - pip always vendors it
        from pip._vendor.packaging.requirements import Requirement
    return Requirement


def _requirements(dist: str) -> list:
    Requirement = _requirement_class()
    reqs = []
    for text in md.requires(dist) or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra (book, test, triton) or another platform's requirement
        reqs.append(req)
    return reqs


def _installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def missing_requirements(dist: str = DIST) -> tuple[list[str], list[str]]:
    """``(missing, held)``: the requirements of ``dist`` this environment does not satisfy
    (torch aside), and ``name==version`` pins of the installed packages pip must not change.

    Raises:
        importlib.metadata.PackageNotFoundError: ``dist`` is not installed.
    """
    missing, held = [], []
    for req in _requirements(dist):
        version = _installed(req.name)
        if version is not None and (
            req.name.lower() in KEEP or req.specifier.contains(version, prereleases=True)
        ):
            held.append(f"{req.name}=={version}")
        elif req.name.lower() not in KEEP:
            missing.append(str(req))
    for name in KEEP:  # also when no requirement names it
        version = _installed(name)
        if version is not None and f"{name}=={version}" not in held:
            held.append(f"{name}=={version}")
    return missing, held


def install_requirements(dist: str = DIST) -> list[str]:
    """Install the requirements of ``dist`` that are missing; return them (``[]`` if none).

    Prints one line when it installs something, nothing otherwise.

    Raises:
        RuntimeError: pip failed; the message names the packages and ends with pip's own words.
    """
    missing, held = missing_requirements(dist)
    if not missing:
        return []
    fd, constraints = tempfile.mkstemp(prefix="labs-keep-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(held) + "\n")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "-c", constraints, *missing]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.unlink(constraints)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise RuntimeError(
            f"Set-up: installing what the labs need failed ({', '.join(missing)}), keeping "
            f"{', '.join(held) or 'nothing'}. Check that the runtime is connected to the internet "
            "and run this cell again; if it fails again, use Runtime > Disconnect and delete "
            "runtime, then run the notebook from the top. pip said:\n" + "\n".join(said)
        )
    importlib.invalidate_caches()
    torch = next((h for h in held if h.startswith("torch==")), None)
    kept = f"; kept {torch.replace('==', ' ')}" if torch else ""
    print(f"Set-up: installed {len(missing)} packages the labs need{kept}.", flush=True)
    return missing
