"""dist.is_torchelastic_launched() (used by libraries to detect torchrun): True under torchrun,
False emulated (TORCHELASTIC_RUN_ID is not set)."""

import torch.distributed as dist

print("OUT is_torchelastic_launched", dist.is_torchelastic_launched(), flush=True)
