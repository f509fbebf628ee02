"""The labs package of *Deep Learning Systems*.

Named for what it holds, in the book's order; each chapter's code lives in the module(s) below.
Import the one you need, e.g. ``from labs import memory`` or ``from labs.inference import paged``.

Part I (Chapters 1-2)
    :mod:`labs.memory` bytes to serve and train a model, KV cache; :mod:`labs.flops` counting and
    timing matrix products.
Part II (Chapter 3) -- :mod:`labs.data_eng`
    ``metrics`` BLEU, ROUGE, perplexity; ``passk`` pass@k and a sandboxed candidate runner;
    ``spectrum`` weight spectra; ``cleaning``, ``minhash`` (MinHash + LSH) and ``bpe`` (byte-level
    BPE); ``instruct`` loss masking and annotator agreement; ``embeddings``.
Part III (Chapters 4-5)
    :mod:`labs.gpt` the tiny GPT every later chapter reuses (:mod:`labs.training.loop` trains it);
    :mod:`labs.data` its corpus, tokenizer and instruction task; :mod:`labs.activations`
    activation memory, checkpointing, loss scaling; :mod:`labs.checkpoint` crash-safe checkpoints
    (:mod:`labs.training.commit` the atomic commit); :mod:`labs.lora` LoRA and QLoRA layers;
    :mod:`labs.quant` NF4 with double quantization (:mod:`labs.peft.codes` the code tables).
Part IV (Chapter 6) -- :mod:`labs.serving`
    a FastAPI service of the tiny GPT (``python -m labs.serving``): ``app``, ``auth``, ``limits``
    (four rate limiters), ``batcher``, ``metrics``, ``engine``, ``server``, ``loadgen``; and
    ``hpa``, ``rollout``, ``rag``, ``feature_store``, ``storage``, ``export``.
Part V (Chapter 7) -- :mod:`labs.prompting`
    ``tasks`` in-context task families, ``train`` a small model on them, ``evaluate`` few-shot
    accuracy, ``constrained`` decoding by masking logits.
Part VI (Chapters 8-9)
    :mod:`labs.roofline` peak FLOP/s, bandwidth, arithmetic intensity.
Part VII (Chapters 10-11)
    :mod:`labs.inference` ``sampling``, ``kv_cache``, ``attention`` (MHA/MQA/GQA), ``paged`` (block
    manager), ``batching`` (continuous batching), ``engine``, ``speculative``, ``int8``;
    :mod:`labs.attention` naive and FlashAttention-2 in PyTorch; :mod:`labs.triton_attention`
    (and ``triton_attention_bwd``) the Triton kernels.
Part VIII (Chapters 12-18)
    :mod:`labs.dist` ``torch.distributed`` on threads (and the real thing under torchrun), with
    traces and an alpha-beta cost model; :mod:`labs.core` the workshop's toy framework;
    :mod:`labs.collectives` all-reduce algorithms from point-to-point messages;
    :mod:`labs.data_parallel`; :mod:`labs.pipeline` (``pipeline_schedules`` schedules as data,
    ``pipeline_sim`` the simulator), :mod:`labs.pipeline_exec` (executor),
    :mod:`labs.pipeline_plot`, :mod:`labs.dualpipe`; :mod:`labs.tensor_parallel`; :mod:`labs.zero`
    ZeRO stages (``zero_formulas``, ``zero_state``, ``zero_trainer``); :mod:`labs.fsdp_train` one
    FSDP training program (``fsdp_setup``, ``fsdp_runs``); :mod:`labs.parallel3d`;
    :mod:`labs.parallel` sequence, context and expert parallelism (``act_memory``,
    ``sequence_parallel``, ``ring_attention``, ``ulysses``, ``moe``, ``mesh``, ``mesh_train``
    the 4-D training step); the torchrun scripts :mod:`labs.ddp_torchrun` and
    :mod:`labs.pp_torchrun`.
Parts IX-X (Chapters 19-22) -- :mod:`labs.compress`
    ``pruning``, ``quantize``, ``outliers`` (LLM.int8(), SmoothQuant, AWQ), ``int8``, ``distill``,
    ``lowrank``, ``sharing``, ``export`` (ONNX Runtime), ``measure`` (size, latency, perplexity).
Every lab
    :mod:`labs.course` the exercise tooling, apart from the teaching code: ``checks``,
    ``notebooks``, ``release`` (``python -m labs.release``), ``grade`` (``python -m labs.grade``),
    ``key``, ``sandbox``, ``gradebook``, ``wrong_answers``; :mod:`labs.widgets` interactive widgets
    that work in the static book.
"""

__version__ = "0.1.0"
