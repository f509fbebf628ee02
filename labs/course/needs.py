"""What an exercise may need that a machine may lack: a module, a GPU, an executable.

``exercise(6, "Triton kernel", needs=["triton"])`` (:mod:`labs.course.checks`) makes the exercise
*not applicable* where :func:`missing_components` finds ``triton`` missing, with one line saying
how to install it (:data:`INSTALL_HINTS`); the grader decides it in the trusted reference run.
"""

from __future__ import annotations

__all__ = ["INSTALL_HINTS", "missing_components"]

#: How to get each optional component an exercise may need (shown in the N/A line).
INSTALL_HINTS = {
    "triton": "pip install triton (Linux; on a CPU Triton runs in its interpreter)",
    "bitsandbytes": "pip install bitsandbytes",
    "cuda": "a machine with an NVIDIA GPU and a CUDA build of torch (e.g. Google Colab's GPU runtime)",
    "redis-server": "apt-get install redis-server (Debian/Ubuntu) or brew install redis (macOS)",
}


def missing_components(needs: list[str] | tuple[str, ...] | None) -> list[str]:
    """The entries of ``needs`` that this machine lacks, in order.

    An entry is ``"cuda"`` (a usable CUDA device), the name of an executable on ``PATH`` (it
    contains a ``-`` or ends in ``-server``), or otherwise an importable module name.
    """
    import importlib.util
    import shutil

    missing = []
    for name in needs or ():
        if name == "cuda":
            try:
                import torch

                ok = bool(torch.cuda.is_available())
            except ImportError:
                ok = False
        elif "-" in name:
            ok = shutil.which(name) is not None
        else:
            try:
                ok = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                ok = False
        if not ok:
            missing.append(name)
    return missing
