"""Run each adversary program emulated and under torchrun (gloo) and compare per-rank output.

    .venv/bin/python tests/adversary/dist/run.py [PROGRAM.py ...] [--nproc 2,3,4] [--timeout 180]

Each program is a plain ``torch.distributed`` script.  It may declare the world sizes it is
meant for in a line ``# nproc: 2 3 4`` (default 2).  Only lines a rank prints that start with
``OUT `` are compared; every other line (warnings, logs) is ignored.  For every world size the
script runs

* emulated:  ``python -m labs.dist.run --nproc_per_node N prog.py``
* torchrun:  ``python -m torch.distributed.run --standalone --nproc_per_node N --tee 3 prog.py``

each in a fresh empty working directory (``ADV_TMP`` points to it; programs that write files
use it) and under a wall-clock limit: a run past it is killed and reported as a hang.
The verdict per (program, N): ``equal`` (same OUT lines on every rank and both exits 0, or both
non-zero), ``different`` (first differing line shown), ``hang`` or ``crash``.
Not part of the test suite: it is an adversary's probe of the emulator.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PREFIX = re.compile(r"^\[(?:default)?(\d+)\]:(.*)$")


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc), so a timed-out run leaves nothing behind."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _run(cmd, cwd, timeout, env):
    t0 = time.time()
    p = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        kids = _descendants(p.pid)  # torchrun's workers may sit in sessions of their own
        os.killpg(p.pid, signal.SIGKILL)
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out, _ = p.communicate()
        rc = "TIMEOUT"
    return rc, out, time.time() - t0


def _per_rank(out):
    ranks: dict[int, list[str]] = {}
    for line in out.splitlines():
        m = PREFIX.match(line)
        if not m:
            continue
        text = m.group(2).strip()
        if text.startswith("OUT "):
            ranks.setdefault(int(m.group(1)), []).append(text[4:])
    return ranks


def _directive(prog: Path, key: str):
    for line in prog.read_text().splitlines():
        if line.startswith(f"# {key}:"):
            return line.split(":", 1)[1].split()
    return None


def _plans(prog: Path, nproc_override):
    """[(label, [(n, args), ...])]: each plan's steps run in sequence in one folder."""
    chain = _directive(prog, "chain")
    if chain:
        steps = [(int(c.split(":")[0]), c.split(":")[1:]) for c in chain]
        return [(" -> ".join(chain), steps)]
    ns = nproc_override or [int(x) for x in (_directive(prog, "nproc") or ["2"])]
    variants = _directive(prog, "variants") or [None]
    return [
        (f"N={n}" + (f" {v}" if v else ""), [(n, [v] if v else [])]) for v in variants for n in ns
    ]


def _cmd(how, n, prog, args, logs):
    if how == "emulated":
        return [sys.executable, "-m", "labs.dist.run", "--nproc_per_node", str(n), str(prog), *args]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(n),
        "--log-dir",
        logs,
        "--tee",
        "3",
        str(prog),
        *args,
    ]


def _torchrun_logs(logs):
    """Per-rank lines from torchrun's log files (the console interleaves processes mid-line):
    each rank's stdout, then its stderr, prefixed like the console."""
    lines = []
    for f in sorted(Path(logs).glob("*/attempt_*/*/stdout.log")) + sorted(
        Path(logs).glob("*/attempt_*/*/stderr.log")
    ):
        rank = f.parent.name
        lines += [f"[default{rank}]:{x}" for x in f.read_text(errors="replace").splitlines()]
    return "\n".join(lines)


def compare(prog: Path, label, steps, timeout: float, verbose: bool):
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    results = {}
    for how in ("emulated", "torchrun"):
        with tempfile.TemporaryDirectory(prefix=f"adv-{how}-") as tmp:
            env["ADV_TMP"] = tmp
            rcs, lines, raws, dt = [], {}, [], 0.0
            for i, (n, args) in enumerate(steps):
                logs = os.path.join(tmp, f"torchrun-logs-{i}")
                rc, out, d = _run(_cmd(how, n, prog, args, logs), tmp, timeout, env)
                if how == "torchrun" and os.path.isdir(logs):
                    out = (
                        _torchrun_logs(logs)
                        + "\n"
                        + "\n".join(x for x in out.splitlines() if not PREFIX.match(x))
                    )
                rcs.append(rc)
                raws.append(out)
                dt += d
                for rank, ls in _per_rank(out).items():
                    lines.setdefault(rank, []).extend(
                        f"[step {i}] {x}" if len(steps) > 1 else x for x in ls
                    )
                if rc == "TIMEOUT":
                    break
        rc = "TIMEOUT" if "TIMEOUT" in rcs else next((c for c in rcs if c != 0), 0)
        results[how] = (rc, lines, "\n".join(raws), dt)
    (erc, eout, _eraw, edt), (trc, tout, _traw, tdt) = results["emulated"], results["torchrun"]
    if erc == "TIMEOUT" or trc == "TIMEOUT":
        verdict = f"hang (emulated rc={erc}, torchrun rc={trc})"
    elif (erc == 0) != (trc == 0):
        verdict = f"exit differs (emulated rc={erc}, torchrun rc={trc})"
    elif eout == tout:
        verdict = "equal" + ("" if erc == 0 else f" (both failed: {erc}, {trc})")
    else:
        verdict = "different"
    if not eout and not tout:
        verdict += " [no OUT lines at all]"
    detail = ""
    for r in sorted(set(eout) | set(tout)):
        a, b = eout.get(r, []), tout.get(r, [])
        if a != b:
            shown = 0
            for op, i1, i2, j1, j2 in difflib.SequenceMatcher(
                None, a, b, autojunk=False
            ).get_opcodes():
                if op == "equal" or shown >= 6:
                    continue
                shown += 1
                detail += f"\n    rank {r} ({op}):"
                detail += "".join(f"\n      emulated: {x}" for x in a[i1:i2][:4])
                detail += "".join(f"\n      torchrun: {y}" for y in b[j1:j2][:4])
    print(f"{prog.name} {label}: {verdict}   ({edt:.0f}s / {tdt:.0f}s){detail}", flush=True)
    if verbose or not verdict.startswith("equal"):
        for how, (rc, _, raw, _) in results.items():
            tail = "\n".join(raw.splitlines()[-30:])
            print(
                f"  --- {how} (rc={rc}) tail ---\n"
                + "\n".join("  | " + s for s in tail.splitlines())
            )
    return verdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("programs", nargs="*")
    ap.add_argument("--nproc", help="comma list overriding each program's '# nproc:' line")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument(
        "--only", help="comma list of substrings of the run labels (e.g. 'N=2,missing')"
    )
    a = ap.parse_args()
    progs = [Path(p).resolve() for p in a.programs] or sorted(HERE.glob("p_*.py"))
    summary = []
    for prog in progs:
        ns = [int(x) for x in a.nproc.split(",")] if a.nproc else None
        for label, steps in _plans(prog, ns):
            if a.only and not any(o in label for o in a.only.split(",")):
                continue
            summary.append((prog.name, label, compare(prog, label, steps, a.timeout, a.verbose)))
    print("\nSUMMARY")
    for name, label, v in summary:
        print(f"  {name:28s} {label:40s} {v}")


if __name__ == "__main__":
    main()
