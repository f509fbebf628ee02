"""`sys.exit(0)` (or `sys.exit(main())`, `exit()`, `raise SystemExit(0)`) at the end of a rank's
script: torchrun exits 0 with both ranks' lines; emulated exits 1 ('rank 0 failed: SystemExit: 0')
and the other rank's output is lost."""

import sys

import torch.distributed as dist

dist.init_process_group("gloo")
print("OUT rank", dist.get_rank(), "finished", flush=True)
dist.destroy_process_group()
sys.exit(0)
