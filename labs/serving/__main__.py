"""Start the service: ``python -m labs.serving --host 127.0.0.1 --port 8000``.

API keys come from ``$DLSYS_API_KEYS`` (comma-separated), ``$DLSYS_API_KEYS_FILE`` or
``--api-keys-file``. Without ``--checkpoint`` the tiny GPT is trained for ``--train-steps``
steps first (seeded; a few seconds).
"""

from __future__ import annotations

import argparse

import torch
import uvicorn

from labs.serving.app import create_app
from labs.serving.auth import load_api_keys
from labs.serving.engine import Engine


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m labs.serving", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--checkpoint", help="safetensors file written by engine.save_checkpoint")
    p.add_argument("--train-steps", type=int, default=150)
    p.add_argument("--api-keys-file")
    p.add_argument("--max-batch-size", type=int, default=8)
    p.add_argument("--max-wait-ms", type=float, default=5.0)
    p.add_argument("--max-queue", type=int, default=64)
    p.add_argument(
        "--limiter", choices=["token_bucket", "leaky_bucket", "fixed_window", "sliding_window"]
    )
    p.add_argument("--rate", type=float, default=10.0, help="requests per second per key")
    p.add_argument("--burst", type=float, default=20.0, help="burst size per key")
    p.add_argument("--shared-limit", help='e.g. "5/second", kept in --storage-uri')
    p.add_argument("--storage-uri", help="e.g. redis://127.0.0.1:6379")
    p.add_argument("--max-tokens-limit", type=int, default=256)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    try:
        keys = load_api_keys(args.api_keys_file)
    except ValueError as err:
        p.error(str(err))
    engine = Engine.load(args.checkpoint, train_steps=args.train_steps)
    app = create_app(
        engine,
        keys,
        max_batch_size=args.max_batch_size,
        max_wait_s=args.max_wait_ms / 1000,
        max_queue=args.max_queue,
        limiter=args.limiter,
        rate=args.rate,
        burst=args.burst,
        shared_limit=args.shared_limit,
        storage_uri=args.storage_uri,
        max_tokens_limit=args.max_tokens_limit,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
