"""The grader's courier to one kernel: a process of its own, so a kernel's messages cannot swamp
the grader.

A kernel holds its own message key and can send anything on its sockets: decoy replies, a flood
of small messages, one message of gigabytes, or a multipart message of endless parts (which
``libzmq`` buffers whole before anyone sees it).  So the grader never reads a kernel's sockets
itself.  :class:`~labs.course.sandbox.Sandbox` starts this file's text as a separate process (in
the submission's cgroup where there is one, so its cost is the submission's) with a memory limit,
and talks to it over two pipes, one request and one bounded answer per cell.  The relay

* connects to the kernel's Unix sockets through ``/proc/<pid>/root/ipc`` (opened without
  following symbolic links, checked to be sockets, used through ``/proc/self/fd``): the kernel
  cannot point it at any other socket;
* refuses any message part larger than the output limit *while it arrives*
  (``ZMQ_MAXMSGSIZE``: ``libzmq`` reads the part's length and drops the connection), and counts
  every part against the output limit before decoding it, and every byte the kernel sends during
  a cell (decoys and stale messages included) against :data:`TRAFFIC`;
* ignores messages with a wrong signature or another parent, and reads the kernel's standard
  error, keeping the last 2 KiB;
* answers ``{"status": "ok" | "error" | "flood" | "broken", "error": ..., "stdout": n}`` followed
  by ``n`` bytes of the cell's standard output; a multipart bomb exhausts its memory limit and
  kills it, which the grader reads as a flood.

The relay has no deadline of its own: the grader waits on it with the cell's deadline and kills
kernel and relay when it passes, whatever either is doing.
"""

import hashlib
import hmac
import json
import os
import signal
import stat
import sys
import time
import uuid
from datetime import datetime, timezone

TRAFFIC = 4  #: a cell may make the kernel send this many times the output limit, all told
DELIM = b"<IDS|MSG>"


class Channel:
    """The kernel's shell and IOPub sockets, signed and checked."""

    def __init__(self, cfg):
        import zmq

        self.zmq, self.key = zmq, cfg["key"].encode()
        self.session = uuid.uuid4().hex
        self.limit = cfg["limit"]
        self.ctx = zmq.Context()
        self.sockets = {}
        for name, kind in (("shell", zmq.DEALER), ("iopub", zmq.SUB)):
            s = self.ctx.socket(kind)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.MAXMSGSIZE, self.limit + 2**20)
            if kind == zmq.SUB:
                s.setsockopt(zmq.SUBSCRIBE, b"")
            self.sockets[name] = s
        self.monitors = {s.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED): n
                         for n, s in self.sockets.items()}  # fmt: skip
        self.connected: set[str] = set()
        self.broken = ""
        for name, s in self.sockets.items():
            s.connect(self._endpoint(cfg, cfg["ports"][name]))

    @staticmethod
    def _endpoint(cfg, port):
        name = f"{cfg['ipc']}-{port}"
        if not cfg.get("pid"):
            return f"ipc://{name}"
        pidfd = os.pidfd_open(cfg["pid"])
        mine = os.stat("/")
        while True:  # until the kernel has moved into its own root and bound the socket
            root = os.open(f"/proc/{cfg['pid']}/root", os.O_PATH | os.O_DIRECTORY)
            signal.pidfd_send_signal(pidfd, 0)  # still our kernel (not a reused pid) when opened
            st = os.fstat(root)
            if (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino):
                try:
                    fd = os.open(name.lstrip("/"), os.O_PATH | os.O_NOFOLLOW, dir_fd=root)
                except FileNotFoundError:
                    fd = -1
                if fd >= 0 and stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.close(root)
                    os.close(pidfd)
                    return f"ipc:///proc/self/fd/{fd}"
                if fd >= 0:
                    raise RuntimeError(f"{name} in the kernel is not a socket")
            os.close(root)
            time.sleep(0.05)

    def send(self, msg_type, content):
        header = {"msg_id": uuid.uuid4().hex, "session": self.session, "username": "grader",
                  "date": datetime.now(timezone.utc).isoformat(), "msg_type": msg_type,
                  "version": "5.3"}  # fmt: skip
        parts = [json.dumps(p).encode() for p in (header, {}, {}, content)]
        sig = hmac.new(self.key, b"".join(parts), hashlib.sha256).hexdigest().encode()
        self.sockets["shell"].send_multipart([DELIM, sig, *parts])
        return header["msg_id"]

    def receive(self, name):
        """``(size, parent msg_id, msg_type, content frame)`` of one message, or ``None`` parts
        when it is unsigned or malformed; its content is *not* decoded here."""
        frames = self.sockets[name].recv_multipart()
        size = sum(len(f) for f in frames)
        try:
            i = frames.index(DELIM)
            sig, header, parent, meta, content = frames[i + 1 : i + 6]
        except ValueError:
            return size, None, None, b""
        want = hmac.new(self.key, header + parent + meta + content, hashlib.sha256).hexdigest()
        if (
            not hmac.compare_digest(want.encode(), sig)
            or len(parent) > 65536
            or len(header) > 65536
        ):
            return size, None, None, b""
        try:
            return size, json.loads(parent).get("msg_id"), json.loads(header)["msg_type"], content
        except (ValueError, KeyError, AttributeError):
            return size, None, None, b""

    def events(self, monitor):
        from zmq.utils.monitor import recv_monitor_message

        event = recv_monitor_message(monitor)
        name = self.monitors[monitor]
        if event["event"] == self.zmq.EVENT_CONNECTED:
            self.connected.add(name)
        elif name in self.connected:
            self.broken = f"the kernel's {name} channel closed (a message over the limit?)"


class Lines:
    """Lines from a pipe, read with ``os.read`` (so that ``poll`` sees what is not read yet)."""

    def __init__(self, fd):
        self.fd, self.buf = fd, b""

    def read(self):
        """The next line, ``None`` if it is not complete yet, ``b""`` at the end."""
        while b"\n" not in self.buf:
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return b""
            self.buf += chunk
            if b"\n" not in self.buf:
                return None
        line, _, self.buf = self.buf.partition(b"\n")
        return line


def main():
    requests = Lines(0)
    while (first := requests.read()) is None:
        pass
    cfg = json.loads(first)
    import resource

    memory = 4 * cfg["limit"] + 2**28
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    ch = Channel(cfg)
    err_fd, err_tail = cfg.get("stderr"), b""
    out = os.fdopen(sys.stdout.fileno(), "wb", buffering=0)
    poller = ch.zmq.Poller()
    for s in [*ch.sockets.values(), *ch.monitors]:
        poller.register(s, ch.zmq.POLLIN)
    poller.register(0, ch.zmq.POLLIN)
    if err_fd is not None:
        poller.register(err_fd, ch.zmq.POLLIN)
    cell, pending = None, []  # the cell being run (its state), requests not started yet
    ready, asked, seen_iopub, info_ids = False, 0.0, False, set()
    while True:
        if not ready and time.monotonic() - asked > 0.5:
            info_ids.add(ch.send("kernel_info_request", {}))
            asked = time.monotonic()
        events = dict(poller.poll(200 if not ready else None))
        if err_fd in events:
            chunk = os.read(err_fd, 65536)
            err_tail = (err_tail + chunk)[-2048:]
            if not chunk:
                poller.unregister(err_fd)
        for mon in [m for m in ch.monitors if m in events]:
            ch.events(mon)
        for name in ("iopub", "shell"):
            if ch.sockets[name] not in events:
                continue
            size, parent, kind, content = ch.receive(name)
            seen_iopub |= name == "iopub"
            if not ready:
                if name == "shell" and parent in info_ids:
                    ready = "reply"
                continue
            if cell is None:
                continue
            cell["traffic"] += size
            if cell["traffic"] > TRAFFIC * ch.limit:
                cell["status"] = "flood"
                cell["error"] = (
                    f"the kernel sent more than {TRAFFIC * ch.limit >> 20} MiB in a cell"
                )
            if parent != cell["id"] or kind is None:
                continue
            if name == "iopub" and kind != "status":  # counted before it is decoded
                cell["size"] += len(content)
                if cell["size"] > ch.limit:
                    cell["status"] = "flood"
                    cell["error"] = f"invalid: the cell printed more than {ch.limit >> 20} MiB"
                    continue
            try:
                body = json.loads(content)
            except ValueError:  # signed but malformed: as good as a decoy
                continue
            if not isinstance(body, dict):
                continue
            if name == "shell":
                if kind == "execute_reply":
                    cell["reply"] = str(body.get("status", "error"))
                continue
            if kind == "stream" and body.get("name") == "stdout":
                cell["out"].append(str(body.get("text", "")).encode("utf-8", "replace"))
            elif kind == "error" and not cell["error"]:
                first = (str(body.get("evalue") or "")).strip().splitlines()
                ename = str(body.get("ename", "Error"))[:200]
                cell["error"] = f"{ename}: {first[0][:1000] if first else ''}".rstrip(": ")
            elif kind == "status" and body.get("execution_state") == "idle":
                cell["idle"] = True
        if ready == "reply" and seen_iopub:
            ready = True
            out.write(json.dumps({"status": "ready"}).encode() + b"\n")
        if ch.broken and cell is not None and cell["status"] is None:
            cell["status"], cell["error"] = "broken", ch.broken
        if cell is not None and (cell["status"] or (cell["idle"] and cell["reply"])):
            status = cell["status"] or ("ok" if cell["reply"] == "ok" else "error")
            if status == "error" and not cell["error"]:
                cell["error"] = "error"
            text = b"".join(cell["out"]) if status in ("ok", "error") else b""
            head = {"status": status, "error": cell["error"], "stdout": len(text),
                    "stderr": err_tail.decode("utf-8", "replace")}  # fmt: skip
            out.write(json.dumps(head).encode() + b"\n" + text)
            cell = None
        if 0 in events:
            line = requests.read()
            if line == b"":
                return
            if line:
                pending.append(line)
        if pending and ready is True and cell is None:
            request = json.loads(pending.pop(0))
            cell = {"id": ch.send("execute_request", {
                "code": request["code"], "silent": False, "store_history": False,
                "user_expressions": {}, "allow_stdin": False, "stop_on_error": False}),
                "size": 0, "traffic": 0, "out": [], "error": "", "idle": False, "reply": None,
                "status": None}  # fmt: skip


if __name__ == "__main__":
    main()
