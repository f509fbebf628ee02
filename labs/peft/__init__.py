"""Parameter-efficient fine-tuning (Chapter 5): quantization code tables for NF4 and QLoRA.

:mod:`labs.peft.codes` holds the 4-bit NormalFloat levels and the 8-bit codes of double
quantization; :mod:`labs.peft.nf4` (NF4 tensors and layers) and :mod:`labs.peft.lora` build on them.
"""
