"""Parallelism beyond the 3D grid (Chapter 17b): sequence, context and expert parallelism.

* :mod:`labs.parallel.act_memory` -- activation memory per layer, formula and measured bytes;
* :mod:`labs.parallel.sequence_parallel` -- Megatron sequence parallelism around a TP block;
* :mod:`labs.parallel.ring_attention` -- context parallelism: ring attention, zig-zag layout;
* :mod:`labs.parallel.ulysses` -- DeepSpeed-Ulysses: all-to-all from sequence to heads;
* :mod:`labs.parallel.moe` -- mixture of experts and expert parallelism;
* :mod:`labs.parallel.mesh` -- an N-dimensional grid of ranks and its process groups;
* :mod:`labs.parallel.mesh_train` -- one training step of a tiny GPT on a tp x cp x pp x dp mesh;
* :mod:`labs.parallel.on_gpus` -- a torchrun program of Part VIII on this machine's GPUs (NCCL).

Every module runs on emulated ranks (:func:`labs.dist.launch`) and unchanged under torchrun.
"""
