"""The labs package of *Deep Learning Systems*.

One module per topic, named for what it holds; each chapter's code lives in the module(s) below.
Import the one you need, e.g. ``from labs import memory`` or ``from labs import dist``.

Part I (Chapters 1-2)
    :mod:`labs.memory` bytes to serve and train a model, KV cache;
    :mod:`labs.flops` counting and timing matrix products.
Part III (Chapters 4-5)
    :mod:`labs.gpt` the tiny GPT every later chapter reuses; :mod:`labs.data` its corpus,
    tokenizer and instruction task; :mod:`labs.activations` activation memory, checkpointing,
    loss scaling; :mod:`labs.checkpoint` crash-safe checkpoints; :mod:`labs.lora` LoRA and
    QLoRA layers; :mod:`labs.quant` NF4 with double quantization.
Part VI-VII (Chapters 8, 9, 11)
    :mod:`labs.roofline` peak FLOP/s, bandwidth, arithmetic intensity; :mod:`labs.attention`
    naive and FlashAttention-2 in PyTorch; :mod:`labs.triton_attention` the Triton kernels.
Part VIII (Chapters 12-18)
    :mod:`labs.dist` ``torch.distributed`` on threads (and the real thing under torchrun), with
    traces and an alpha-beta cost model; :mod:`labs.core` the workshop's toy framework;
    :mod:`labs.collectives` all-reduce algorithms from point-to-point messages;
    :mod:`labs.data_parallel`; :mod:`labs.pipeline` (schedules as data, simulator),
    :mod:`labs.pipeline_exec` (executor), :mod:`labs.pipeline_plot`, :mod:`labs.dualpipe`;
    :mod:`labs.tensor_parallel`; :mod:`labs.zero` ZeRO stages; :mod:`labs.fsdp_train` one FSDP
    training program (threads, torchrun, GPUs); :mod:`labs.parallel3d`; the torchrun scripts
    :mod:`labs.ddp_torchrun` and :mod:`labs.pp_torchrun`.
Every lab
    :mod:`labs.checks` the assertions that grade exercises; :mod:`labs.notebooks`,
    :mod:`labs.release`, :mod:`labs.grade` the exercise pipeline; :mod:`labs.widgets`
    interactive widgets that work in the static book.
"""

__version__ = "0.1.0"
