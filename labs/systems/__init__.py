"""Hardware-level accounting (Chapters 8-9): ``gpu_memory`` what a GPU's memory hierarchy allows;
``roofline`` peak FLOP/s, bandwidth, arithmetic intensity; ``gpu_probe`` the same quantities
measured on the CUDA device in front of you (limits, copy bandwidth and the L2 step, matmul peaks,
occupancy of a Triton kernel)."""
