"""Export the tiny GPT to ONNX and run it with ONNX Runtime on the CPU.

``torch.onnx.export`` records the forward pass as an ONNX graph (operators + weights) that any
ONNX runtime can execute without Python or PyTorch. ONNX Runtime then applies its own graph
optimizations (constant folding, operator fusion such as attention and layer-norm fusions) when
it loads the file. ``dynamo=True`` (PyTorch's default) captures the graph with ``torch.export``
and is the future; ``dynamo=False`` uses the older TorchScript tracer, which exports this small
model in about a second instead of tens of seconds.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

__all__ = ["export_onnx", "ort_session", "ort_logits"]


def export_onnx(model: torch.nn.Module, path: str | Path, seq_len: int = 16, dynamo: bool = False):
    """Write ``model`` (token ids (B, T) -> logits (B, T, V)) to ``path`` with dynamic B and T.

    The model may be on any device; the ONNX file holds its weights for any runtime."""
    model = model.eval()
    example = torch.zeros(1, seq_len, dtype=torch.long, device=next(model.parameters()).device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            dims = (
                {
                    0: torch.export.Dim("batch"),
                    1: torch.export.Dim("seq", max=model.config.block_size),
                },
            )
            program = torch.onnx.export(model, (example,), dynamic_shapes=dims, dynamo=True)
            program.save(str(path))
        else:
            torch.onnx.export(
                model,
                (example,),
                str(path),
                dynamo=False,
                input_names=["idx"],
                output_names=["logits"],
                dynamic_axes={"idx": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}},
            )
    return Path(path)


def ort_session(path: str | Path, threads: int = 1):
    """An ONNX Runtime CPU session with all graph optimizations and ``threads`` intra-op threads."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # errors only: no optimizer notices in the pages
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def ort_logits(session, idx: torch.Tensor) -> np.ndarray:
    """Run the exported model: token ids (B, T) int64 -> logits (B, T, V) float32 (numpy)."""
    name = session.get_inputs()[0].name
    return session.run(None, {name: idx.cpu().numpy().astype(np.int64)})[0]
