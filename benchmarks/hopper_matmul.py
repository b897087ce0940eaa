"""Hopper GEMM on wgmma: tileproof's wgmma schedules against cuBLAS and Triton's persistent TMA
matmul, in one process on one GPU (issue 13).

    python3 benchmarks/hopper_matmul.py [--out FILE] [--shapes MxNxK,...] [--rep-ms MS] [--schedules A,B]
                                        [--rematch-rounds R] [--headline NAME]           # an H100, torch, triton
    python3 benchmarks/hopper_matmul.py --compile-only [--shapes MxNxK,...] [--jobs N]   # verify + NVRTC; no GPU

D[M, N] = sum_k A[m, k] B[n, k], bfloat16 operands, float32 accumulation, at M x N x K =
8192x8192x8192, 4096x4096x16384, 8192x1024x8192 and 8000x8000x8192 (M and N not multiples of the
block tile: the last row and column of tiles are partial); --shapes picks a subset or others.

Implementations, per shape:
  tileproof   the Hopper GEMM recipe, tileproof.recipes.hopper_gemm(M, N, K, HopperGemmParams(...))
              ("hopper_128x128", "hopper_128x256", ...; swizzle 128): A and B tiles loaded by TMA into
              128-byte-swizzled shared memory, read by wgmma.mma_async through matrix descriptors,
              one warpgroup per 64 rows, float32 output. Built at the concrete shape; tp.verify
              seconds and cold tp.compile seconds (empty memory cache, fresh NVRTC disk cache; the
              median of 3) as benchmarks/matmul.py's verify_and_compile records them. A schedule the
              verifier rejects at a shape is recorded with its rejection codes and not run.
  cuBLAS      torch.matmul with a bfloat16 output (benchmarks/matmul.py's job_cublas), in two
              layouts: "cublas_a_bT" a @ b.T, A [M, K] and B [N, K] row-major (both K-major: the
              layout tileproof and Triton read, and the reference of vs_cublas; the issue quotes
              778 TFLOP/s) and "cublas_a_b" a @ b, B stored N-major as [K, N] row-major (the
              issue's 701 TFLOP/s); torch.mm(..., out_dtype=torch.float32) is timed beside each.
  Triton      the persistent TMA matmul of Triton's tutorial 09-persistent-matmul: min(#SMs, tiles)
              programs, each looping over output tiles in grouped order (GROUP_M); A, B and C
              through TMA tensor descriptors, made on the device by tl.make_tensor_descriptor
              (public from Triton 3.4 on; their global scratch comes from triton.set_allocator) or,
              for an older Triton (3.2, 3.3), host descriptors of triton.tools.experimental_descriptor
              read by tl._experimental_descriptor_load / _store (the JSON says which); float32
              accumulation, bfloat16 output as in the tutorial. DISABLE_MMA_V3 is not set (it is
              removed from this process's environment: this is Triton's wgmma path), and each
              configuration's PTX must hold wgmma.mma_async (recorded; one without it is not timed).
              Configurations: BLOCK 128x256x64, 3 stages, 8 warps, GROUP_M 8 (the tutorial's best
              H100 configuration), the same with GROUP_M 16 (as tileproof's fastest schedule groups
              its tiles) and 128x128x64, 4 stages, 4 warps, GROUP_M 8; the best is reported.

Every output is poisoned with NaN, computed once and checked before it is timed, against a float64
reference on 1024 rows spread over M plus the last 128 rows (the partial tile of an M that is not a
multiple of the tile), every column, and for NaN everywhere: |D - D64| <= K 2^-23 |A| |B|^T (the
bfloat16 products are exact in float32, the sums float32: benchmarks/matmul.py's bf16 bound), plus
2^-8 |D64| where the output is bfloat16. A failed check is recorded and that entry is not timed.
Times: triton.testing.do_bench (CUDA events per launch, L2 flushed before each), the median of
>= 20 launches after warm-up; back_to_back_ms: 20 launches in a row, no flush (median of 5); a
tileproof kernel is launched through Kernel._prepare's launch closure. TFLOP/s = 2 M N K / time.
Ratios are speeds (the peer's time over this one's): vs_cublas against cuBLAS a @ b.T, vs_triton
against the best Triton configuration. Then the rematch: cuBLAS a @ b.T, the best Triton
configuration and one tileproof schedule (--headline NAME at every shape; by default each shape's
fastest in the first timings) timed again alternately, --rematch-rounds rounds, their medians and
each round's ratios. Writes JSON (default benchmarks/results/hopper_matmul/<machine>.json: h200.json
on an H200, cpu.json with --compile-only; <machine>_<shapes>.json where --shapes is not all four,
e.g. h200_8000x8000x8192.json) and prints a table last.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# benchmarks/matmul.py sets DISABLE_MMA_V3=1 when imported (its Triton peer is the mma.sync path);
# this benchmark is the wgmma path: put the variable back as it was (main() removes it outright).
_DISABLE_MMA_V3_BEFORE = os.environ.get("DISABLE_MMA_V3")
import matmul as base  # benchmarks/matmul.py: Problem, checks, timing, verify_and_compile, job_cublas

if _DISABLE_MMA_V3_BEFORE is None:
    os.environ.pop("DISABLE_MMA_V3", None)

import tileproof as tp
from tileproof.recipes import (Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, Operand, TmaPipeline,
                               hopper_gemm)
from tileproof.recipes.matmul_heuristic import balanced_grid  # recipes.matmul's persistent grid at a shape
from bench_common import attempt, results_path

DTYPE = "bf16"  # benchmarks/matmul.py's name for bfloat16 operands, float32 accumulation
SHAPES = [(8192, 8192, 8192), (4096, 4096, 16384), (8192, 1024, 8192), (8000, 8000, 8192)]
SMS = 132  # an H100 SXM's (and H200's) SMs: a "one wave" schedule runs at most one block on each
ONE_WAVE, BALANCED = "one wave", "balanced"  # a grid taken at the shape: one_wave_patch, balanced_grid


class Schedule(NamedTuple):
    """A schedule timed here: the Hopper GEMM recipe's parameters (tileproof.recipes.hopper_gemm)
    and, where its grid depends on the shape, how it is taken there (its `params.grid` keeps the
    group): ONE_WAVE a patch of tiles a block (one_wave_patch), BALANCED a persistent grid
    (balanced_grid)."""

    params: HopperGemmParams
    grid_at_shape: str | None = None


TIDy = tp.ParallelType.TIDy
WS = tp.WarpSpecialized(TIDy, num_registers=(40, 232))  # a producer warpgroup and two consumers
WS_512 = tp.WarpSpecialized(TIDy, num_registers=(40, 152))  # three consumers: 512 threads share the pool
WIDE = HopperTile(m=128, n=256)
FOUR_STAGES = TmaPipeline(stages=4, prefetch=2)  # one wgmma batch in flight
FOUR_STAGES_WS = TmaPipeline(stages=4, prefetch=2, warp_specialized=WS)
THREE_STAGES_WS = TmaPipeline(stages=3, prefetch=1, warp_specialized=WS)
GROUPED = GridOrder(group=8)
PAIRS = Cluster(size=2)
BF16_OUT = Epilogue(dtype=tp.bfloat16)
STMATRIX = Epilogue(dtype=tp.bfloat16, stmatrix=True)
BY_BOX = Epilogue(dtype=tp.bfloat16, stmatrix=True, by_box=True)
# name -> Schedule (add an entry to time another: the circular-buffered hopper_matmul_pipelined of
# examples/valid/wgmma.py is HopperGemmParams(tile=..., pipeline=TmaPipeline(stages=4, prefetch=3)))
SCHEDULES = {
    "hopper_128x128": Schedule(HopperGemmParams()),
    "hopper_128x256": Schedule(HopperGemmParams(tile=WIDE)),
    "hopper_128x256_4_stages": Schedule(HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=3))),
    "hopper_128x256_4_stages_one_batch_in_flight": Schedule(HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES)),
    "hopper_128x128_4_stages_one_batch_in_flight": Schedule(HopperGemmParams(pipeline=FOUR_STAGES)),
    "hopper_128x256_4_stages_one_batch_in_flight_grouped": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES, grid=GROUPED)),
    "hopper_128x256_4_stages_warp_specialized_grouped": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GROUPED)),
    "hopper_128x256_4_stages_one_batch_in_flight_grouped_bf16_out": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES, grid=GROUPED, epilogue=BF16_OUT)),
    "hopper_128x256_4_stages_warp_specialized_grouped_bf16_out": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GROUPED, epilogue=BF16_OUT)),
    "hopper_128x256_4_stages_one_batch_in_flight_one_wave": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES), ONE_WAVE),
    "hopper_128x256_4_stages_warp_specialized_one_wave": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS), ONE_WAVE),
    "hopper_128x256_4_stages_warp_specialized_one_wave_bf16_out": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, epilogue=BF16_OUT), ONE_WAVE),
    "hopper_128x256_4_stages_grouped_war_mbarriers": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2, war_mbarriers=True), grid=GROUPED)),
    "hopper_128x256_4_stages_warp_specialized_grouped_cluster_2": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GROUPED, cluster=PAIRS)),
    "hopper_128x256_4_stages_warp_specialized_one_wave_cluster_2": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, cluster=PAIRS), ONE_WAVE),
    "hopper_128x256_4_stages_warp_specialized_one_wave_cluster_2_spread": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, cluster=Cluster(size=2, spread=True)), ONE_WAVE),
    "hopper_128x256_4_stages_warp_specialized_persistent": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GridOrder(group=8, persistent=SMS))),
    "hopper_128x256_4_stages_warp_specialized_persistent_cluster_2": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GridOrder(group=8, persistent=SMS), cluster=PAIRS)),
    "hopper_128x256_4_stages_warp_specialized_persistent_balanced_cluster_2": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GROUPED, cluster=PAIRS), BALANCED),
    "hopper_128x256_3_stages_warp_specialized_grouped_stmatrix_bf16_out": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=THREE_STAGES_WS, grid=GROUPED, epilogue=STMATRIX)),
    "hopper_128x256_3_stages_warp_specialized_persistent_balanced_cluster_2_stmatrix_bf16_out": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=THREE_STAGES_WS, grid=GROUPED, cluster=PAIRS, epilogue=STMATRIX),
        BALANCED),
    "hopper_128x256_3_stages_warp_specialized_grouped_cluster_2_stmatrix_bf16_out": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=THREE_STAGES_WS, grid=GROUPED, cluster=PAIRS, epilogue=STMATRIX)),
    "hopper_128x256_3_stages_warp_specialized_one_wave_cluster_2_stmatrix_bf16_out": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=THREE_STAGES_WS, cluster=PAIRS, epilogue=STMATRIX), ONE_WAVE),
    "hopper_128x256_4_stages_warp_specialized_grouped_n_major_b": Schedule(
        HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GROUPED, b=Operand(major="MN"))),
    "hopper_128x256_4_stages_warp_specialized_no_setmaxnreg": Schedule(
        HopperGemmParams(tile=WIDE, grid=GROUPED,
                         pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=tp.WarpSpecialized(TIDy)))),
}
# Other block tiles, two consumer warpgroups each, on the persistent balanced grid in clusters of 2:
# narrower than 256 (any multiple of 16 up to 256 is a wgmma N; fewer idle SMs in the last wave at
# some shapes), 256 x 128 (each warpgroup two 64 x 128 wgmmas) and 192 x 192 with the columns split
# between the warpgroups (split_n: three 64 x 96 each); and clusters of 4 along M (B's tile loaded
# once per 4 blocks)
for _bn in (192, 208, 224):
    SCHEDULES[f"hopper_128x{_bn}_4_stages_warp_specialized_persistent_balanced_cluster_2"] = Schedule(
        HopperGemmParams(tile=HopperTile(m=128, n=_bn), pipeline=FOUR_STAGES_WS, grid=GROUPED, cluster=PAIRS), BALANCED)
SCHEDULES["hopper_128x256_4_stages_warp_specialized_persistent_balanced_cluster_2_bf16_out"] = Schedule(
    HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GROUPED, cluster=PAIRS, epilogue=BF16_OUT), BALANCED)
for _name, _tile in (("256x128", HopperTile(m=256, n=128, warpgroup_rows=128)),
                     ("192x192_split_n", HopperTile(m=192, n=192, split_n=True))):
    SCHEDULES[f"hopper_{_name}_3_stages_warp_specialized_grouped_stmatrix_bf16_out"] = Schedule(
        HopperGemmParams(tile=_tile, pipeline=THREE_STAGES_WS, grid=GROUPED, epilogue=STMATRIX))
    SCHEDULES[f"hopper_{_name}_3_stages_warp_specialized_persistent_balanced_cluster_2_stmatrix_bf16_out"] = Schedule(
        HopperGemmParams(tile=_tile, pipeline=THREE_STAGES_WS, grid=GROUPED, cluster=PAIRS, epilogue=STMATRIX),
        BALANCED)
# 192 x 192 of three consumer warpgroups, one 64 x 192 wgmma each (96 accumulators: ptxas compiles
# the 512 threads for 128 registers), cuBLAS's tile at 8000^2: 1764 tiles of which 98.4 % is inside
# the output, against 2016 and 96.9 % for 128 x 256; the pool of 512 threads allows 40 + 3 x 152
THREE_CONSUMERS = HopperTile(m=192, n=192)
for _group in (8, 16):
    SCHEDULES[f"hopper_192x192_three_consumers_3_stages_warp_specialized_persistent_balanced"
              f"{'_group_16' if _group == 16 else ''}_cluster_2_stmatrix_bf16_out"] = Schedule(
        HopperGemmParams(tile=THREE_CONSUMERS, pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=WS_512),
                         grid=GridOrder(group=_group), cluster=PAIRS, epilogue=STMATRIX), BALANCED)
SCHEDULES["hopper_128x256_3_stages_warp_specialized_persistent_balanced_group_16_cluster_2_stmatrix_bf16_out"] = \
    Schedule(HopperGemmParams(tile=WIDE, pipeline=THREE_STAGES_WS, grid=GridOrder(group=16), cluster=PAIRS,
                              epilogue=STMATRIX), BALANCED)  # a wave's tiles 16 M x 8 N: fewer DRAM reads
# the staging tile one 64-column box (16 KiB) instead of the whole 128 x 256 (64 KiB): four stages fit
for _stages in (3, 4):
    SCHEDULES[f"hopper_128x256_{_stages}_stages_warp_specialized_persistent_balanced_group_16_cluster_2_stmatrix_"
              f"by_box_bf16_out"] = Schedule(
        HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=_stages, prefetch=_stages - 2, warp_specialized=WS),
                         grid=GridOrder(group=16), cluster=PAIRS, epilogue=BY_BOX), BALANCED)
# narrower tiles staged by box: 8000 is 35.7 tiles of 224 columns (a 36th of 160) against 31.25 of 256
# (a 32nd of 64): 18 rounds of 128 x 224 on 128 blocks are 1.6 % fewer outputs a block than 16 of
# 128 x 256. 224 is 3.5 boxes of 64 columns, so its boxes are 32 columns (a 64-byte swizzle)
for _bn, _swizzle in ((224, 64), (192, 128)):
    SCHEDULES[f"hopper_128x{_bn}_4_stages_warp_specialized_persistent_balanced_group_16_cluster_2_stmatrix_"
              f"by_box_bf16_out"] = Schedule(
        HopperGemmParams(tile=HopperTile(m=128, n=_bn), pipeline=FOUR_STAGES_WS, grid=GridOrder(group=16),
                         cluster=PAIRS, epilogue=dataclasses.replace(BY_BOX, swizzle=_swizzle)), BALANCED)
# 192 x 192 of three consumers staged by box, room for a fourth stage (4 x 48 KiB + a 24 KiB box):
# at 8000^2 groups of 14 of its 42 M tiles leave no padding, 1764 tiles in 14 rounds of 126 blocks
for _group in (14, 16):
    SCHEDULES[f"hopper_192x192_three_consumers_4_stages_warp_specialized_persistent_balanced_group_{_group}_"
              f"cluster_2_stmatrix_by_box_bf16_out"] = Schedule(
        HopperGemmParams(tile=THREE_CONSUMERS, pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS_512),
                         grid=GridOrder(group=_group), cluster=PAIRS, epilogue=BY_BOX), BALANCED)
# 192 x 160 of three consumers (64 x 160 each, 80 accumulators) on all 132 SMs, the output in boxes
# of 32 columns (160 is five): at 8000^2 its 42 x 50 tiles (groups of 14, no padding) take 16 rounds
# of 30720 outputs a block, against 16 of 32768 for 128 x 256 (6 % fewer); likewise 128 x 160 in
# 24 rounds of 20480, five stages
BY_BOX_OF_32 = Epilogue(dtype=tp.bfloat16, stmatrix=True, by_box=True, swizzle=64)
SCHEDULES["hopper_192x160_three_consumers_4_stages_warp_specialized_persistent_group_14_cluster_2_stmatrix_by_box_"
          "bf16_out"] = Schedule(
    HopperGemmParams(tile=HopperTile(m=192, n=160),
                     pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS_512),
                     grid=GridOrder(group=14, persistent=SMS), cluster=PAIRS, epilogue=BY_BOX_OF_32))
SCHEDULES["hopper_128x160_5_stages_warp_specialized_persistent_group_14_cluster_2_stmatrix_by_box_bf16_out"] = Schedule(
    HopperGemmParams(tile=HopperTile(m=128, n=160), pipeline=TmaPipeline(stages=5, prefetch=3, warp_specialized=WS),
                     grid=GridOrder(group=14, persistent=SMS), cluster=PAIRS, epilogue=BY_BOX_OF_32))
# the same on all 132 SMs: at 8000^2 (2048 tiles with the clusters' padding) the last round is 68
# tiles, not a 16th full round of 128 blocks
SCHEDULES["hopper_128x256_4_stages_warp_specialized_persistent_group_16_cluster_2_stmatrix_by_box_bf16_out"] = Schedule(
    HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GridOrder(group=16, persistent=SMS), cluster=PAIRS,
                     epilogue=BY_BOX))
SCHEDULES["hopper_128x256_4_stages_warp_specialized_persistent_balanced_cluster_4"] = Schedule(
    HopperGemmParams(tile=WIDE, pipeline=FOUR_STAGES_WS, grid=GROUPED, cluster=Cluster(size=4)), BALANCED)
SCHEDULES["hopper_128x256_3_stages_warp_specialized_grouped_cluster_4_stmatrix_bf16_out"] = Schedule(
    HopperGemmParams(tile=WIDE, pipeline=THREE_STAGES_WS, grid=GROUPED, cluster=Cluster(size=4), epilogue=STMATRIX))
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps); the first is the tutorial's best on an H100
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps, GROUP_M): the tutorial's (GROUP_M 8) and, as
# tileproof's fastest schedule groups 16 M tiles, the same with GROUP_M 16
TRITON_CONFIGS = [(128, 256, 64, 3, 8, 8), (128, 256, 64, 3, 8, 16), (128, 128, 64, 4, 4, 8)]
TAIL_ROWS = 128  # checked beside the spread rows: M's last tile, partial where M % 128 != 0
K_MAJOR = base.K_MAJOR  # "A K-major, B K-major"
N_MAJOR = "A K-major, B N-major"
CUBLAS = {  # key -> (layout, call, the issue's quote)
    "cublas_a_bT": (K_MAJOR, "a @ b.T: A [M, K], B [N, K] row-major (both K-major)", 778),
    "cublas_a_b": (N_MAJOR, "a @ b: A [M, K] row-major, B [K, N] row-major (B N-major)", 701),
}
PEER_LABELS = {"cublas_a_bT": "cuBLAS a @ b.T", "cublas_a_b": "cuBLAS a @ b", "triton": "Triton persistent TMA"}


# -- shapes and schedules (no GPU) -------------------------------------------------------------
def shape_key(shape) -> str:
    return "x".join(str(int(d)) for d in shape)


def results_variant(shapes) -> str:
    """The results file's variant for a run of `shapes`: "" for the four SHAPES, else their keys
    joined by "-" (8000x8000x8192 alone: h200_8000x8000x8192.json)."""
    return "" if set(shapes) == set(SHAPES) else "-".join(shape_key(s) for s in shapes)


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """'8192x8192x8192,8000x8000x8192' -> [(8192, 8192, 8192), (8000, 8000, 8192)]; one number N
    is N x N x N; 'all' or '' the default SHAPES. Raises ValueError on anything else."""
    if text.strip().lower() in ("", "all"):
        return list(SHAPES)
    shapes: list[tuple[int, int, int]] = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        dims = part.split("x")
        if len(dims) == 1:
            dims = dims * 3
        if len(dims) != 3:
            raise ValueError(f"shape {part!r}: M x N x K, as 8192x8192x8192")
        try:
            m, n, k = (int(d) for d in dims)
        except ValueError:
            raise ValueError(f"shape {part!r}: M, N and K must be integers") from None
        if min(m, n, k) <= 0:
            raise ValueError(f"shape {part!r}: M, N and K must be positive")
        if (m, n, k) not in shapes:
            shapes.append((m, n, k))
    if not shapes:
        raise ValueError("no shape given")
    return shapes


def one_wave_patch(shape, block, sms: int = SMS, cluster: int = 1) -> tuple[int, int]:
    """GridOrder's patch (pm, pn) for a schedule whose grid is ONE_WAVE: the fewest block tiles a block
    such that the blocks fit on the SMs at once (ceil(Mo / pm) x ceil(No / pn) <= sms; every block
    runs pm x pn tiles, those past M or N too, so that is the kernel's length), then the fewest
    rows of A and B the blocks stream at a step (the L2's working set); with clusters of `cluster`
    blocks along x, ceil(Mo / pm) a multiple of it."""
    mo, no = (-(-d // b) for d, b in zip(shape, block))
    best = None
    for pm in range(1, mo + 1):
        for pn in range(1, no + 1):
            blocks = -(-mo // pm) * -(-no // pn)
            if blocks <= sms and -(-mo // pm) % cluster == 0:
                key = (pm * pn, -(-mo // pm) * block[0] + -(-no // pn) * block[1])
                best = min(best or (key, (pm, pn)), (key, (pm, pn)))
    return best[1]


def params_at(name: str, m: int, n: int) -> HopperGemmParams:
    """Schedule `name`'s parameters at M x N: a grid taken at the shape filled in (one_wave_patch's
    patch, or balanced_grid's persistent grid over the schedule's groups)."""
    schedule = SCHEDULES[name]
    params = schedule.params
    tile, cluster = (params.tile.m, params.tile.n), params.cluster.size
    if schedule.grid_at_shape == ONE_WAVE:
        grid = GridOrder(patch=one_wave_patch((m, n), tile, cluster=cluster))
    elif schedule.grid_at_shape == BALANCED:
        grid = GridOrder(group=params.grid.group,
                         persistent=balanced_grid((m, n), tile, params.grid.group, cluster=cluster))
    else:
        return params
    return dataclasses.replace(params, grid=grid)


def builder(name: str, m: int, n: int, k: int):
    """Schedule `name`, hopper_gemm at (m, n, k), as a builder for base.verify_and_compile, which
    calls it with its one `size` thrice: the arguments are ignored."""

    def build(*_sizes):
        return hopper_gemm(m, n, k, params_at(name, m, n))

    return build


def call_text(name: str, m="M", n="N", k="K") -> str:
    """'hopper_gemm(M, N, K, HopperGemmParams(tile=HopperTile(n=256)))' and the like: a grid taken
    at the shape as it is there where M and N are integers, else named after the call."""
    schedule = SCHEDULES[name]
    if isinstance(m, int) and isinstance(n, int):
        return f"hopper_gemm({m}, {n}, {k}, {params_at(name, m, n)!r})"
    shaped = f" (grid: {schedule.grid_at_shape}, at the shape)" if schedule.grid_at_shape else ""
    return f"hopper_gemm({m}, {n}, {k}, {schedule.params!r}){shaped}"


def tile_multiples(name: str, shape) -> dict:
    """Whether M, N, K are multiples of the schedule's block tile (K of its swizzle span)."""
    tile, (m, n, k) = SCHEDULES[name].params.tile, shape
    return {"M": m % tile.m == 0, "N": n % tile.n == 0, "K": k % (tile.swizzle // 2) == 0}


def verify_and_compile(name: str, shape, cold_runs: int = 1) -> dict:
    """base.verify_and_compile of the schedule at `shape` (tp.verify seconds, cold tp.compile
    seconds), plus the block, the tile multiples, the warning codes, the rejection codes (a
    rejected schedule: the error diagnostics, from a second tp.verify) and whether the CUDA source
    holds wgmma. The kernel under "_kernel" when accepted."""
    m, n, k = shape
    build = builder(name, m, n, k)
    entry = base.verify_and_compile(name, DTYPE, build, m, cold_runs=cold_runs)
    tile = SCHEDULES[name].params.tile
    entry.update({"shape": [m, n, k], "block": [tile.m, tile.n], "swizzle": tile.swizzle,
                  "builder": f"tileproof.recipes {call_text(name, m, n, k)}",
                  "tile_multiples": tile_multiples(name, shape)})
    if entry["accepted"]:
        entry["warnings"] = sorted({d.split(":")[0] for d in entry["diagnostics"]})
        kernel = entry["_kernel"]
        entry["wgmma_in_source"] = "wgmma.mma_async" in kernel.cuda_source
        entry["tma_in_source"] = "cp.async.bulk.tensor" in kernel.cuda_source
        entry["out_dtype"] = kernel.fusion.outputs[0].dtype.name
    else:
        report = tp.verify(build(), target=base.TARGET)
        entry["rejection_codes"] = sorted({d.code for d in report.diagnostics if d.is_error})
        entry["warnings"] = sorted({d.code for d in report.diagnostics if not d.is_error})
    return entry


def compile_entry(job: tuple[tuple[int, int, int], str]) -> tuple[str, str, dict]:
    """(shape key, schedule, entry) of one build of --compile-only: verify_and_compile's entry, or
    the error it raised; without the kernel."""
    shape, name = job
    entries: dict = {}
    attempt(entries, name, lambda: verify_and_compile(name, shape))
    entries[name].pop("_kernel", None)
    return shape_key(shape), name, entries[name]


def compile_only(shapes, jobs: int = 1) -> dict:
    """{shape key: {schedule: entry}}: verify + one cold compile of each schedule at each shape, in
    `jobs` processes forked from this one (each build is independent of the others: pure CPU, its own
    cold cache; the seconds then count the other jobs' load too)."""
    out: dict = {shape_key(shape): {} for shape in shapes}
    builds = [(shape, name) for shape in shapes for name in SCHEDULES]
    if jobs > 1 and len(builds) > 1:
        with mp.get_context("fork").Pool(min(jobs, len(builds))) as pool:
            done = list(pool.imap(compile_entry, builds))
    else:
        done = [compile_entry(job) for job in builds]
    for key, name, entry in done:  # in the order of the shapes, then of SCHEDULES
        out[key][name] = entry
    return out


def compile_line(key: str, name: str, e: dict) -> str:
    """One printed line of --compile-only."""
    if "error" in e:
        return f"{key:16} {name:16} FAILED {e['error'][:200]}"
    multiples = e.get("tile_multiples", {})
    partial = [ax for ax in ("M", "N", "K") if not multiples.get(ax, True)]
    where = f" ({', '.join(partial)} not a multiple of the tile)" if partial else ""
    text = f"{key:16} {name:16} {'accepted' if e.get('accepted') else 'REJECTED'}{where}: verify {e.get('verify_s')} s"
    if e.get("accepted"):
        launch = e.get("launch", {})
        text += (f", cold compile {e.get('cold_compile_s')} s; grid {launch.get('grid')} block {launch.get('block')} "
                 f"smem {launch.get('smem_bytes')} B; {'wgmma' if e.get('wgmma_in_source') else 'NO wgmma'} in the "
                 f"source; {e.get('out_dtype')} output")
    else:
        text += f"; rejection codes {', '.join(e.get('rejection_codes', [])) or '-'}"
    if e.get("warnings"):
        text += f"; warnings {', '.join(e['warnings'])}"
    return text


def compile_failures(compiled: dict) -> list[str]:
    """Entries that failed: an exception, or a rejection at a shape whose M, N, K are multiples of
    the tile (a rejection at a partial-tile shape is an answer, recorded, not a failure)."""
    bad = []
    for key, entries in compiled.items():
        for name, e in entries.items():
            if "error" in e or (not e.get("accepted") and all(e.get("tile_multiples", {}).values())):
                bad.append(f"{key} {name}")
    return bad


# -- on the GPU ---------------------------------------------------------------------------------
class Problem(base.Problem):
    """base.Problem for bfloat16 operands, whose checked rows also hold M's last TAIL_ROWS rows
    (the partial tile of an M that is not a multiple of the block tile)."""

    def __init__(self, torch, m: int, n: int, k: int, seed: int = 0):
        super().__init__(torch, DTYPE, m, n, k, seed)
        tail = torch.arange(max(0, m - TAIL_ROWS), m, device="cuda")
        rows = torch.unique(torch.cat([self.rows, tail]))  # sorted, distinct
        if rows.numel() != self.rows.numel():
            self.rows = rows
            a64, b64 = self.a[rows].double(), self.b.double()
            self.want = a64 @ b64.T
            self.magnitude = a64.abs() @ b64.abs().T


def job_cublas(torch, prob: Problem, key: str, rep_ms: int) -> dict:
    """base.job_cublas on the layout of `key`: torch.matmul(a2, b2.T) with b2 = b[0], a [N, K] view
    whose transpose is B as stored (the K-major layout: a transposed view, a @ b.T; the N-major
    one: a [K, N] row-major matrix, a @ b), bfloat16 output, and torch.mm's float32 output beside."""
    layout, call, quoted = CUBLAS[key]
    res = base.job_cublas(torch, prob, layout, rep_ms)
    res.update({"layout": layout, "call": call, "out_dtype": "torch.bfloat16", "issue_quote_tflops": quoted})
    return res


_TRITON: dict = {}


def descriptor_api(triton, tl) -> str:
    """Which TMA descriptor API this Triton has: "tl.make_tensor_descriptor" (device-side, public
    from Triton 3.4 on) or "experimental_descriptor" (host-side: Triton 3.2 and 3.3)."""
    if hasattr(tl, "make_tensor_descriptor"):
        return "tl.make_tensor_descriptor"
    if hasattr(tl, "_experimental_descriptor_load"):
        import triton.tools.experimental_descriptor  # raises ImportError where that module is missing

        return "experimental_descriptor"
    raise RuntimeError(f"Triton {triton.__version__} has neither tl.make_tensor_descriptor nor "
                       "tl._experimental_descriptor_load: no TMA descriptors")


def triton_persistent() -> dict:
    """The persistent TMA kernel of Triton's tutorial 09 for the descriptor API this Triton has:
    {"triton", "kernel", "api", "flatten"}. Triton is imported here, on first use."""
    if _TRITON:
        return _TRITON
    import triton
    import triton.language as tl

    # an older Triton looks a kernel's names up in its module's globals only, not in this closure
    globals().update(triton=triton, tl=tl)
    api = descriptor_api(triton, tl)
    if api == "tl.make_tensor_descriptor":

        @triton.jit
        def persistent_tma(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
            # A [M, K], B [N, K] (both K-major) and C [M, N], row-major, through device-made descriptors
            a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                               block_shape=[BLOCK_M, BLOCK_K])
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                               block_shape=[BLOCK_N, BLOCK_K])
            c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                               block_shape=[BLOCK_M, BLOCK_N])
            start = tl.program_id(axis=0)
            tiles_m = tl.cdiv(M, BLOCK_M)
            tiles_n = tl.cdiv(N, BLOCK_N)
            k_tiles = tl.cdiv(K, BLOCK_K)
            per_group = GROUP_M * tiles_n
            tile_c = start - NUM_SMS  # the epilogue's own tile counter, as the tutorial keeps it
            for tile in tl.range(start, tiles_m * tiles_n, NUM_SMS, flatten=True):
                group_m = min(tiles_m - (tile // per_group) * GROUP_M, GROUP_M)
                pid_m = (tile // per_group) * GROUP_M + tile % group_m
                pid_n = (tile % per_group) // group_m
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for kt in range(k_tiles):
                    a = a_desc.load([pid_m * BLOCK_M, kt * BLOCK_K])
                    b = b_desc.load([pid_n * BLOCK_N, kt * BLOCK_K])
                    acc = tl.dot(a, b.T, acc)
                tile_c += NUM_SMS
                group_c = min(tiles_m - (tile_c // per_group) * GROUP_M, GROUP_M)
                pid_cm = (tile_c // per_group) * GROUP_M + tile_c % group_c
                pid_cn = (tile_c % per_group) // group_c
                c_desc.store([pid_cm * BLOCK_M, pid_cn * BLOCK_N], acc.to(c_ptr.dtype.element_ty))

        kernel, flatten = persistent_tma, True
    else:

        @triton.jit
        def persistent_tma_experimental(a_desc, b_desc, c_desc, M, N, K,
                                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                        GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
            # the same loops; the descriptors were made on the host (bfloat16 A [M, K], B [N, K], C [M, N])
            start = tl.program_id(axis=0)
            tiles_m = tl.cdiv(M, BLOCK_M)
            tiles_n = tl.cdiv(N, BLOCK_N)
            k_tiles = tl.cdiv(K, BLOCK_K)
            per_group = GROUP_M * tiles_n
            for tile in range(start, tiles_m * tiles_n, NUM_SMS):
                group_m = min(tiles_m - (tile // per_group) * GROUP_M, GROUP_M)
                pid_m = (tile // per_group) * GROUP_M + tile % group_m
                pid_n = (tile % per_group) // group_m
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for kt in range(k_tiles):
                    a = tl._experimental_descriptor_load(a_desc, [pid_m * BLOCK_M, kt * BLOCK_K], [BLOCK_M, BLOCK_K],
                                                         tl.bfloat16)
                    b = tl._experimental_descriptor_load(b_desc, [pid_n * BLOCK_N, kt * BLOCK_K], [BLOCK_N, BLOCK_K],
                                                         tl.bfloat16)
                    acc = tl.dot(a, b.T, acc)
                tl._experimental_descriptor_store(c_desc, acc.to(tl.bfloat16), [pid_m * BLOCK_M, pid_n * BLOCK_N])

        kernel, flatten = persistent_tma_experimental, False
    _TRITON.update({"triton": triton, "kernel": kernel, "api": api, "flatten": flatten})
    return _TRITON


def set_descriptor_allocator(torch, triton) -> str:
    """Device-made descriptors live in global scratch that Triton asks the allocator for (per
    launch); give it torch's caching allocator. Returns what was done, for the JSON."""
    if not hasattr(triton, "set_allocator"):
        return "triton.set_allocator absent: not set"

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, device="cuda", dtype=torch.int8)

    triton.set_allocator(alloc)
    return "triton.set_allocator(torch.empty(size, dtype=torch.int8, device='cuda'))"


def wgmma_ptx(compiled) -> dict:
    """base.ptx_check's flags, plus what this path must have: wgmma (and TMA) in the PTX."""
    ptx = compiled.asm.get("ptx", "") if hasattr(compiled, "asm") else ""
    flags = base.ptx_check(compiled)
    flags.update({"ptx_bytes": len(ptx), "wgmma_instructions": ptx.count("wgmma.mma_async"),
                  "ptx_has_tma": "cp.async.bulk.tensor" in ptx,
                  "wgmma_path": "wgmma.mma_async" in ptx and "mma.sync" not in ptx})
    return flags


def job_triton(torch, prob: Problem, rep_ms: int, sms: int) -> dict:
    t = triton_persistent()
    triton, kernel, api = t["triton"], t["kernel"], t["api"]
    a, b = prob.operands(K_MAJOR)
    a2, b2 = a[:, 0, :], b[0]  # A [M, K], B [N, K], both row-major (K-major)
    m, n, k = prob.m, prob.n, prob.k
    out = base.poisoned(torch, m, n, torch.bfloat16)  # bfloat16 output, as the tutorial's
    allocator = set_descriptor_allocator(torch, triton) if api == "tl.make_tensor_descriptor" else "not needed"
    configs = []
    for bm, bn, bk, stages, warps, group_m in TRITON_CONFIGS:
        label = f"BLOCK {bm}x{bn}x{bk}, {stages} stages, {warps} warps, GROUP_M {group_m}"
        grid = (min(sms, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)
        holder: dict = {}
        if api == "tl.make_tensor_descriptor":
            args = (a2, b2, out, m, n, k, a2.stride(0), b2.stride(0), out.stride(0))
        else:
            from triton.tools.experimental_descriptor import create_2d_tma_descriptor

            descs = [create_2d_tma_descriptor(x.data_ptr(), rows, cols, br, bc, x.element_size())
                     for x, rows, cols, br, bc in ((a2, m, k, bm, bk), (b2, n, k, bn, bk), (out, m, n, bm, bn))]
            args = (*descs, m, n, k)

        def run(args=args, grid=grid, bm=bm, bn=bn, bk=bk, stages=stages, warps=warps, group_m=group_m, holder=holder):
            holder["compiled"] = kernel[grid](*args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m,
                                              NUM_SMS=sms, num_stages=stages, num_warps=warps)

        RUNNERS[f"triton {label}"] = run

        def one(label=label, run=run, holder=holder, grid=grid):
            entry = {"config": label, "grid": list(grid), "out_dtype": str(out.dtype)}
            out.fill_(float("nan"))
            run()
            entry["ptx"] = wgmma_ptx(holder["compiled"])
            if not entry["ptx"]["wgmma_path"]:
                entry["check"] = {"ok": False, "error": "no wgmma.mma_async in the PTX (see ptx): not Triton's wgmma path"}
                return entry
            return base.checked_and_timed(prob, run, out, rep_ms, entry)

        e: dict = {}
        attempt(e, "r", one)
        configs.append(e["r"])
    ran = [c for c in configs if "ms" in c]
    res = {"what": "Triton tutorial 09-persistent-matmul's TMA kernel: min(#SMs, tiles) programs looping over tiles "
                   "in grouped order (GROUP_M M tiles a group), TMA descriptors, tl.dot(a, b.T) accumulating in float32",
           "descriptor_api": api, "descriptor_allocator": allocator, "flatten": t["flatten"], "num_sms": sms,
           "layout": K_MAJOR, "out_dtype": str(out.dtype), "DISABLE_MMA_V3": os.environ.get("DISABLE_MMA_V3"),
           "configs": configs}
    if ran:
        best = min(ran, key=lambda c: c["ms"])
        res.update({"best_config": best["config"], "ptx": best["ptx"],
                    **{key: best[key] for key in ("ms", "tflops", "back_to_back_ms", "back_to_back_tflops")}})
    return res


def job_tileproof(torch, prob: Problem, name: str, rep_ms: int) -> dict:
    entry = verify_and_compile(name, (prob.m, prob.n, prob.k), cold_runs=3)
    kernel = entry.pop("_kernel", None)
    if kernel is None:  # rejected at this shape: the codes are recorded, nothing runs
        return entry
    a, b = prob.operands_for(kernel.fusion)
    entry["input_strides"] = [list(a.stride()), list(b.stride())]
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[kernel.fusion.outputs[0].dtype.name]
    out = base.poisoned(torch, prob.m, prob.n, dtype)
    _bound, _stream, launch = kernel._prepare((a, b), [out], None, {})
    RUNNERS[f"tileproof {name}"] = launch
    return base.checked_and_timed(prob, launch, out, rep_ms, entry)


RUNNERS: dict = {}  # one shape's launchers, by who ran them: the rematch times the best of each again
REMATCH_ROUNDS = 5


def rematch(res: dict, runners: dict, time_ms, rounds: int = REMATCH_ROUNDS, headline: str | None = None) -> dict:
    """cuBLAS a @ b.T, the best Triton configuration and the best tileproof schedule of one shape
    (`res`, its first timings), or the `headline` schedule at every shape, timed again
    alternately, `rounds` times each with `time_ms(run)`: all three see the same clocks, so their
    ratios drift less than those of entries timed minutes apart. Medians of the rounds' times,
    and tileproof's ratios to both."""
    peers, ours = res.get("peers", {}), res.get("tileproof", {})
    timed_ours = {n: e for n, e in ours.items() if isinstance(e, dict) and "ms" in e}
    triton = peers.get("triton", {})
    if not timed_ours or "best_config" not in triton or "cublas_a_bT" not in runners:
        return {"error": "no timed tileproof schedule, Triton configuration or cuBLAS run to rematch"}
    if headline is not None and headline not in timed_ours:
        return {"error": f"the headline schedule {headline} was not timed at this shape"}
    best = headline or min(timed_ours, key=lambda n: timed_ours[n]["ms"])
    who = {"cublas_a_bT": runners["cublas_a_bT"], "triton": runners[f"triton {triton['best_config']}"],
           "tileproof": runners[f"tileproof {best}"]}
    times: dict = {w: [] for w in who}
    for _ in range(rounds):
        for w, run in who.items():
            times[w].append(time_ms(run))
    ms = {w: sorted(t)[len(t) // 2] for w, t in times.items()}
    m, n, k = res["shape"]
    # each round's own ratios: the three ran back to back there, so a round's clocks cancel
    rounds_vs = {peer: [round(p / o, 4) for p, o in zip(times[key], times["tileproof"])]
                 for peer, key in (("vs_cublas", "cublas_a_bT"), ("vs_triton", "triton"))}
    return {"what": f"cuBLAS a @ b.T, Triton's {triton['best_config']} and tileproof {best}, alternately, "
                    f"{rounds} do_bench medians each", "tileproof": best, "ms": times, "median_ms": ms,
            "tflops": {w: base.tflops(m, n, k, t) for w, t in ms.items()},
            "vs_cublas": round(ms["cublas_a_bT"] / ms["tileproof"], 4), "vs_triton": round(ms["triton"] / ms["tileproof"], 4),
            "rounds": {peer: {"ratios": r, "at_least_1": sum(x >= 1 for x in r)} for peer, r in rounds_vs.items()}}


def add_ratios(res: dict) -> None:
    """vs_cublas (cuBLAS a @ b.T's time over the entry's) and vs_triton (the best Triton
    configuration's) on every timed entry of one shape, peers included."""
    peers = res.get("peers", {})
    reference = {"cublas": peers.get("cublas_a_bT", {}), "triton": peers.get("triton", {})}
    for entry in [*peers.values(), *res.get("tileproof", {}).values()]:
        if isinstance(entry, dict):
            base.ratios(entry, reference)


def job_shape(torch, shape, rep_ms: int, sms: int, rounds: int = REMATCH_ROUNDS, headline: str | None = None) -> dict:
    m, n, k = shape
    prob = Problem(torch, m, n, k)
    res: dict = {"shape": [m, n, k], "check_rows": int(prob.rows.numel()), "peers": {}, "tileproof": {}}
    attempt(res["peers"], "cublas_a_bT", lambda: job_cublas(torch, prob, "cublas_a_bT", rep_ms))
    attempt(res["peers"], "triton", lambda: job_triton(torch, prob, rep_ms, sms))
    for name in SCHEDULES:
        attempt(res["tileproof"], name, lambda name=name: job_tileproof(torch, prob, name, rep_ms))
        torch.cuda.empty_cache()
    attempt(res["peers"], "cublas_a_b", lambda: job_cublas(torch, prob, "cublas_a_b", rep_ms))
    add_ratios(res)
    a, b = prob.operands(K_MAJOR)
    out = base.poisoned(torch, m, n, torch.bfloat16)
    RUNNERS["cublas_a_bT"] = lambda: torch.matmul(a[:, 0, :], b[0].T, out=out)
    attempt(res, "rematch", lambda: rematch(res, RUNNERS, lambda run: base.timed(run, m, n, k, rep_ms)["ms"], rounds,
                                                headline))
    RUNNERS.clear()
    prob._layouts.clear()
    return res


def environment(torch) -> dict:
    env = base.environment(torch)
    env["capability"] = list(torch.cuda.get_device_capability(0))
    env["DISABLE_MMA_V3_at_start"] = _DISABLE_MMA_V3_BEFORE
    e: dict = {}
    attempt(e, "api", lambda: triton_persistent()["api"])
    env["triton_descriptor_api"] = e["api"]
    return env


# -- the table ----------------------------------------------------------------------------------
def rows_of(results: dict) -> list[dict]:
    """One row per entry of every shape: shape, who, layout, output dtype, ms, TFLOP/s, ratios."""
    rows = []
    for key, r in results.get("results", {}).items():
        if not isinstance(r, dict) or ("error" in r and "peers" not in r):
            rows.append({"shape": key, "who": "-", "layout": "-", "note": str((r or {}).get("error", r))[:90]})
            continue
        peers = r.get("peers", {})
        for who in ("cublas_a_bT", "cublas_a_b", "triton"):
            p = peers.get(who, {})
            row = {"shape": key, "who": PEER_LABELS[who], "layout": p.get("layout", CUBLAS.get(who, (K_MAJOR,))[0]),
                   "out": short_dtype(p.get("out_dtype")), "ms": p.get("ms"), "tflops": p.get("tflops"),
                   "vs_cublas": p.get("vs_cublas"), "vs_triton": p.get("vs_triton"),
                   "back_to_back_tflops": p.get("back_to_back_tflops")}
            if who == "triton":
                row["note"] = (f"{p['best_config']}; {p.get('descriptor_api')}" if "best_config" in p
                               else p.get("error") or first_failure(p) or "no configuration ran")
            else:
                row["note"] = (f"{p.get('call', '')}; issue: {p.get('issue_quote_tflops')}" if "ms" in p
                               else p.get("error") or (p.get("matmul") or {}).get("error", ""))
            rows.append(row)
        for name, e in r.get("tileproof", {}).items():
            row = {"shape": key, "who": f"tileproof {name}", "layout": e.get("layout", K_MAJOR),
                   "out": short_dtype(e.get("out_dtype")), "ms": e.get("ms"), "tflops": e.get("tflops"),
                   "vs_cublas": e.get("vs_cublas"), "vs_triton": e.get("vs_triton"),
                   "back_to_back_tflops": e.get("back_to_back_tflops")}
            if "error" in e:
                row["note"] = e["error"]
            elif not e.get("accepted", True):
                row["note"] = f"rejected: {', '.join(e.get('rejection_codes', []))}"
            elif "ms" not in e:
                row["note"] = (e.get("check") or {}).get("error", "not timed")
            else:
                row["note"] = f"verify {e.get('verify_s')} s, cold compile {e.get('cold_compile_s')} s"
            rows.append(row)
    return rows


def short_dtype(name) -> str | None:
    if name is None:
        return None
    return {"float32": "f32", "bfloat16": "bf16"}.get(str(name).replace("torch.", ""), str(name))


def first_failure(triton_res: dict) -> str | None:
    for c in triton_res.get("configs", []):
        why = c.get("error") or (c.get("check") or {}).get("error")
        if why:
            return f"{c.get('config')}: {why}"
    return None


def table(results: dict) -> str:
    head = (f"{'shape':16} {'implementation':26} {'layout':20} {'out':4} {'ms':>8} {'TFLOP/s':>8} "
            f"{'vs cuBLAS':>9} {'vs Triton':>9} {'b2b TFLOP/s':>11}  note")
    lines = [head]

    def fmt(v) -> str:
        return "-" if v is None else str(v)

    for row in rows_of(results):
        lines.append(f"{row['shape']:16} {row['who']:26} {row['layout']:20} {fmt(row.get('out')):4} "
                     f"{fmt(row.get('ms')):>8} {fmt(row.get('tflops')):>8} {fmt(row.get('vs_cublas')):>9} "
                     f"{fmt(row.get('vs_triton')):>9} {fmt(row.get('back_to_back_tflops')):>11}  "
                     f"{str(row.get('note', ''))[:100]}")
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file to write (default: benchmarks/results/hopper_matmul/<machine>.json, "
                             "<machine>_<shapes>.json for fewer shapes; <machine> is cpu with --compile-only)")
    parser.add_argument("--shapes", default="all",
                        help="comma-separated MxNxK shapes (default: all of "
                             + ",".join(shape_key(s) for s in SHAPES) + ")")
    parser.add_argument("--rep-ms", type=int, default=200,
                        help="do_bench's repetition time per kernel (default: %(default)s)")
    parser.add_argument("--rematch-rounds", type=int, default=REMATCH_ROUNDS,
                        help="rounds of the rematch, the three best timed alternately (default: %(default)s)")
    parser.add_argument("--schedules", default="all",
                        help="comma-separated names of SCHEDULES to build and time (default: all)")
    parser.add_argument("--headline", default=None,
                        help="the schedule the rematch times at every shape (default: each shape's fastest in the "
                             "first timings)")
    parser.add_argument("--compile-only", action="store_true",
                        help="verify and compile the tileproof schedules at every shape (NVRTC, sm_90a), print the "
                             "times; no GPU")
    parser.add_argument("--jobs", type=int, default=1,
                        help="with --compile-only: processes that verify and compile the builds (default: "
                             "%(default)s; the times then count each other's load)")
    args = parser.parse_args(argv)
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as e:
        parser.error(f"--shapes: {e}")
    if args.rep_ms <= 0:
        parser.error("--rep-ms must be positive")
    if args.rematch_rounds <= 0:
        parser.error("--rematch-rounds must be positive")
    if args.jobs <= 0:
        parser.error("--jobs must be positive")
    if args.schedules.strip().lower() not in ("", "all"):
        names = [x.strip() for x in args.schedules.split(",") if x.strip()]
        unknown = [x for x in names if x not in SCHEDULES]
        if unknown or not names:
            parser.error(f"--schedules: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(SCHEDULES)}")
        for name in [x for x in SCHEDULES if x not in names]:
            del SCHEDULES[name]
    if args.headline is not None and args.headline not in SCHEDULES:
        parser.error(f"--headline: {args.headline} is not among the schedules timed")
    started = time.time()
    results: dict = {
        "script": "benchmarks/hopper_matmul.py", "issue": 13,
        "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
        "shapes": [shape_key(s) for s in shapes],
        "schedules": {name: f"tileproof.recipes {call_text(name)}" for name in SCHEDULES},
        "headline": args.headline or "each shape's fastest schedule in the first timings",
        "triton_configs": [f"BLOCK {bm}x{bn}x{bk}, {s} stages, {w} warps, GROUP_M {g}"
                           for bm, bn, bk, s, w, g in TRITON_CONFIGS],
        "cublas": {key: {"layout": layout, "call": call, "issue_quote_tflops": q}
                   for key, (layout, call, q) in CUBLAS.items()},
    }
    if args.compile_only:
        args.out = args.out or results_path("hopper_matmul", None, results_variant(shapes))
        results["mode"] = "compile-only"
        results["target"] = base.TARGET
        results["jobs"] = args.jobs
        results["compile"] = compile_only(shapes, args.jobs)
        for key, entries in results["compile"].items():
            for name, e in entries.items():
                print(compile_line(key, name, e))
        bad = compile_failures(results["compile"])
        entries = [e for es in results["compile"].values() for e in es.values()]
        print(f"{len(entries)} schedule builds ({len(shapes)} shapes x {len(SCHEDULES)} schedules): "
              f"{sum(bool(e.get('accepted')) for e in entries)} accepted, "
              f"{sum('accepted' in e and not e['accepted'] for e in entries)} rejected, "
              f"{sum('error' in e for e in entries)} failed")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.out}")
        return 1 if bad else 0
    if os.environ.pop("DISABLE_MMA_V3", None) is not None:
        print("hopper_matmul.py: DISABLE_MMA_V3 removed from the environment (this is Triton's wgmma path)",
              file=sys.stderr)
    import torch

    if not torch.cuda.is_available():
        print("hopper_matmul.py: no CUDA device (use --compile-only to check the schedules without one)",
              file=sys.stderr)
        return 2
    if tuple(torch.cuda.get_device_capability(0)) != (9, 0):
        print(f"hopper_matmul.py: wgmma needs a Hopper GPU (sm_90a); this one is {torch.cuda.get_device_name(0)}, "
              f"capability {torch.cuda.get_device_capability(0)}", file=sys.stderr)
        return 2
    results["mode"] = "gpu"
    results["environment"] = environment(torch)
    args.out = args.out or results_path("hopper_matmul", results["environment"]["device"], results_variant(shapes))
    results["timing"] = (f"triton.testing.do_bench(warmup=25 ms, rep={args.rep_ms} ms), median of the per-launch "
                         "CUDA-event times (>= 20), L2 flushed before each")
    results["check"] = (f"float64 reference on every M/1024-th row and the last {TAIL_ROWS} rows, every column, no NaN "
                        "anywhere: |err| <= K 2^-23 |A||B|^T (+ 2^-8 |D| for a bfloat16 output)")
    results["ratios"] = "vs_cublas: cuBLAS a @ b.T (both K-major) ms / this ms; vs_triton: best Triton config ms / this ms"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results["results"] = {}
    for shape in shapes:
        attempt(results["results"], shape_key(shape),
                lambda shape=shape: job_shape(torch, shape, args.rep_ms, sms, args.rematch_rounds, args.headline))
        torch.cuda.empty_cache()
    results["table"] = rows_of(results)
    results["seconds"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(table(results))
    for key, r in results["results"].items():
        print(rematch_line(key, (r or {}).get("rematch", {})))
    print(f"wrote {args.out}")
    return 0


def rematch_line(key: str, r: dict) -> str:
    """One shape's rematch, as a line: the three medians and tileproof's ratios."""
    if "median_ms" not in r:
        return f"{key:<16} rematch: {r.get('error', 'not run')}"
    t = r["tflops"]
    return (f"{key:<16} rematch ({len(r['ms']['tileproof'])} rounds, alternately): tileproof {r['tileproof']} "
            f"{t['tileproof']} TFLOP/s, cuBLAS a @ b.T {t['cublas_a_bT']}, Triton {t['triton']}; "
            f"vs cuBLAS {r['vs_cublas']}, vs Triton {r['vs_triton']}"
            + "".join(f"; {peer.replace('_', ' ')} round by round {min(x['ratios'])}-{max(x['ratios'])}, "
                      f">= 1 in {x['at_least_1']} of {len(x['ratios'])}" for peer, x in r.get("rounds", {}).items()))


if __name__ == "__main__":
    sys.exit(main())
