"""Model compression for Parts IX and X (Chapters 19-22), measured on the tiny GPT.

* :mod:`labs.compress.measure` -- the shared trained tiny GPT; file size, FLOPs, latency, perplexity.
* :mod:`labs.compress.quantize` -- integer formats, absmax / zero-point, granularity, calibration,
  fake quantization with a straight-through estimator, weight-only and int8 linear layers.
* :mod:`labs.compress.outliers` -- LLM.int8() decomposition, SmoothQuant, AWQ-style protection.
* :mod:`labs.compress.calibrate` -- calibration tokens, layer inputs and Hessians, layer by layer.
* :mod:`labs.compress.gptq` -- round-to-nearest and GPTQ (error feedback through H^-1).
* :mod:`labs.compress.awq` -- AWQ's searched activation-aware scales.
* :mod:`labs.compress.pruning` -- magnitude (layer-wise, global), N:M and structured pruning.
* :mod:`labs.compress.wanda` -- Wanda: |W| times the input norm, per output row.
* :mod:`labs.compress.sparsegpt` -- SparseGPT: pruning with the OBS weight update.
* :mod:`labs.compress.lowrank` -- truncated-SVD factorisation of linear layers.
* :mod:`labs.compress.distill` -- knowledge distillation loss and training loop.
* :mod:`labs.compress.sharing` -- cross-layer parameter sharing and honest byte counts.
* :mod:`labs.compress.export` -- ONNX export, ONNX Runtime sessions and int8 quantization.
* :mod:`labs.compress.ondevice` -- weight bytes with scales, decode-speed ceilings of named devices,
  energy per token (Chapter 19).
* :mod:`labs.compress.int4` -- int4 group-wise packing, ``Int4Linear``, save and load.
* :mod:`labs.compress.int4_gpu` -- int4 weight-only products on NVIDIA GPUs (PyTorch's tinygemm).
* :mod:`labs.compress.request_memory` -- peak memory of a generation request from the allocator.
* :mod:`labs.compress.delegate` -- operator coverage and accelerator partitions of an ONNX graph.
* :mod:`labs.compress.cluster` -- k-means weight clustering, fine-tuned centroids, Huffman sizes.
* :mod:`labs.compress.asvd` -- activation-aware low rank (ASVD scaling, SVD-LLM whitening).
* :mod:`labs.compress.distill_llm` -- forward/reverse KL and sequence-level distillation.

NF4 (QLoRA's 4-bit format, Chapter 5) lives in :mod:`labs.peft.nf4`.
"""
