"""The matmul benchmark's tileproof schedules (benchmarks/matmul.py, issue 12).

SCHEDULES maps a name to (dtype, builder): dtype "tf32" (float32 operands, tensor cores in tf32)
or "bf16" (bfloat16 operands); builder(M, N, K) returns a tp.Fusion computing
D[M, N] = sum_k A[M, 1, K] B[1, N, K] in float32. The operands' memory layout is the one their
allocation domains say (the benchmark builds its inputs that way, and times cuBLAS and Triton on
the same layout). benchmarks/matmul.py times every entry; add a schedule by adding an entry.
"""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "valid"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import mma as _mma  # noqa: E402  (examples/valid/mma.py)

SIZE = 8192  # M = N = K


def moye_double_buffered(m, n, k):
    """The seed's double-buffered kernel as the seed schedules it (examples/valid/mma.py): block
    tile 128 x 128 x 16, four warps, m16n8k8 tf32, A M-major, B K-major, two cp.async stages, the
    fragments read from shared memory element by element."""
    return _mma.moye_double_buffered(m, n, k)


def tuned_bf16(m, n, k):
    """The tuned mma.sync schedule for bfloat16 (examples/valid/mma.py tuned), the fastest
    configuration of the sweep recorded in benchmarks/README.md: 128 x 128 x 64 block tiles of
    four 64 x 64 warps (Ampere_16_16_16), two XOR-swizzled cp.async stages (two blocks per SM),
    ldmatrix.x4 fragments, both operands K-major."""
    return _mma.tuned(m, n, k, _mma.tp.bfloat16, block=(128, 128), warps=(2, 2), stages=2, prefetch=1)


def tuned_bf16_four_stages(m, n, k):
    """The issue's shape of the tuned schedule: four swizzled cp.async stages (two in flight, one
    barrier per K tile), 256 x 128 x 64 block tiles of eight 64 x 64 warps, ldmatrix.x4."""
    return _mma.tuned(m, n, k, _mma.tp.bfloat16, block=(256, 128), warps=(4, 2), stages=4, prefetch=2)


def tuned_bf16_three_stages(m, n, k):
    """tuned_bf16 with three stages (two in flight): 96 KiB of stages, two blocks per SM, what
    Triton's mma.sync kernel allocates for its num_stages = 4."""
    return _mma.tuned(m, n, k, _mma.tp.bfloat16, block=(128, 128), warps=(2, 2), stages=3, prefetch=2)


def tuned_tf32_two_stages(m, n, k):
    """The tf32 schedule as tuned_bf16 is shaped: 128 x 128 x 32 block tiles of four 64 x 64
    warps, two stages."""
    return _mma.tuned(m, n, k, _mma.tp.float32, block=(128, 128), warps=(2, 2), stages=2, prefetch=1)


def tuned_tf32(m, n, k):
    """The tuned schedule for float32 operands on the tf32 tensor cores: 128 x 256 x 32 block
    tiles of eight 64 x 64 warps (Ampere_16_8_8), four XOR-swizzled cp.async stages (two in
    flight), 32-bit ldmatrix.x4 fragments, both operands K-major."""
    return _mma.tuned(m, n, k, _mma.tp.float32, block=(128, 256), warps=(2, 4), stages=4, prefetch=2)


def tuned_bf16_pipelined(m, n, k):
    """tuned_bf16_three_stages with the fragments double-buffered in registers over the k-slice
    loop and the blocks in groups of 8 M tiles (examples/valid/mma.py
    tuned_matmul_grouped_double_buffered)."""
    return _mma.tuned(m, n, k, _mma.tp.bfloat16, block=(128, 128), warps=(2, 2), stages=3, prefetch=2,
                      fragment_stages=2, group=8)


def tuned_bf16_four_stages_pipelined(m, n, k):
    """tuned_bf16_four_stages with double-buffered fragments and groups of 8 M tiles."""
    return _mma.tuned(m, n, k, _mma.tp.bfloat16, block=(256, 128), warps=(4, 2), stages=4, prefetch=2,
                      fragment_stages=2, group=8)


def tuned_tf32_pipelined(m, n, k):
    """tuned_tf32 with double-buffered fragments and groups of 8 M tiles."""
    return _mma.tuned(m, n, k, _mma.tp.float32, block=(128, 256), warps=(2, 4), stages=4, prefetch=2,
                      fragment_stages=2, group=8)


def tuned_tf32_pipelined_truncated(m, n, k):
    """tuned_tf32_pipelined with tf32 truncation declared (tp.Tf32Rounding.Truncate): the
    float32 bits go to mma.sync as they are, as in Triton's tf32 dot, instead of through
    cvt.rna.tf32.f32 (twice the rounding error)."""
    return _mma.tuned(m, n, k, _mma.tp.float32, block=(128, 256), warps=(2, 4), stages=4, prefetch=2,
                      fragment_stages=2, group=8, tf32_rounding=_mma.tp.Tf32Rounding.Truncate)


def tuned_tf32_three_stages_pipelined(m, n, k):
    """128 x 128 x 32 tf32 tiles of four warps, three stages, double-buffered fragments, groups of
    8 M tiles."""
    return _mma.tuned(m, n, k, _mma.tp.float32, block=(128, 128), warps=(2, 2), stages=3, prefetch=2,
                      fragment_stages=2, group=8)


def tuned_bf16_stmatrix_epilogue(m, n, k):
    """256 x 128 tiles of eight warps, three stages (the output tile takes the fourth's shared
    memory), register stages, groups of 8 M tiles, and a bfloat16 output, as cuBLAS's bf16 row
    writes it: the accumulators cast to bfloat16 in registers, stmatrix.x4 into a 128-byte-swizzled
    shared tile, one TMA store per 64-column box (examples/valid/mma.py
    tuned_matmul_stmatrix_epilogue)."""
    return _mma.tuned(m, n, k, _mma.tp.bfloat16, block=(256, 128), warps=(4, 2), stages=3, prefetch=2,
                      fragment_stages=2, group=8, stmatrix_epilogue=_mma.tp.bfloat16)


SCHEDULES = {
    "moye_double_buffered": ("tf32", moye_double_buffered),
    "tuned_tf32": ("tf32", tuned_tf32),
    "tuned_bf16": ("bf16", tuned_bf16),
    "tuned_bf16_four_stages": ("bf16", tuned_bf16_four_stages),
    "tuned_bf16_three_stages": ("bf16", tuned_bf16_three_stages),
    "tuned_tf32_two_stages": ("tf32", tuned_tf32_two_stages),
    "tuned_bf16_pipelined": ("bf16", tuned_bf16_pipelined),
    "tuned_bf16_four_stages_pipelined": ("bf16", tuned_bf16_four_stages_pipelined),
    "tuned_tf32_pipelined": ("tf32", tuned_tf32_pipelined),
    "tuned_tf32_pipelined_truncated": ("tf32", tuned_tf32_pipelined_truncated),
    "tuned_tf32_three_stages_pipelined": ("tf32", tuned_tf32_three_stages_pipelined),
    "tuned_bf16_stmatrix_epilogue": ("bf16", tuned_bf16_stmatrix_epilogue),
}

DTYPES = ("tf32", "bf16")
