"""Chapter 6: the tiny GPT as a real HTTP service, and the pieces around it.

One concern per module::

    engine.py         LLMEngine: Chapter 10's continuous-batching scheduler over the paged KV
                      cache, per-request sampling and errors
    seeding.py        each request's generator, seeded with all 64 bits of OpenAI's seed
    checkpoint.py     train / save / load the served model
    static.py         the former engine (static padded batches, no KV cache), a baseline
    replay.py         both engines on one request trace, on a virtual clock
    protocol.py       OpenAI's request bodies as clients send them (null = absent, what is refused
                      by name, unknown fields reported), vLLM's extensions, default max_tokens
    errors.py         OpenAI's error object; validation errors with OpenAI's param paths and codes
    replies.py        completion objects, and their chunks as server-sent events
    chat.py           chat messages: roles, names, content parts, the tiny GPT's chat template
    stopping.py       when a generation ends: stop strings, end of sequence, ignore_eos, min_tokens
    gate.py           ASGI middleware: key, rate limit, content type and size before the body;
                      metrics for every status, the access log, X-Request-Id; the body's limits
    cors.py           which web pages may call from a browser (CORS; loopback pages by default)
    app.py            create_app(): /v1/completions, /v1/chat/completions, /v1/models[/{model}],
                      health, metrics (GET routes answer HEAD)
    __main__.py       python -m labs.serving --host 127.0.0.1 --port 8000 (checked options, timeouts)
    limits.py         token bucket, leaky bucket, fixed window, sliding window; a Redis-shared limit
    auth.py           API keys from the environment or a file, checked in constant time
    batcher.py        the adaptive batching rule of general model servers (max size, max wait)
    metrics.py        Prometheus metrics of the service (KV-cache usage too), quantiles from /metrics
    hf_tokenizer.py   the tiny GPT's tokenizer as a Hugging Face directory (labs-export-tokenizer)
    server.py         start/stop the service (and redis-server) as subprocesses on a free port
    loadgen.py        async httpx load generator with bounded concurrency, SSE client
    hpa.py            Kubernetes HPA rule simulated on a traffic trace
    rollout.py        rolling update with maxSurge / maxUnavailable simulated
    export.py         ONNX export and ONNX Runtime sessions
    storage.py        checkpoint formats: pickle vs safetensors, lazy loading, shards
    rag.py            chunking, TF-IDF retrieval, FAISS vs exact search, RAG prompts
    feature_store.py  point-in-time correct joins
"""
