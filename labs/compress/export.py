"""Export to ONNX and run with ONNX Runtime: the portable path from PyTorch to a device.

* :func:`to_onnx` -- write a :class:`labs.gpt.GPT` (or any ids -> logits module) to an ``.onnx``
  file with dynamic batch and sequence axes.
* :func:`ort_int8` -- ONNX Runtime's own dynamic int8 quantization of an exported file.
* :class:`OrtModel` -- an ``InferenceSession`` wrapped as a module (ids -> logits tensor), so that
  :mod:`labs.compress.measure` can time it and score its perplexity like any PyTorch model.

``torch.onnx.export`` has two exporters: the TorchScript-based one (``dynamo=False``, deprecated
but fast: well under a second for the tiny GPT) and the ``torch.export``-based one
(``dynamo=True``, the future default, several seconds here). Both produce graphs that agree with
PyTorch to about 1e-5 on this model.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import torch
import torch.nn as nn

from labs.serving.export import export_onnx, ort_session

__all__ = ["to_onnx", "ort_int8", "OrtModel"]

_UNSUPPORTED = ("torch.ao.nn.quantized", "labs.compress.quantize")


def _check_exportable(model: nn.Module) -> None:
    for name, m in model.named_modules():
        if type(m).__module__.startswith(_UNSUPPORTED):
            raise ValueError(
                f"to_onnx: layer {name!r} is a {type(m).__module__}.{type(m).__name__}, which "
                "ONNX export does not support; export the float model and quantize the .onnx file "
                "with labs.compress.export.ort_int8 (onnxruntime.quantization) instead"
            )


def to_onnx(
    model: nn.Module, path: str | os.PathLike, seq_len: int = 64, dynamo: bool = False
) -> Path:
    """Export ``model`` (token ids (B, T) int64 -> logits (B, T, V)) to ``path``.

    Batch and sequence length stay dynamic (up to the model's context). Raises ValueError for
    layers ONNX cannot express (PyTorch's quantized modules, this package's ``QuantLinear``).
    """
    _check_exportable(model)
    return export_onnx(model, path, seq_len=seq_len, dynamo=dynamo)  # Chapter 6's exporter


def ort_int8(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Quantize the weights of an ONNX file to int8 with ``onnxruntime.quantization``.

    Dynamic quantization: MatMul weights become int8 (per tensor), activations are quantized at
    run time (``MatMulInteger`` / ``DynamicQuantizeLinear`` nodes).
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)  # its advice to pre-process goes to the root logger
        try:
            quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
        finally:
            logging.disable(logging.NOTSET)
    return Path(dst)


class OrtModel(nn.Module):
    """An ONNX Runtime session behind the interface of a model: ``model(idx) -> logits``.

    Args:
        path: the ``.onnx`` file. threads: ``intra_op_num_threads`` of the session.
    """

    def __init__(self, path: str | os.PathLike, threads: int = 1):
        super().__init__()
        self.path = Path(path)
        self.session = ort_session(path, threads=threads)  # Chapter 6's CPU session settings
        self.input_name = self.session.get_inputs()[0].name

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        (logits,) = self.session.run(None, {self.input_name: idx.cpu().numpy()})
        return torch.from_numpy(logits)

    @property
    def nbytes(self) -> int:
        """Size of the ``.onnx`` file in bytes."""
        return self.path.stat().st_size
