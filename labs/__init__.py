"""The labs package of *Deep Learning Systems*, laid out like the book's table of contents.

At the top only what every part uses: :mod:`labs.core` (the workshop's toy framework: a stack of
matrix products and runners on emulated ranks), :mod:`labs.gpt` (the tiny GPT every later chapter
reuses) and :mod:`labs.data` (its corpus, character tokenizer and instruction task).  Everything
else lives in one subpackage per part; import the module you need, e.g.
``from labs.basics import memory`` or ``from labs.inference import paged``.

Part I, Chapters 1-2 -- :mod:`labs.basics`
    ``memory`` bytes to serve and train a model, KV cache, GPUs needed; ``flops`` counting and
    timing matrix products (``time_fn``, the one timer: CUDA events on a GPU); ``device`` the one
    device convention (``labs.device()``: ``LABS_DEVICE``, else CUDA, else the CPU) with its
    capability queries; ``widgets`` interactive widgets that work in the static book.
Part II, Chapter 3 -- :mod:`labs.data_eng`
    ``metrics`` BLEU, ROUGE, perplexity; ``passk`` pass@k and a sandboxed candidate runner;
    ``spectrum`` weight spectra; ``cleaning``, ``minhash`` (MinHash + LSH), ``bpe`` (byte-level
    BPE); ``instruct`` loss masking and annotator agreement; ``embeddings``.
Part III, Chapter 4 -- :mod:`labs.training`
    ``loop`` the one training loop (the tiny GPT by default); ``activations`` activation memory,
    checkpointing, loss scaling; ``checkpoint`` crash-safe checkpoints and ``commit`` their atomic
    commit; ``mixed`` autocast and ``GradScaler`` steps and their memory on a GPU.
Part III, Chapter 5 -- :mod:`labs.peft`
    ``lora`` LoRA and QLoRA layers; ``nf4`` 4-bit NormalFloat with double quantization;
    ``codes`` the code tables (NF4 levels, 8-bit dynamic map).
Part IV, Chapter 6 -- :mod:`labs.serving`
    an OpenAI-compatible service of the tiny GPT (``python -m labs.serving``): ``app``,
    ``protocol``, ``errors``, ``replies``, ``chat``, ``stopping``, ``gate``, ``cors``, ``auth``,
    ``limits``, ``metrics``, ``engine`` (Chapter 10's engine), ``seeding``, ``checkpoint``,
    ``static``, ``replay``, ``batcher``, ``server``, ``loadgen``, ``hf_tokenizer``; and ``hpa``,
    ``rollout``, ``rag``, ``feature_store``, ``storage``, ``export``.
Part V, Chapter 7 -- :mod:`labs.prompting`
    ``tasks`` in-context task families, ``train`` a small model on them, ``evaluate`` few-shot
    accuracy, ``constrained`` decoding by masking logits.
Part VI, Chapters 8-9 -- :mod:`labs.systems`
    ``gpu_memory`` what a GPU's memory hierarchy allows; ``roofline`` peak FLOP/s, bandwidth,
    arithmetic intensity; ``gpu_probe`` the same measured on the GPU in front of you.
Part VII, Chapter 10 -- :mod:`labs.inference`
    ``sampling``, ``kv_cache``, ``attention`` (MHA/MQA/GQA), ``paged`` (block manager),
    ``batching`` (continuous batching), ``engine``, ``speculative``, ``int8`` (weight-only),
    ``prefix_cache`` (hashed blocks), ``chunked_prefill`` (token budget), ``kv_quant`` (int8 KV).
Part VII, Chapter 11 -- :mod:`labs.attention`
    ``flash`` naive attention, online softmax, FlashAttention-2 forward and backward in PyTorch;
    ``triton_fwd`` and ``triton_bwd`` the Triton kernels.
Part VIII, Chapters 12-18 -- :mod:`labs.parallel`
    ``collectives`` all-reduce algorithms from point-to-point messages (Ch. 12);
    ``data_parallel`` and the torchrun script ``ddp_torchrun`` (Ch. 13); ``pipeline`` (package:
    ``schedules``, ``sim``, ``execute``, ``plot``, ``dualpipe``, the torchrun script ``torchrun``;
    Ch. 14 and 18); ``tensor_parallel`` (Ch. 15); ``zero`` (package: ``formulas``, ``state``,
    ``trainer``) and ``fsdp`` (package: ``setup``, ``fsdp2``, ``runs``, the program ``train``; Ch. 16);
    ``parallel3d`` (Ch. 17); ``act_memory``, ``sequence_parallel``, ``ring_attention``,
    ``ulysses``, ``moe``, ``mesh``, ``mesh_train`` (Ch. 17b); ``on_gpus`` runs a torchrun program
    on this machine's GPUs with NCCL (labs 13-16).
Parts IX-X, Chapters 19-22 -- :mod:`labs.compress`
    ``pruning``, ``quantize``, ``outliers`` (LLM.int8(), SmoothQuant, AWQ), ``int8`` (integer
    matmul), ``int4_gpu`` (int4 weight-only on NVIDIA GPUs), ``distill``, ``lowrank``,
    ``sharing``, ``export`` (ONNX Runtime), ``measure`` (size, latency, perplexity); for Ch. 19 ``ondevice`` (bandwidth ceilings, energy), ``int4`` (packed
    int4 files), ``request_memory``, ``delegate`` (operator coverage); for Ch. 20 ``cluster``
    (Deep Compression), ``asvd`` (activation-aware low rank), ``distill_llm`` (KL direction,
    sequence-level KD).
The machinery under Part VIII -- :mod:`labs.dist`
    ``torch.distributed`` on threads (and the real thing under torchrun), with traces and an
    alpha-beta cost model; ``backend`` makes it a ``torch.distributed`` backend, so PyTorch's own
    DDP, FSDP2, DTensor, DCP and pipelining run on emulated ranks, with gloo's results bit for bit;
    ``python -m labs.dist.run`` runs an unmodified torchrun script; ``torch_suite`` runs PyTorch's
    own distributed test suite on emulated ranks.
Every lab -- :mod:`labs.course`
    the exercise tooling, apart from the teaching code: ``checks``, ``notebooks``, ``release``
    (``labs-release``), ``grade``, ``gradebook`` (``labs-grade``) and ``submissions``, ``key``,
    ``copied`` (pasted references), ``sandbox`` (with ``rootfs``, ``jail``, ``seccomp``,
    ``cgroups``, ``relay``), ``snippet``, ``wrong_answers``; for
    courses ``points``, ``feedback`` (escaping), ``report``, ``gradefile``, ``exports`` (Canvas,
    Moodle), ``shards``, ``bundle`` and ``gradescope``.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``labs.device()``: :func:`labs.basics.device.device`, imported on first use (so that
    ``import labs`` stays free of torch for the course tools)."""
    if name == "device":
        from labs.basics.device import device

        return device
    raise AttributeError(f"module 'labs' has no attribute {name!r}")
