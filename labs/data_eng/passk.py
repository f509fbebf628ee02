"""Evaluating code generators: the unbiased pass@k estimator and a sandboxed test runner.

A model writes ``n`` candidate programs per problem; ``c`` of them pass the unit tests.
pass@k is the probability that at least one of ``k`` candidates drawn from the ``n`` passes
(Chen et al., 2021)::

    pass@k = 1 - C(n - c, k) / C(n, k)

Candidates are untrusted code: :func:`run_candidate` executes each one in a separate Python
process with a wall-clock timeout, CPU-time and memory limits, an empty temporary working
directory, no inherited environment and isolated mode (``-I``), never in the caller's process.
Inside the child an audit hook (:pep:`578`, which cannot be removed once installed) refuses file
deletion, renames, writes outside the working directory, new processes and network connections.
This is defence in depth for a teaching lab; production harnesses add a container or a
system-call filter (gVisor, nsjail, seccomp) because ``ctypes`` can get past an audit hook.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

__all__ = ["pass_at_k", "naive_pass_at_k", "RunResult", "run_candidate", "evaluate_candidates"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` are correct.

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k / i)``, which equals
    ``1 - C(n-c, k) / C(n, k)`` without huge binomials.
    """
    for name, v in (("n", n), ("c", c), ("k", k)):
        if int(v) != v or v < 0:
            raise ValueError(f"pass_at_k: {name} must be a non-negative integer, got {v!r}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got k={k}, n={n}")
    if c > n:
        raise ValueError(f"pass_at_k: c={c} correct samples cannot exceed n={n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def naive_pass_at_k(n: int, c: int, k: int) -> float:
    """The biased plug-in estimate ``1 - (1 - c/n)^k`` (draws with replacement).

    It treats the per-sample success rate ``c/n`` as exact; averaged over problems it
    underestimates pass@k, which is why Chen et al. derive :func:`pass_at_k`.
    """
    if not 1 <= k or n <= 0 or not 0 <= c <= n:
        raise ValueError(f"naive_pass_at_k: need k >= 1, n > 0, 0 <= c <= n; got {n=}, {c=}, {k=}")
    return 1.0 - (1.0 - c / n) ** k


@dataclass
class RunResult:
    """Outcome of one candidate: ``status`` is "passed", "failed", "timeout" or "error"."""

    status: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


_GUARD = r"""
import os as _os, sys as _sys
def _guard(event, args, _root=_os.getcwd()):
    if event in ("os.remove", "os.rmdir", "os.rename", "shutil.rmtree", "os.system", "os.exec",
                 "os.posix_spawn", "os.fork", "os.forkpty", "subprocess.Popen", "socket.connect",
                 "os.kill", "os.chmod", "os.truncate"):
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open" and isinstance(args[0], (str, bytes)):
        mode = args[1] if isinstance(args[1], str) else ""
        path = _os.path.abspath(args[0] if isinstance(args[0], str) else args[0].decode())
        if any(m in mode for m in "wax+") and not path.startswith(_root + _os.sep):
            raise PermissionError(f"sandbox: writing {path} is not allowed")
_sys.addaudithook(_guard)
del _guard
"""


def _limits(cpu_s: int, memory_bytes: int):
    def apply() -> None:  # runs in the child between fork and exec (POSIX only)
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # files <= 1 MiB
        resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))  # no fork bombs
        os.setsid()  # its own process group, so a timeout kills every child too

    return apply


def run_candidate(
    code: str,
    tests: str,
    timeout: float = 2.0,
    memory_mb: int = 512,
) -> RunResult:
    """Run ``code`` followed by ``tests`` (plain ``assert`` statements) in a sandboxed process.

    Args:
        code: the candidate's source, e.g. a function definition.
        tests: statements that raise (usually ``AssertionError``) when the candidate is wrong.
        timeout: wall-clock limit in seconds; the whole process group is killed after it.
        memory_mb: address-space limit of the child process in MiB.

    Returns:
        :class:`RunResult` -- "passed" when the process exits with status 0.
    """
    if not isinstance(code, str) or not isinstance(tests, str):
        raise ValueError("run_candidate: code and tests must be strings of Python source")
    if timeout <= 0:
        raise ValueError(f"run_candidate: timeout must be positive seconds, got {timeout}")
    program = _GUARD + "\n" + code + "\n\n" + tests + "\n"
    with tempfile.TemporaryDirectory(prefix="candidate-") as workdir:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-c", program],
                cwd=workdir,
                env={"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=_limits(int(timeout) + 1, memory_mb << 20),
            )
        except OSError as err:
            return RunResult("error", f"could not start the sandbox: {err}")
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
            proc.communicate()
            return RunResult("timeout", f"killed after {timeout:g} s")
    if proc.returncode == 0:
        return RunResult("passed")
    last = err.strip().splitlines()[-1] if err.strip() else f"exit status {proc.returncode}"
    return RunResult("failed" if "AssertionError" in last else "error", last)


def evaluate_candidates(
    candidates: dict[str, list[str]], tests: dict[str, str], ks=(1, 5, 10), **run_kw
) -> dict:
    """Run every candidate of every problem and estimate pass@k.

    Args:
        candidates: problem name -> list of ``n`` candidate sources.
        tests: problem name -> test statements.
        ks: the k values to report (each must be <= the number of candidates per problem).

    Returns:
        ``{"correct": {name: c}, "n": {name: n}, "pass@k": {k: mean over problems},
        "naive@k": {k: mean of the plug-in estimate}}``.
    """
    missing = set(candidates) - set(tests)
    if missing:
        raise ValueError(f"evaluate_candidates: no tests for problem(s) {sorted(missing)}")
    correct = {
        p: sum(run_candidate(c, tests[p], **run_kw).passed for c in cands)
        for p, cands in candidates.items()
    }
    n = {p: len(c) for p, c in candidates.items()}
    return {
        "correct": correct,
        "n": n,
        "pass@k": {k: float(np.mean([pass_at_k(n[p], correct[p], k) for p in n])) for k in ks},
        "naive@k": {
            k: float(np.mean([naive_pass_at_k(n[p], correct[p], k) for p in n])) for k in ks
        },
    }
