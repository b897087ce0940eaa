"""The matmul benchmark's tileproof schedules (benchmarks/matmul.py, issue 12).

SCHEDULES maps a name to (dtype, builder): dtype "tf32" (float32 operands, tensor cores in tf32)
or "bf16" (bfloat16 operands); builder(M, N, K) returns a tp.Fusion computing
D[M, N] = sum_k A[M, 1, K] B[1, N, K] in float32. The operands' memory layout is the one their
allocation domains say (the benchmark builds its inputs that way, and times cuBLAS and Triton on
the same layout). benchmarks/matmul.py times every entry; add a schedule by adding an entry.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import tileproof as tp
from tileproof.recipes import CpAsyncPipeline, Epilogue, GridOrder, MmaGemmParams, MmaTile, mma_gemm

SIZE = 8192  # M = N = K
_SEED_EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "valid" / "mma.py"  # the seed's kernels


def moye_double_buffered(m, n, k):
    """The seed's double-buffered kernel as the seed schedules it (examples/valid/mma.py): block
    tile 128 x 128 x 16, four warps, m16n8k8 tf32, A M-major, B K-major, two cp.async stages, the
    fragments read from shared memory element by element."""
    spec = importlib.util.spec_from_file_location("_bench_seed_mma", _SEED_EXAMPLES)
    examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(examples)
    return examples.moye_double_buffered(m, n, k)


def tuned_bf16(m, n, k):
    """The tuned mma.sync schedule for bfloat16 (tileproof.recipes.mma_gemm), the fastest
    configuration of the sweep recorded in benchmarks/README.md: 128 x 128 x 64 block tiles of
    four 64 x 64 warps (Ampere_16_16_16), two XOR-swizzled cp.async stages (two blocks per SM),
    ldmatrix.x4 fragments, both operands K-major."""
    params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=128, n=128, warps=(2, 2)),
                           pipeline=CpAsyncPipeline(stages=2, prefetch=1))
    return mma_gemm(m, n, k, params)


def tuned_bf16_four_stages(m, n, k):
    """The issue's shape of the tuned schedule: four swizzled cp.async stages (two in flight, one
    barrier per K tile), 256 x 128 x 64 block tiles of eight 64 x 64 warps, ldmatrix.x4."""
    params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=256, n=128, warps=(4, 2)),
                           pipeline=CpAsyncPipeline(stages=4, prefetch=2))
    return mma_gemm(m, n, k, params)


def tuned_bf16_three_stages(m, n, k):
    """tuned_bf16 with three stages (two in flight): 96 KiB of stages, two blocks per SM, what
    Triton's mma.sync kernel allocates for its num_stages = 4."""
    params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=128, n=128, warps=(2, 2)),
                           pipeline=CpAsyncPipeline(stages=3, prefetch=2))
    return mma_gemm(m, n, k, params)


def tuned_tf32_two_stages(m, n, k):
    """The tf32 schedule as tuned_bf16 is shaped: 128 x 128 x 32 block tiles of four 64 x 64
    warps, two stages."""
    params = MmaGemmParams(dtype=tp.float32, tile=MmaTile(m=128, n=128, warps=(2, 2)),
                           pipeline=CpAsyncPipeline(stages=2, prefetch=1))
    return mma_gemm(m, n, k, params)


def tuned_tf32(m, n, k):
    """The tuned schedule for float32 operands on the tf32 tensor cores: 128 x 256 x 32 block
    tiles of eight 64 x 64 warps (Ampere_16_8_8), four XOR-swizzled cp.async stages (two in
    flight), 32-bit ldmatrix.x4 fragments, both operands K-major."""
    params = MmaGemmParams(dtype=tp.float32, tile=MmaTile(m=128, n=256, warps=(2, 4)),
                           pipeline=CpAsyncPipeline(stages=4, prefetch=2))
    return mma_gemm(m, n, k, params)


def tuned_bf16_pipelined(m, n, k):
    """tuned_bf16_three_stages with the fragments double-buffered in registers over the k-slice
    loop and the blocks in groups of 8 M tiles (examples/valid/mma.py
    tuned_matmul_grouped_double_buffered)."""
    params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=128, n=128, warps=(2, 2)),
                           pipeline=CpAsyncPipeline(stages=3, prefetch=2, fragment_stages=2), grid=GridOrder(group=8))
    return mma_gemm(m, n, k, params)


def tuned_bf16_four_stages_pipelined(m, n, k):
    """tuned_bf16_four_stages with double-buffered fragments and groups of 8 M tiles."""
    params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=256, n=128, warps=(4, 2)),
                           pipeline=CpAsyncPipeline(stages=4, prefetch=2, fragment_stages=2), grid=GridOrder(group=8))
    return mma_gemm(m, n, k, params)


def tuned_tf32_pipelined(m, n, k):
    """tuned_tf32 with double-buffered fragments and groups of 8 M tiles."""
    params = MmaGemmParams(dtype=tp.float32, tile=MmaTile(m=128, n=256, warps=(2, 4)),
                           pipeline=CpAsyncPipeline(stages=4, prefetch=2, fragment_stages=2), grid=GridOrder(group=8))
    return mma_gemm(m, n, k, params)


def tuned_tf32_pipelined_truncated(m, n, k):
    """tuned_tf32_pipelined with tf32 truncation declared (tp.Tf32Rounding.Truncate): the
    float32 bits go to mma.sync as they are, as in Triton's tf32 dot, instead of through
    cvt.rna.tf32.f32 (twice the rounding error)."""
    params = MmaGemmParams(dtype=tp.float32, tile=MmaTile(m=128, n=256, warps=(2, 4)),
                           pipeline=CpAsyncPipeline(stages=4, prefetch=2, fragment_stages=2), grid=GridOrder(group=8),
                           tf32_rounding=tp.Tf32Rounding.Truncate)
    return mma_gemm(m, n, k, params)


def tuned_tf32_three_stages_pipelined(m, n, k):
    """128 x 128 x 32 tf32 tiles of four warps, three stages, double-buffered fragments, groups of
    8 M tiles."""
    params = MmaGemmParams(dtype=tp.float32, tile=MmaTile(m=128, n=128, warps=(2, 2)),
                           pipeline=CpAsyncPipeline(stages=3, prefetch=2, fragment_stages=2), grid=GridOrder(group=8))
    return mma_gemm(m, n, k, params)


def tuned_bf16_stmatrix_epilogue(m, n, k):
    """256 x 128 tiles of eight warps, three stages (the output tile takes the fourth's shared
    memory), register stages, groups of 8 M tiles, and a bfloat16 output, as cuBLAS's bf16 row
    writes it: the accumulators cast to bfloat16 in registers, stmatrix.x4 into a 128-byte-swizzled
    shared tile, one TMA store per 64-column box (examples/valid/mma.py
    tuned_matmul_stmatrix_epilogue)."""
    params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=256, n=128, warps=(4, 2)),
                           pipeline=CpAsyncPipeline(stages=3, prefetch=2, fragment_stages=2), grid=GridOrder(group=8),
                           epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    return mma_gemm(m, n, k, params)


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
