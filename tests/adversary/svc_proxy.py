"""A recording HTTP proxy: every request a client sends to the service, and the answer it got.

Third-party clients are run in their own virtual environments; pointing them at this proxy
(instead of the service) records exactly what each sent (method, path, JSON body) and what the
service answered (status, `Warning` header, the first few KB of the body), with no client
instrumented. Streams are relayed chunk by chunk, so streaming clients behave as they would
against the service itself.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}


class Recorder:
    """Proxy on 127.0.0.1 (a free port) forwarding to `upstream`; `records` is what passed."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.records: list[dict] = []
        self.tag = ""
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")[:2000]
                rec = {
                    "client": recorder.tag,
                    "method": self.command,
                    "path": self.path,
                    "body": body,
                }
                kept = b""
                with (
                    httpx.Client(timeout=120) as c,
                    c.stream(
                        self.command, recorder.upstream + self.path, content=raw, headers=headers
                    ) as r,
                ):
                    self.send_response(r.status_code)
                    for k, v in r.headers.items():
                        if k.lower() not in HOP and k.lower() not in ("date", "server"):
                            self.send_header(k, v)
                    has_body = self.command != "HEAD"
                    if has_body:
                        self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in r.iter_raw() if has_body else ():
                        if chunk:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            self.wfile.flush()
                            if len(kept) < 6000:
                                kept += chunk
                    if has_body:
                        self.wfile.write(b"0\r\n\r\n")
                    rec |= {
                        "status": r.status_code,
                        "warning": r.headers.get("warning"),
                        "response": kept[:6000].decode("utf-8", "replace"),
                    }
                with recorder.lock:
                    recorder.records.append(rec)

            do_GET = do_POST = do_HEAD = do_OPTIONS = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def take(self, tag: str) -> list[dict]:
        """The records made under `tag`."""
        with self.lock:
            return [r for r in self.records if r["client"] == tag]
