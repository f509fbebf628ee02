"""What a rank's sys.stdout offers: .buffer (bytes), .fileno(), .isatty(), .encoding, and a last
line without a newline.  Under torchrun sys.stdout is a real file; emulated it is a per-rank
text object."""

import sys

import torch.distributed as dist

dist.init_process_group("gloo")
r = dist.get_rank()
for name, fn in [
    ("buffer_write", lambda: sys.stdout.buffer.write(f"OUT bytes line {r}\n".encode())),
    ("fileno", lambda: isinstance(sys.stdout.fileno(), int)),
    ("isatty", lambda: sys.stdout.isatty()),
    ("encoding", lambda: sys.stdout.encoding.lower().replace("-", "")),
]:
    try:
        v = fn()
        sys.stdout.flush()
        print("OUT", name, "ok", v if name != "buffer_write" else "", flush=True)
    except Exception as e:  # noqa: BLE001
        print("OUT", name, "EXC", type(e).__name__, flush=True)
dist.destroy_process_group()
sys.stdout.write(f"OUT no newline at the end {r}")
