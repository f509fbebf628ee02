"""Adversarial wrong answers for lab 8 (occupancy, copy bandwidth, tiled matmul traffic)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "registers not rounded up to the 256-register allocation unit",
        old="per_warp = math.ceil(registers_per_thread * gpu.warp_size / gpu.register_unit)\n    per_warp *= gpu.register_unit",
        new="per_warp = registers_per_thread * gpu.warp_size",
    ),
    Wrong(
        1,
        "forgets the 32-block limit",
        old="limits = [gpu.max_warps // warps, gpu.max_blocks, gpu.registers // per_warp // warps]",
        new="limits = [gpu.max_warps // warps, gpu.registers // per_warp // warps]",
    ),
    Wrong(
        1,
        "shared-memory limit rounded up",
        old="limits.append(gpu.shared_bytes // shared_bytes_per_block)",
        new="limits.append(math.ceil(gpu.shared_bytes / shared_bytes_per_block))",
    ),
    Wrong(
        1,
        "returns the fraction of block slots used instead of warps",
        old="return min(limits) * warps / gpu.max_warps",
        new="return min(limits) / gpu.max_blocks",
    ),
    Wrong(
        2,
        "the mean of the times instead of the fastest",
        old="return 2 * src.nbytes / min(times)",
        new="return 2 * src.nbytes * len(times) / sum(times)",
    ),
    Wrong(
        2,
        "counts the bytes once (read only), not read + write",
        old="return 2 * src.nbytes / min(times)",
        new="return src.nbytes / min(times)",
    ),
    Wrong(
        2,
        "no untimed warm-up copy",
        old="    dst.copy_(src)  # warm-up, untimed\n",
        new="",
    ),
    Wrong(
        2,
        "bytes from the requested nbytes, not the bytes of the tensor actually copied",
        old="return 2 * src.nbytes / min(times)",
        new="return 2 * nbytes / min(times)",
    ),
    Wrong(
        2,
        "the warm-up copy is timed and counted among the repeats",
        old="    dst.copy_(src)  # warm-up, untimed\n    times = [timer(lambda: dst.copy_(src)) for _ in range(repeats)]",
        new="    times = [timer(lambda: dst.copy_(src)) for _ in range(repeats + 1)]",
    ),
    Wrong(
        3,
        "A read ceil(m/t) times and B ceil(n/t) times (swapped)",
        old="reads = m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile)",
        new="reads = m * k * math.ceil(m / tile) + k * n * math.ceil(n / tile)",
    ),
    Wrong(
        3,
        "floor instead of ceil for the partial edge tiles",
        old="reads = m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile)",
        new="reads = m * k * max(1, n // tile) + k * n * max(1, m // tile)",
    ),
    Wrong(
        3,
        "C read and written (2mn instead of mn)",
        old="return (reads + m * n) * bytes_per_element",
        new="return (reads + 2 * m * n) * bytes_per_element",
    ),
    Wrong(
        3,
        "forgets the write of C",
        old="return (reads + m * n) * bytes_per_element",
        new="return reads * bytes_per_element",
    ),
]
