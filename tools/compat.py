"""Run the labs where readers run them: on the lowest versions pyproject.toml admits, and on
Google Colab's preinstalled versions with the labs' own Colab set-up cell.

Usage: ``.venv/bin/python tools/compat.py [--profile lowest|colab ...] [--labs lab03 ...]``
(``tools/test.sh`` runs it beside pytest; ``--jobs`` notebooks run at once, default 2).

For each profile it uses a virtual environment outside the repository, kept between runs and
shared by every checkout on the machine (``$DLSYS_COMPAT_CACHE``, default
``~/.cache/dlsys-compat/<profile>-<hash of what it holds>``: its pins, torch, pyproject.toml's
requirements, this Python). It is built once, under a lock, and rebuilt only when what it holds
changes (a build no run has used for a week is removed); torch's multi-GB Linux wheel is
installed once per version into a base environment that the profiles hard-link. "The newest of
everything else" in ``lowest`` is the newest when its environment was built. The ``labs`` wheel built from this
checkout is never installed into a shared environment: it is unpacked into this run's folder
(``$DLSYS_COMPAT_DIR``, default ``/tmp/dlsys-compat-<hash of the checkout's path>``, removed at
the end under ``CI=true``) and put first on ``PYTHONPATH``. Then it:

* runs every lab's solution notebook top to bottom, each copied alone into an empty folder (so
  nothing of the repository can be read), and requires every exercise to print ``PASS`` or, for
  an optional component that is absent, ``N/A``;
* runs the emulator's tests (``tests/test_dist*.py`` but the slow torchrun ones, copied out)
  against the installed wheel.

Profiles:

``lowest``
    every runtime dependency at the lower bound of its range in ``pyproject.toml``
    (``numpy==1.26``, ``ipywidgets==7.7.1``, ...), without the optional ``triton`` (torch's Linux
    wheel brings it: it is uninstalled, as on a laptop without Triton wheels, so lab 11's Triton
    exercise must report "not applicable").
``colab``
    Colab's versions (``tools/compat/colab.txt``: numpy 2.0.2, pandas 2.2.2, ipywidgets 7.7.1,
    ipykernel 6.17.1, ...) preinstalled and held as constraints, ``google.colab`` importable, and
    the labs' set-up cell (:mod:`labs.course.colab`) installing what Colab lacks.

torch is, in ``lowest``, the lower bound of its range in pyproject.toml and, in ``colab``, the
version pinned in ``tools/compat/colab.txt`` (Colab's): both PyPI's Linux wheel, whose CUDA
libraries load but find no GPU here (``TORCH_SPEC`` overrides both). Each lab runs once per
profile, and no profile repeats the versions pytest runs the labs on (torch 2.13 and the newest
releases pyproject.toml admits).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLAB = REPO / "tools" / "compat" / "colab.txt"
#: where the environments live, kept between runs and shared by every checkout of this machine
CACHE = Path(os.environ.get("DLSYS_COMPAT_CACHE") or Path.home() / ".cache" / "dlsys-compat")
# What runs the notebooks and the tests inside a profile's environment (Colab has all but one).
RUNNER = ["ipykernel", "nbclient", "nbformat", "pytest", "hypothesis"]
DIST_TESTS = [
    "test_dist.py",
    "test_dist_collectives.py",
    "test_dist_compat.py",
    "test_dist_backend.py",
]
RESULT_RE = re.compile(r"^(PASS|N/A) exercise (\d+)", re.M)

FAKE_COLAB = '''"""Stands in for Colab's kernel, which has imported google.colab before any cell runs."""
import sys
import types

if "google.colab" not in sys.modules:
    sys.modules["google.colab"] = types.ModuleType("google.colab")
'''


def test_helpers(names: list[str], folder: Path = REPO / "tests") -> list[str]:
    """The modules of ``folder`` that the test files ``names`` import, directly or through each
    other (``import procgroup``): the emulator tests run from a copy of ``folder`` holding only
    what is listed, and a helper left behind fails their collection."""
    found: list[str] = []
    todo = list(names)
    while todo:
        text = (folder / todo.pop()).read_text(encoding="utf-8")
        for mod in re.findall(r"^\s*(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*)", text, re.M):
            name = f"{mod}.py"
            if (folder / name).is_file() and name not in found and name not in names:
                found.append(name)
                todo.append(name)
    return sorted(found)


def copy_tests(dest: Path) -> Path:
    """Copy the emulator tests, their conftest, helpers and programs into a fresh ``dest``."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in ["conftest.py", *DIST_TESTS, *test_helpers(DIST_TESTS)]:
        shutil.copy(REPO / "tests" / name, dest / name)
    shutil.copytree(REPO / "tests" / "dist_programs", dest / "dist_programs")
    return dest


def log(msg: str) -> None:
    print(f"compat: {msg}", flush=True)


def runtime_requirements() -> list[str]:
    """The ``[project] dependencies`` of pyproject.toml."""
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]


def lowest_pins() -> list[str]:
    """``name==lower`` for every runtime dependency (torch aside: see :func:`torch_spec`)."""
    pins = []
    for req in runtime_requirements():
        m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*>=\s*([0-9][^,;\s]*)", req)
        if not m:
            raise SystemExit(f"compat: {req!r} in pyproject.toml has no '>=' lower bound to test")
        if m.group(1).lower() != "torch":
            pins.append(f"{m.group(1)}=={m.group(2)}")
    return pins


def colab_pins() -> list[str]:
    """Colab's versions of what the labs touch (torch aside: see :func:`torch_spec`)."""
    return [p for p in _colab_lines() if not p.lower().startswith("torch==")]


def _colab_lines() -> list[str]:
    return [
        line.strip()
        for line in COLAB.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def torch_spec(profile: str) -> str:
    """The torch a profile runs: ``TORCH_SPEC`` if set, else the lowest version pyproject.toml
    admits (``lowest``) or Colab's (``colab``)."""
    if os.environ.get("TORCH_SPEC"):
        return os.environ["TORCH_SPEC"]
    if profile == "colab":
        pins = [p for p in _colab_lines() if p.lower().startswith("torch==")]
        if len(pins) != 1:
            raise SystemExit(f"compat: {COLAB} must pin torch once (torch==X.Y.Z)")
        return pins[0]
    for req in runtime_requirements():
        m = re.match(r"^torch\s*>=\s*([0-9][^,;\s]*)", req)
        if m:
            return f"torch=={m.group(1)}"
    raise SystemExit("compat: pyproject.toml has no 'torch>=' lower bound to test")


def pip(venv: Path, *args: str, env: dict | None = None) -> None:
    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"compat: {' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")


@contextlib.contextmanager
def locked(name: str):
    """An exclusive lock on ``CACHE/<name>.lock``: one build of an environment at a time, even
    from two checkouts or two CI runs on one machine."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _link(src: Path, dst: Path) -> None:
    """Hard-link ``src`` (a file or a folder) as ``dst``; copy where links cannot cross."""
    if subprocess.run(["cp", "-al", str(src), str(dst)]).returncode:
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dst)


def _canonical(spec: str) -> str:
    """``torch==2.11`` and ``torch==2.11.0`` are one version: the same base environment."""
    m = re.fullmatch(r"\s*torch\s*==\s*([0-9][^\s;]*)\s*", spec)
    if not m:
        return spec.strip()
    release, _, local = m.group(1).partition("+")
    parts = release.split(".")
    parts += ["0"] * (3 - len(parts))
    return "torch==" + ".".join(parts) + (f"+{local}" if local else "")


def torch_base(spec: str) -> Path:
    """A virtual environment holding only ``spec`` and what it requires, built once per spec and
    kept in :data:`CACHE`: every profile hard-links it (seconds) instead of unpacking torch's
    multi-GB Linux wheel again. Where this interpreter has that very torch, the base links it."""
    import importlib.metadata as md

    key = hashlib.sha256(json.dumps([_canonical(spec), sys.version]).encode()).hexdigest()[:16]
    base = CACHE / f"torch-{key}"
    with locked(base.name):
        if (base / ".stamp").exists():
            (base / ".stamp").touch()  # in use: not pruned
            return base
        t0 = time.perf_counter()
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(base)], check=True)
        try:
            dist = md.distribution("torch")
            same = spec == f"torch=={dist.version.split('+')[0]}"
        except md.PackageNotFoundError:
            same = False
        if same:
            src = Path(dist.locate_file(""))
            tops = {Path(f).parts[0] for f in dist.files or []} - {"..", "bin"}
            for top in sorted(tops):
                if (src / top).exists() and not (_site(base) / top).exists():
                    _link(src / top, _site(base) / top)
            pip(base, *[r for r in dist.requires or [] if "extra ==" not in r])
        else:
            pip(base, spec)
        (base / ".stamp").write_text(spec)
        log(f"{spec}: installed once in {time.perf_counter() - t0:.0f} s ({base})")
    return base


def link_base(base: Path, venv: Path) -> None:
    """Hard-link every distribution of ``base`` into ``venv`` (pip's and setuptools' own aside;
    scripts are not linked). pip replaces a linked package by unlinking it, never in place."""
    own = {p.name.split("-")[0].lower() for p in _site(venv).iterdir()}
    for entry in sorted(_site(base).iterdir()):
        name = entry.name.split("-")[0].lower()
        if name in own or name in ("pip", "setuptools", "_distutils_hack", "pkg_resources"):
            continue
        _link(entry, _site(venv) / entry.name)


def build_env(profile: str, overlay: Path) -> Path:
    """The profile's virtual environment in :data:`CACHE`, built once for what it holds (its
    pins, torch, the runner, pyproject.toml's requirements, this Python) and then reused by every
    checkout and run; an older build of the profile is removed. The checkout's wheel is never
    installed into it: ``overlay`` (the wheel unpacked for this run) comes first on PYTHONPATH."""
    torch_req = torch_spec(profile)
    pins = lowest_pins() if profile == "lowest" else colab_pins()
    stamp = hashlib.sha256(
        json.dumps([pins, RUNNER, torch_req, sys.version, runtime_requirements()]).encode()
    ).hexdigest()
    venv = CACHE / f"{profile}-{stamp[:16]}"
    with locked(profile):
        if not (venv / ".stamp").exists() or (venv / ".stamp").read_text() != stamp:
            t0 = time.perf_counter()
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            link_base(torch_base(torch_req), venv)
            if profile == "lowest":
                # the lowest allowed version of each dependency, the newest of everything else
                pip(venv, torch_req, *pins, *RUNNER)
                # no Triton, as on a laptop without its wheels (torch's Linux wheel requires it)
                uninstall = [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y",
                             "triton"]  # fmt: skip
                subprocess.run(uninstall, capture_output=True, check=True)
            else:
                # Colab's preinstalled packages (those the labs touch), nothing else of the labs'
                pip(venv, "-c", str(COLAB), *[p.split("==")[0] for p in pins], "hypothesis")
                (_site(venv) / "_dlsys_fake_colab.py").write_text(FAKE_COLAB)
                (_site(venv) / "_dlsys_fake_colab.pth").write_text("import _dlsys_fake_colab\n")
            prepare(profile, venv, overlay)
            (venv / ".stamp").write_text(stamp)
            log(f"{profile}: environment built in {time.perf_counter() - t0:.0f} s ({venv})")
        else:
            (venv / ".stamp").touch()  # in use: not pruned (below) while it is
            log(f"{profile}: environment reused ({venv})")
        prune()
    shown = ["torch", "numpy", "pandas", "matplotlib", "ipywidgets", "ipykernel", "onnxruntime"]
    have = versions(venv)
    log(f"{profile}: {', '.join(f'{n} {have.get(n)}' for n in shown)}")
    return venv


def versions(venv: Path | None = None) -> dict[str, str | None]:
    """The versions of the package's runtime requirements and ipykernel in ``venv`` (``None``:
    the interpreter running this script, the one pytest runs the labs with)."""
    names = [re.match(r"[A-Za-z0-9_.\-]+", r).group(0) for r in runtime_requirements()]
    probe = (
        "import importlib.metadata as m, json\n"
        "def v(n):\n    try:\n        return m.version(n)\n    except m.PackageNotFoundError:\n"
        f"        return None\nprint(json.dumps({{n: v(n) for n in {[*names, 'ipykernel']!r}}}))"
    )
    python = str(venv / "bin" / "python") if venv else sys.executable
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def prune(days: float = 7) -> None:
    """Remove environments no run has used for ``days`` (another branch may still be using an
    older build, so none is removed merely for being older)."""
    cutoff = time.time() - days * 86400
    for path in CACHE.iterdir() if CACHE.is_dir() else []:
        stamp = path / ".stamp"
        if path.is_dir() and stamp.exists() and stamp.stat().st_mtime < cutoff:
            shutil.rmtree(path, ignore_errors=True)
            log(f"removed {path} (unused for {days:g} days)")


def prepare(profile: str, venv: Path, overlay: Path) -> None:
    """With this run's wheel on the path: ``lowest`` must already hold every requirement of the
    package (nothing is installed); on ``colab`` the labs' own set-up cell installs what Colab
    lacks, keeping Colab's versions (as on Colab, where ``labs`` comes without its dependencies)."""
    env = profile_env(profile, overlay)
    if profile == "lowest":
        code = "from labs.course.colab import missing_requirements as m; print(*m()[0])"
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env
        )
        if done.returncode or done.stdout.strip():
            raise SystemExit(
                f"compat: lowest: the pins miss requirements of the package: "
                f"{done.stdout.strip()} {done.stderr[-2000:]}"
            )
        return
    setup = subprocess.run(
        [str(venv / "bin" / "python"), "-c", setup_cell()], capture_output=True, text=True, env=env
    )
    if setup.returncode:
        raise SystemExit(f"compat: colab: the set-up cell failed:\n{setup.stdout}{setup.stderr}")


def setup_cell() -> str:
    sys.path.insert(0, str(REPO))
    from labs.course.setup_cell import setup_cell_source

    return setup_cell_source()


def profile_env(profile: str, overlay: Path) -> dict:
    """The environment a profile's notebooks and tests run with: this run's ``labs`` (the wheel
    unpacked in ``overlay``) first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.pop("MPLBACKEND", None)
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONPATH"] = str(overlay)
    if profile == "colab":
        # pip keeps Colab's versions of what is preinstalled (and the machine's own constraints)
        extra = os.environ.get("PIP_CONSTRAINT", "")
        cfg = Path("/etc/xdg/pip/constraints.txt")
        env["PIP_CONSTRAINT"] = " ".join(
            x for x in (str(COLAB), extra, str(cfg) if cfg.exists() else "") if x
        )
    return env


def run_notebook(venv: Path, lab: Path, folder: Path, env: dict, timeout: int) -> str:
    """Execute ``lab`` alone in ``folder`` with ``venv``'s kernel; '' or what went wrong."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(lab, folder / lab.name)
    proc = subprocess.run(
        [str(venv / "bin" / "python"), str(Path(__file__)), "--execute", lab.name, str(timeout)],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode == 0:  # the last line says what passed and what was not applicable
        return Ok(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "")
    return (proc.stdout + proc.stderr)[-3000:]


class Ok(str):
    """A job that succeeded, with what it says about itself."""


def run_tests(cmd: list[str], folder: Path, env: dict) -> str:
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env=env)
    if proc.returncode == 0:
        return Ok(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "")
    return (proc.stdout + proc.stderr)[-3000:]


def timed(fn, *args):
    t0 = time.perf_counter()
    return fn(*args), time.perf_counter() - t0


def execute(name: str, timeout: int) -> int:
    """(Inside a profile's environment.) Run notebook ``name`` from the current folder; exit 1
    unless every cell runs and every exercise prints PASS or N/A."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(name, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3").execute(cwd=".")
    if "google.colab" in sys.modules:  # set up before: a second run is quiet
        first = next(c for c in nb.cells if c.cell_type == "code")
        if first.outputs:
            print(f"the set-up cell printed something on its second run: {first.outputs}")
            return 1
    text = "\n".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )
    tags = {
        int(t.split("-")[1])
        for c in nb.cells
        for t in c.get("metadata", {}).get("tags", [])
        if re.fullmatch(r"exercise-\d+", t)
    }
    results = {int(n): kind for kind, n in RESULT_RE.findall(text)}
    missing = sorted(tags - set(results))
    if missing:
        print(f"exercises without a PASS or N/A line: {missing}")
        return 1
    na = [n for n, kind in sorted(results.items()) if kind == "N/A"]
    print(f"{len(tags) - len(na)} exercises pass" + (f", not applicable: {na}" if na else ""))
    return 0


def unpack(wheel: Path, overlay: Path) -> Path:
    """This checkout's wheel installed into ``overlay`` alone (``pip --target``, no dependencies):
    what a profile's environment imports as ``labs``, with its metadata (``dlsys-labs``)."""
    shutil.rmtree(overlay, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target",
           str(overlay), str(wheel)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    return overlay


def build_wheel(dest: Path) -> Path:
    """Build the wheel of this checkout into ``dest`` from a copy of the package's sources
    (setuptools writes scratch folders beside them: never into the checkout, never two builds
    in one folder)."""
    shutil.rmtree(dest, ignore_errors=True)
    src = dest / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "labs", src / "labs", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(dest), str(src)],
        check=True,
        cwd=dest,
    )
    shutil.rmtree(src)
    return next(dest.glob("dlsys_labs-*.whl"))


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--execute":
        return execute(sys.argv[2], int(sys.argv[3]))
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--build-wheel":
        print(build_wheel(Path(sys.argv[2]).resolve()))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", nargs="+", choices=["lowest", "colab"])
    parser.add_argument("--labs", nargs="+", help="only these labs (name prefixes)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("COMPAT_JOBS", 2)))
    parser.add_argument("--timeout", type=int, default=300, help="per-cell timeout (s)")
    args = parser.parse_args(argv)
    profiles = args.profile or ["lowest", "colab"]
    # one folder per checkout: two checkouts on one machine never share environments
    tag = hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
    work = Path(os.environ.get("DLSYS_COMPAT_DIR", f"/tmp/dlsys-compat-{tag}")).resolve()
    if work == REPO or REPO in work.parents:
        raise SystemExit(f"compat: DLSYS_COMPAT_DIR={work} must lie outside the repository")
    labs = sorted((REPO / "book" / "labs").glob("*.ipynb"))
    if args.labs:
        labs = [p for p in labs if any(p.name.startswith(x) for x in args.labs)]
    t0 = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    overlay = unpack(build_wheel(work / "dist"), work / "overlay")
    failures: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        envs = {p: pool.submit(build_env, p, overlay) for p in profiles}
        jobs = {}
        mine = versions()
        for profile in profiles:
            venv = envs[profile].result()
            if versions(venv) == mine:  # pytest runs every lab on these very versions already
                log(f"{profile}: the versions pytest runs the labs on; not run twice")
                continue
            env = profile_env(profile, overlay)
            tests = copy_tests(work / "tests" / profile)
            cmd = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            jobs[pool.submit(timed, run_tests, cmd, tests, env)] = (profile, "emulator tests")
            for lab in labs:
                folder = work / "run" / profile / lab.stem
                fut = pool.submit(timed, run_notebook, venv, lab, folder, env, args.timeout)
                jobs[fut] = (profile, lab.stem)
        for fut in concurrent.futures.as_completed(jobs):
            profile, what = jobs[fut]
            out, seconds = fut.result()
            ok = isinstance(out, Ok)
            log(f"{profile}: {what}: {out if ok else 'FAILED'} ({seconds:.0f} s)")
            if not ok:
                failures.append(f"--- {profile}: {what}\n{out}")
    for text in failures:
        print(text)
    log(
        f"{len(failures)} failure(s); {len(labs)} labs and the emulator tests on "
        f"{', '.join(profiles)} in {time.perf_counter() - t0:.0f} s"
    )
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") and not os.environ.get(
        "DLSYS_COMPAT_DIR"
    ):  # a CI clone is used once: its run folder goes (the environments stay in CACHE)
        shutil.rmtree(work, ignore_errors=True)
        log(f"removed {work} (CI)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
