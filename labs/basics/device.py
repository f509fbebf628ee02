"""The book's one device convention: where measuring and training cells run, and what it can do.

Every cell that measures or trains something a GPU would change asks :func:`device` where to
run, so the same notebook measures a laptop's CPU, a Colab T4 or an H100:

* ``LABS_DEVICE`` when set (``cpu``, ``cuda``, ``cuda:1``, ``mps``): the reader's choice wins;
* else the first CUDA GPU when PyTorch sees one;
* else the CPU. Apple's ``mps`` is used only when asked for by ``LABS_DEVICE=mps``: the book's
  cells use float64, ``torch._int_mm``, sparse and quantized kernels that MPS does not
  implement, so it is not a safe default.

On the CPU nothing changes: tensors made on the CPU and moved with ``.to(dev)`` are the same
tensors (``.to`` returns its input), and :func:`labs.basics.flops.time_fn` keeps its wall clock.

Companions for measuring cells:

* :func:`synchronize` waits for the device's queued work (a no-op on the CPU);
* timing: the project's one timer, :func:`labs.basics.flops.time_fn` (and
  :func:`labs.basics.flops.time_once`), takes ``device=`` and uses CUDA events on a GPU;
* peak memory: :func:`labs.systems.roofline.peak_memory_bytes` takes the device to read;
* capability queries -- :func:`bf16`, :func:`tf32`, :func:`semi_structured_sparsity`,
  :func:`int_mm`, :func:`int4_weight_only`, :func:`triton_gpu`, :func:`nccl` -- return ``None``
  when the device can do it and otherwise the reason, a sentence for a cell's one-line skip
  (:func:`skip_line`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import torch

__all__ = [
    "device",
    "synchronize",
    "describe",
    "capability",
    "bf16",
    "tf32",
    "semi_structured_sparsity",
    "int_mm",
    "int4_weight_only",
    "triton_gpu",
    "nccl",
    "skip_line",
]

#: compute capability of the first tensor-core generation with bf16, tf32 and 2:4 sparsity (A100)
AMPERE = (8, 0)


def device() -> torch.device:
    """Where the book's measuring cells run: ``LABS_DEVICE``, else CUDA if available, else CPU.

    A ``LABS_DEVICE`` this machine lacks is an error that names the devices it has (a silent
    fallback would report CPU numbers as GPU numbers).
    """
    name = os.environ.get("LABS_DEVICE", "").strip()
    if not name:
        return torch.device("cuda", torch.cuda.current_device()) if _cuda() else torch.device("cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"LABS_DEVICE={name!r}: {err}; use cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if _cuda() else 0
        index = (
            dev.index if dev.index is not None else (torch.cuda.current_device() if count else 0)
        )
        if index >= count:
            raise ValueError(
                f"LABS_DEVICE={name!r}: this machine has {count} CUDA device(s); unset "
                "LABS_DEVICE to use the CPU"
            )
        return torch.device("cuda", index)
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"LABS_DEVICE={name!r}: MPS is not available on this machine")
    if dev.type not in ("cpu", "mps"):
        raise ValueError(f"LABS_DEVICE={name!r}: use cpu, cuda, cuda:N or mps")
    return dev


def _cuda() -> bool:
    return torch.cuda.is_available()


def synchronize(dev: torch.device | str | None = None) -> None:
    """Wait until the work queued on ``dev`` (default :func:`device`) has finished.

    GPU kernels run asynchronously: a wall clock read right after a launch measures the launch.
    On the CPU there is nothing to wait for.
    """
    dev = device() if dev is None else torch.device(dev)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def describe(dev: torch.device | str | None = None) -> str:
    """One line naming the device: ``"cuda:0, NVIDIA H100 80GB HBM3 (sm90, 132 SMs, 79.1 GiB)"``
    on a GPU, ``"cpu (2 threads)"`` on the CPU."""
    dev = device() if dev is None else torch.device(dev)
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        return (
            f"{dev}, {p.name} (sm{p.major}{p.minor}, {p.multi_processor_count} SMs, "
            f"{p.total_memory / 2**30:.1f} GiB)"
        )
    if dev.type == "cpu":
        n = torch.get_num_threads()
        return f"cpu ({n} thread{'' if n == 1 else 's'})"
    return str(dev)


def capability(dev: torch.device | str | None = None) -> tuple[int, int] | None:
    """The CUDA compute capability ``(major, minor)`` of ``dev``; ``None`` for a CPU or MPS."""
    dev = device() if dev is None else torch.device(dev)
    return torch.cuda.get_device_capability(dev) if dev.type == "cuda" else None


def _gpu_name(dev: torch.device) -> str:
    major, minor = torch.cuda.get_device_capability(dev)
    return f"{torch.cuda.get_device_name(dev)} (compute capability {major}.{minor})"


def _needs_ampere(what: str, dev: torch.device) -> str | None:
    """``None`` on a CUDA GPU of compute capability 8.0 or newer, else why not."""
    if dev.type != "cuda":
        return f"{what} needs an NVIDIA GPU of compute capability 8.0 or newer; this is {dev}"
    if torch.cuda.get_device_capability(dev) < AMPERE:
        return f"{what} needs compute capability 8.0 or newer; this is {_gpu_name(dev)}"
    return None


def bf16(dev: torch.device | str | None = None) -> str | None:
    """``None`` if ``dev`` computes in bfloat16 natively, else why not.

    GPUs from Ampere (sm80) on have bf16 tensor cores; a T4 (sm75) emulates it, slowly, so it
    counts as missing. CPUs compute in bf16 (slowly where they lack AVX-512-BF16/AMX), which is
    what the CPU pages show.
    """
    dev = device() if dev is None else torch.device(dev)
    return _needs_ampere("bfloat16", dev) if dev.type == "cuda" else None


def tf32(dev: torch.device | str | None = None) -> str | None:
    """``None`` if ``dev`` has TF32 tensor cores (NVIDIA, sm80+), else why not."""
    return _needs_ampere("TF32", device() if dev is None else torch.device(dev))


def _try(fn: Callable[[], object], what: str, dev: torch.device) -> str | None:
    """``None`` if ``fn()`` runs, else the reason: ``what`` and PyTorch's first line."""
    try:
        fn()
        synchronize(dev)
    except (RuntimeError, NotImplementedError, AttributeError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"{what} does not run on {dev} with torch {torch.__version__}: {first[:160]}"
    return None


@functools.cache
def _probe(kind: str, dev: torch.device) -> str | None:
    """The cached result of a trial call: capabilities do not change while a kernel runs."""
    if kind == "semi_structured":
        if reason := _needs_ampere("2:4 semi-structured sparsity", dev):
            return reason

        def run() -> None:
            from torch.sparse import to_sparse_semi_structured

            a = torch.tensor([0, 0, 1, 1], dtype=torch.float16, device=dev).tile(64, 16)
            to_sparse_semi_structured(a) @ torch.ones(64, 64, dtype=torch.float16, device=dev)

        return _try(run, "torch.sparse.to_sparse_semi_structured", dev)
    if kind == "int_mm":
        a = torch.ones(32, 32, dtype=torch.int8, device=dev)
        return _try(lambda: torch._int_mm(a, a), "torch._int_mm", dev)
    if kind == "int4":
        if dev.type != "cuda":
            return (
                f"torch's int4 weight-only kernel (torch._weight_int4pack_mm) is used on NVIDIA "
                f"GPUs here; this is {dev}"
            )
        if reason := _needs_ampere("the int4 weight-only kernel (tinygemm)", dev):
            return reason

        def run() -> None:  # n = 64 outputs, k = 256 inputs, groups of 128; all codes 0
            packed = torch._convert_weight_to_int4pack(
                torch.zeros(64, 128, dtype=torch.uint8, device=dev), 2
            )
            zeros = torch.zeros(2, 64, 2, dtype=torch.bfloat16, device=dev)
            x = torch.zeros(4, 256, dtype=torch.bfloat16, device=dev)
            torch._weight_int4pack_mm(x, packed, 128, zeros)

        return _try(run, "torch._weight_int4pack_mm", dev)
    raise ValueError(f"_probe: unknown capability {kind!r}")


def semi_structured_sparsity(dev: torch.device | str | None = None) -> str | None:
    """``None`` if ``torch.sparse.to_sparse_semi_structured`` runs on ``dev`` (NVIDIA, sm80+)."""
    return _probe("semi_structured", device() if dev is None else torch.device(dev))


def int_mm(dev: torch.device | str | None = None) -> str | None:
    """``None`` if ``torch._int_mm`` (int8 x int8 -> int32 matmul) runs on ``dev``."""
    return _probe("int_mm", device() if dev is None else torch.device(dev))


def int4_weight_only(dev: torch.device | str | None = None) -> str | None:
    """``None`` if PyTorch's int4 weight-only matmul (``torch._weight_int4pack_mm``) runs on
    ``dev``: an NVIDIA GPU of compute capability 8.0 or newer."""
    return _probe("int4", device() if dev is None else torch.device(dev))


def triton_gpu(dev: torch.device | str | None = None) -> str | None:
    """``None`` if Triton compiles kernels for ``dev`` (a CUDA GPU with ``triton`` installed);
    elsewhere Triton runs only in its interpreter (``TRITON_INTERPRET=1``)."""
    dev = device() if dev is None else torch.device(dev)
    if dev.type != "cuda":
        return f"Triton compiles kernels for GPUs; on {dev} it runs only in its interpreter"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed: pip install triton"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "TRITON_INTERPRET=1 is set: Triton interprets instead of compiling"
    return None


def nccl(world_size: int = 1) -> str | None:
    """``None`` if ``world_size`` processes can each have a GPU under NCCL on this machine."""
    import torch.distributed as tdist

    if not _cuda():
        return "NCCL needs CUDA GPUs; this machine has none (the labs run on gloo and threads)"
    if not (tdist.is_available() and tdist.is_nccl_available()):
        return "this PyTorch build has no NCCL"
    if torch.cuda.device_count() < world_size:
        return (
            f"NCCL needs one GPU per process: {world_size} processes, "
            f"{torch.cuda.device_count()} GPU(s)"
        )
    return None


def skip_line(reason: str) -> str:
    """The one line a GPU-only cell prints when it is skipped: ``"Skipped: <reason>."``."""
    return f"Skipped: {reason.rstrip('.')}."
