"""Chapter 6: the tiny GPT as a real HTTP service, and the pieces around it.

One concern per module::

    engine.py         load or train the model; batched, cancellable token-by-token generation
    limits.py         token bucket, leaky bucket, fixed window, sliding window (injectable clock)
    auth.py           API keys from the environment or a file, checked in constant time
    batcher.py        asyncio adaptive batcher: max batch size, max wait, bounded queue
    metrics.py        Prometheus metrics of the service, and quantiles read back from /metrics
    app.py            create_app(): the FastAPI application (health, completions, SSE, metrics)
    __main__.py       python -m labs.serving --host 127.0.0.1 --port 8000
    server.py         start/stop the service (and redis-server) as subprocesses on a free port
    loadgen.py        async httpx load generator with bounded concurrency, SSE client
    hpa.py            Kubernetes HPA rule simulated on a traffic trace
    rollout.py        rolling update with maxSurge / maxUnavailable simulated
    export.py         ONNX export and ONNX Runtime sessions
    storage.py        checkpoint formats: pickle vs safetensors, lazy loading, shards
    rag.py            chunking, TF-IDF retrieval, FAISS vs exact search, RAG prompts
    feature_store.py  point-in-time correct joins
"""
