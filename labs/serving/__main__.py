"""Start the service: ``python -m labs.serving --host 127.0.0.1 --port 8000``.

API keys come from ``$DLSYS_API_KEYS`` (comma-separated), ``$DLSYS_API_KEYS_FILE`` or
``--api-keys-file``. Every option is checked before the model is loaded or trained, and a bad
one ends the program with a one-line error (exit status 2). Without ``--checkpoint`` the tiny
GPT is trained for ``--train-steps`` steps first (seeded; seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

import torch
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from labs.serving.app import create_app
from labs.serving.auth import load_api_keys
from labs.serving.checkpoint import load_checkpoint, train_tiny
from labs.serving.cors import LOOPBACK, parse_origins
from labs.serving.engine import LLMEngine
from labs.serving.limits import SharedLimit, make_limiter


class GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection that has not sent a complete request
    head within ``header_timeout`` seconds (a slow or half-open client holds no slot)."""

    header_timeout = 10.0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_deadline)

    def _head_deadline(self) -> None:
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc) -> None:
        self._head_timer.cancel()
        super().connection_lost(exc)


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"  # argparse names it in its error
    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """One line (not the whole usage), exit status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m labs.serving",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    a = p.add_argument
    a("--host", default="127.0.0.1", help="address to bind (0.0.0.0: every interface)")
    a("--port", type=int, default=8000, help="TCP port")
    a("--checkpoint", help="safetensors file written by labs.serving.checkpoint.save_checkpoint")
    a("--train-steps", type=int, default=150, help="without --checkpoint (0: untrained)")
    a("--context-length", type=_positive(int), default=128, help="tokens, of a trained model")
    a("--api-keys-file", help="one key per line (else $DLSYS_API_KEYS[_FILE])")
    a("--model-name", default="tiny-gpt", help="the id in /v1/models")
    a("--max-batch-size", type=_positive(int), default=16, help="requests decoding together")
    a("--max-queue", type=_positive(int), default=64, help="waiting requests; then 503")
    a("--max-tokens-limit", type=_positive(int), default=256)
    a("--limiter", default="token_bucket",
      choices=["token_bucket", "leaky_bucket", "fixed_window", "sliding_window", "none"])  # fmt: skip
    a("--rate", type=float, default=10.0, help="requests per second per key (limiter)")
    a("--burst", type=float, default=20.0, help="burst size per key (limiter), >= 1")
    a("--shared-limit", help='e.g. "5/second", shared by replicas; needs --storage-uri')
    a("--storage-uri", help="e.g. redis://127.0.0.1:6379; needs --shared-limit")
    a("--on-storage-error", choices=["closed", "open"], default="closed",
      help="storage unreachable: refuse with 503 and report not ready (closed), or admit (open)")  # fmt: skip
    a("--max-body-bytes", type=_positive(int), default=65536)
    a("--body-timeout", type=_positive(float), default=10.0, help="s per body chunk (408)")
    a("--header-timeout", type=_positive(float), default=10.0, help="s for the request head")
    a("--keep-alive-timeout", type=_positive(int), default=5, help="s an idle connection stays")
    a("--max-connections", type=_positive(int), default=256, help="then 503")
    a("--shutdown-timeout", type=_positive(int), default=10, help="s to drain on SIGTERM")
    a("--allowed-origins", default=LOOPBACK,
      help="web pages that may call the API from a browser (CORS): comma-separated origins "
      "(https://app.example.com), loopback (pages served from this machine), * (any), none")  # fmt: skip
    a("--docs", action="store_true", help="serve /docs and /openapi.json")
    a("--quiet", action="store_true", help="no access log")
    a("--threads", type=_positive(int), default=1, help="torch intra-op threads")
    a("--device", default="cpu", help='where the model runs: "cpu", "cuda", "cuda:1", ...')
    return p


def _device(name: str) -> torch.device:
    """``--device``, checked before the model is loaded: a bad name or an absent GPU is an error."""
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device: {err}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: no CUDA device is available on this machine")
        if (device.index or 0) >= torch.cuda.device_count():
            raise ValueError(
                f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif device.type != "cpu":
        raise ValueError(f'--device {name}: use "cpu" or "cuda[:N]"')
    return device


def main(argv: list[str] | None = None) -> None:
    p = parser()
    args = p.parse_args(argv)
    limiter = None if args.limiter == "none" else args.limiter
    try:  # every check before the (slow) model
        keys = load_api_keys(args.api_keys_file)
        if not 0 < args.port < 65536:
            raise ValueError(f"--port must be in 1..65535, got {args.port}")
        if limiter and not (args.rate > 0 and args.burst >= 1):
            raise ValueError(f"--rate must be > 0 and --burst >= 1, got {args.rate}, {args.burst}")
        if limiter:
            make_limiter(limiter, args.rate, args.burst)
        if bool(args.shared_limit) != bool(args.storage_uri):
            raise ValueError("--shared-limit and --storage-uri go together: give both or neither")
        if args.shared_limit:
            SharedLimit(args.shared_limit, args.storage_uri)
        if args.train_steps < 0:
            raise ValueError(f"--train-steps must be >= 0, got {args.train_steps}")
        device = _device(args.device)
        origins = parse_origins(args.allowed_origins)
    except (ValueError, OSError) as err:
        p.error(str(err))
    torch.set_num_threads(args.threads)
    if args.checkpoint:
        try:
            model = load_checkpoint(args.checkpoint)
        except (OSError, ValueError) as err:
            p.error(f"--checkpoint: {err}")
    else:
        model = train_tiny(args.train_steps, block_size=args.context_length)
    model = model.to(device)  # the engine builds its cache and inputs where the weights are
    engine = LLMEngine(model, max_batch=args.max_batch_size, max_waiting=args.max_queue)
    app = create_app(
        engine,
        keys,
        model_name=args.model_name,
        limiter=limiter,
        rate=args.rate,
        burst=args.burst,
        shared_limit=args.shared_limit,
        storage_uri=args.storage_uri,
        fail_open=args.on_storage_error == "open",
        max_tokens_limit=args.max_tokens_limit,
        max_body_bytes=args.max_body_bytes,
        body_timeout_s=args.body_timeout,
        docs=args.docs,
        allowed_origins=origins,
    )
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    logging.getLogger("labs.serving.access").setLevel(
        logging.WARNING if args.quiet else logging.INFO
    )
    GuardedH11.header_timeout = args.header_timeout
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        http=GuardedH11,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=args.keep_alive_timeout,
        timeout_graceful_shutdown=args.shutdown_timeout,
        limit_concurrency=args.max_connections,
    )
    asyncio.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
