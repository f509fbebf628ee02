"""Run every client program of this folder in turn, in one process per rank.

Under ``torchrun --nproc_per_node 4 --tee 3 run_all.py`` and under
``python -m labs.dist.run --nproc_per_node 4 run_all.py`` alike; each program sets up and tears
down its own process group.  A line ``=== name`` separates the programs' outputs.

Under torchrun, a process group created after another one was destroyed would find the old
group's addresses in torchrun's store; so every program gets a fresh store on its own port
(rank 0 picks a free port and publishes it through torchrun's store).
"""

import os
import runpy
import socket
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
# the plain client programs, then the check of labs.parallel under torch.distributed
names = sys.argv[1:] or [*sorted(p.name for p in here.glob("p[0-9]*.py")), "x_labs_parallel.py"]
store = None
if "TORCHELASTIC_RUN_ID" in os.environ:  # under torchrun (the emulator needs none of this)
    from torch.distributed import TCPStore

    rank = int(os.environ["RANK"])
    store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                     int(os.environ["WORLD_SIZE"]), is_master=False)  # fmt: skip
for name in names:
    if store is not None:
        key = f"run_all/port/{name}"
        if rank == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                store.set(key, str(s.getsockname()[1]))
        os.environ["MASTER_PORT"] = store.get(key).decode()
        os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"  # rank 0 hosts the new store
    print(f"=== {name}", flush=True)
    runpy.run_path(str(here / name), run_name="__main__")
    sys.stdout.flush()
