"""Plausible wrong answers to lab 08; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "rounds warps per block down (a partial warp still takes a slot)",
        old="warps = math.ceil(threads_per_block / gpu.warp_size)",
        new="warps = max(1, threads_per_block // gpu.warp_size)",
    ),
    Wrong(
        1,
        "allocates registers per thread, without the per-warp granularity",
        old="per_warp *= gpu.register_unit",
        new="per_warp = registers_per_thread * gpu.warp_size",
    ),
    Wrong(
        1,
        "forgets the limit of 32 resident blocks",
        old="limits = [gpu.max_warps // warps, gpu.max_blocks,",
        new="limits = [gpu.max_warps // warps,",
    ),
    Wrong(
        1,
        "ignores shared memory",
        old="limits.append(gpu.shared_bytes // shared_bytes_per_block)",
        new="pass",
    ),
    Wrong(
        1,
        "shared memory must not be filled exactly (an exact fit loses a block)",
        old="limits.append(gpu.shared_bytes // shared_bytes_per_block)",
        new="limits.append((gpu.shared_bytes - 1) // shared_bytes_per_block)",
    ),
    Wrong(
        1,
        "counts the register limit in warps, not blocks",
        old="gpu.registers // per_warp // warps]",
        new="gpu.registers // per_warp]",
    ),
    Wrong(
        1,
        "returns the number of resident blocks, not the fraction of warps",
        old="return min(limits) * warps / gpu.max_warps",
        new="return min(limits)",
    ),
    Wrong(
        1,
        "rejects a block of exactly 1024 threads (> vs >=)",
        old="if not 1 <= threads_per_block <= gpu.max_threads_per_block:",
        new="if not 1 <= threads_per_block < gpu.max_threads_per_block:",
    ),
    Wrong(
        1,
        "checks the SM's 2048 threads instead of the block limit of 1024",
        old="if not 1 <= threads_per_block <= gpu.max_threads_per_block:",
        new="if not 1 <= threads_per_block < gpu.max_warps * gpu.warp_size:",
    ),
    Wrong(2, "no warm-up copy", old="dst.copy_(src)  # warm-up, untimed", new="pass"),
    Wrong(  # issue 35: the "bandwidth" of a copy that moves nothing
        2,
        "copies into a destination that aliases the source",
        old="dst = torch.empty_like(src)",
        new="dst = src",
    ),
    Wrong(
        2,
        "copies into a view of the source (the same memory under another name)",
        old="dst = torch.empty_like(src)",
        new="dst = src.view_as(src)",
    ),
    Wrong(
        2,
        "times the warm-up as well",
        old="dst.copy_(src)  # warm-up, untimed",
        new="timer(lambda: dst.copy_(src))",
    ),
    Wrong(
        2,
        "discards the first timed run (as if it were the warm-up)",
        old="min(times)",
        new="min(times[1:])",
    ),
    Wrong(
        3,
        "edge tiles padded to full tiles",
        old="m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile)",
        new="2 * math.ceil(m / tile) * math.ceil(n / tile) * tile * k",
    ),
    Wrong(2, "mean instead of the fastest run", old="min(times)", new="sum(times) / len(times)"),
    Wrong(2, "slowest run instead of the fastest", old="min(times)", new="max(times)"),
    Wrong(2, "counts only the bytes read", old="2 * src.nbytes", new="src.nbytes"),
    Wrong(
        2, "uses the requested size, not the bytes copied", old="2 * src.nbytes", new="2 * nbytes"
    ),
    Wrong(2, "counts elements instead of bytes", old="2 * src.nbytes", new="2 * src.numel()"),
    Wrong(
        2,
        "times one call only",
        old="for _ in range(repeats)]",
        new="for _ in range(1)]",
    ),
    Wrong(
        3,
        "no ceiling: fractional tile counts",
        old="m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile)",
        new="m * k * n / tile + k * n * m / tile",
    ),
    Wrong(
        3,
        "floor: drops the edge tiles",
        old="m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile)",
        new="m * k * max(1, n // tile) + k * n * max(1, m // tile)",
    ),
    Wrong(3, "forgets to write C", old="(reads + m * n)", new="reads"),
    Wrong(
        3,
        "swaps which input is re-read per tile row and column",
        old="m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile)",
        new="m * k * math.ceil(m / tile) + k * n * math.ceil(n / tile)",
    ),
    # adversary; slipped at 347915e: the fake timer cannot see what fn does; every timed call also allocates a new nbytes tensor
    Wrong(
        2,
        "times the wrong thing: allocates a fresh destination inside every timed call",
        old="times = [timer(lambda: dst.copy_(src)) for _ in range(repeats)]",
        new="times = [timer(lambda: torch.empty_like(src).copy_(src)) for _ in range(repeats)]",
    ),
]
