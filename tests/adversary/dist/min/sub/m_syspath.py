"""sys.path[0] is the script's directory under torchrun (as for `python script.py`); emulated
it is the current directory, so importing a module that sits next to the script fails when
the script is started from another directory (run from the repository root)."""

import os
import sys

import torch.distributed as dist

dist.init_process_group("gloo")
print("OUT syspath0", os.path.basename(sys.path[0]), flush=True)
try:
    import helper_mod_min

    print("OUT import_sibling ok", helper_mod_min.VALUE, flush=True)
except ImportError as e:
    print("OUT import_sibling ImportError", e, flush=True)
dist.destroy_process_group()
