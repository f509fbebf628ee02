"""Model compression for Parts IX and X (Chapters 19-22), measured on the tiny GPT.

* :mod:`labs.compress.measure` -- the shared trained tiny GPT; file size, FLOPs, latency, perplexity.
* :mod:`labs.compress.quantize` -- integer formats, absmax / zero-point, granularity, calibration,
  fake quantization with a straight-through estimator, weight-only and int8 linear layers.
* :mod:`labs.compress.outliers` -- LLM.int8() decomposition, SmoothQuant, AWQ-style protection.
* :mod:`labs.compress.pruning` -- magnitude (layer-wise, global), N:M and structured pruning.
* :mod:`labs.compress.lowrank` -- truncated-SVD factorisation of linear layers.
* :mod:`labs.compress.distill` -- knowledge distillation loss and training loop.
* :mod:`labs.compress.sharing` -- cross-layer parameter sharing and honest byte counts.
* :mod:`labs.compress.export` -- ONNX export, ONNX Runtime sessions and int8 quantization.

NF4 (QLoRA's 4-bit format, Chapter 5) lives in :mod:`labs.peft.nf4`.
"""
