#!/bin/sh
# torchrun command lines with `torchrun` replaced by `python -m labs.dist.run` (run from the repository root):
# both are refused by argparse ("unrecognized arguments"); torchrun accepts them.
.venv/bin/python -m labs.dist.run --standalone --nproc_per_node=2 tests/adversary/dist/min/m_torchelastic.py
(cd tests/adversary/dist && ../../../.venv/bin/python -m labs.dist.run --nproc_per_node 2 -m min.m_torchelastic)
# Also: labs.dist.run has --timeout 600 by default for the whole run (torchrun has no such limit).
