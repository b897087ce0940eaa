"""Random wgmma schedules, for the fuzzer's wgmma family (benchmarks/fuzz.py): D[M, N] =
sum_k A[M, 1, K] B[1, N, K] built by the Hopper GEMM recipe (tileproof.recipes.hopper_gemm) with
random HopperGemmParams, so that the combinations no bundled example holds are verified, compiled
and (with --run) run. A case's steps are its sizes and the parameters' repr.

A draw: a block tile of 64 or 128 rows by 64, 128 or 256 columns, or 256 x 128, 192 x 192 or
192 x 256 (a warpgroup per 64 rows, per 128 rows, or two splitting the columns: several wgmmas
each; three m64n256 consumers and a producer leave ptxas too few registers for one wgmma:
WGMMA-INSTRUCTION-REGISTERS); 1 to 4 TMA stages with a
random prefetch (now and then one the stages cannot hold: rejected); the blocks grouped or not;
a warp-specialized producer (setmaxnreg counts or none) or mbarrier WAR without one; clusters of
2 with B multicast, a persistent grid of a few blocks, or one tile per block; a float32 output,
or a bfloat16 one from registers or through stmatrix and a TMA store (the staging tile whole or
one box at a time, boxes of 64 or 32 columns); A M-major and B N-major now and then; sizes
concrete (sometimes not multiples of the tile, K a multiple of 8: TMA's 16-byte rows) or symbolic
with the tile-multiple assumptions. Invalid combinations (a cluster without warp specialization,
too much shared memory) are left for the verifier to reject. Every call with one seed builds the same schedule.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import tileproof as tp
from tileproof.recipes import (Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, Operand, TmaPipeline,
                               hopper_gemm)

P = tp.ParallelType


@dataclass
class WgmmaCase:
    fusion: tp.Fusion
    target: str = "sm_90a"
    steps: list[str] = field(default_factory=list)
    sizes: tuple = ()

    def __repr__(self) -> str:
        return f"WgmmaCase({'; '.join(self.steps)})"


def _size(rng: random.Random, tile: int, whole: bool) -> int:
    n = tile * rng.randint(1, 6)
    return n if whole else max(8, n - 8 * rng.randint(1, tile // 8 - 1))


def wgmma_case(seed: int) -> WgmmaCase:
    rng = random.Random(seed)
    bm, bn = rng.choice([(128, 128), (128, 256), (64, 128), (128, 64), (64, 256), (256, 128), (192, 192),
                        (192, 256)])
    tile: dict = {"m": bm, "n": bn}
    pipeline: dict = {}
    grid: dict = {}
    cluster: dict = {}
    epilogue: dict = {}
    if bm == 256 and rng.random() < 0.7:
        tile["warpgroup_rows"] = 128  # two warpgroups of two 64-row wgmmas (else four of one)
    elif rng.random() < (0.5 if bm == 192 else 0.15):
        tile["split_n"] = True  # two warpgroups splitting the columns (else one per 64 rows: three at 192)
    stages = rng.choice([1, 2, 3, 4])
    if stages > 1:
        pipeline.update(stages=stages, prefetch=rng.randint(0, stages - 1) if rng.random() < 0.9 else stages)
    if rng.random() < 0.5:
        grid["group"] = rng.choice([2, 4, 8])
    if stages > 1 and rng.random() < 0.6:
        regs = rng.choice([(40, 232), (24, 240), None])
        turns = rng.random() < 0.3  # ping-pong: WS-PING-PONG refuses it where one warpgroup consumes
        pipeline["warp_specialized"] = (tp.WarpSpecialized(P.TIDy, num_registers=regs, ping_pong=turns) if regs else
                                        tp.WarpSpecialized(P.TIDy, ping_pong=turns))
        if rng.random() < 0.3:
            cluster["size"] = 2
        if rng.random() < 0.3:
            grid["persistent"] = rng.choice([2, 4, 8, 132])
            grid.setdefault("group", 8)
    elif stages > 1 and rng.random() < 0.3:
        pipeline["war_mbarriers"] = True
    if rng.random() < 0.1:
        cluster["size"] = 2  # without warp specialization: CLUSTER-MULTICAST / WS-ROLES reject it
    if rng.random() < 0.4:
        epilogue["dtype"] = tp.bfloat16
        if rng.random() < 0.5:
            epilogue["stmatrix"] = True
            if not tile.get("split_n") and rng.random() < 0.4:  # one TMA box staged at a time
                epilogue["by_box"] = True
                if rng.random() < 0.3:
                    epilogue["swizzle"] = 64  # boxes of 32 columns
    a_major = "MN" if rng.random() < 0.2 else "K"
    b_major = "MN" if rng.random() < 0.2 else "K"
    params = HopperGemmParams(tile=HopperTile(**tile), pipeline=TmaPipeline(**pipeline), grid=GridOrder(**grid),
                              cluster=Cluster(**cluster), epilogue=Epilogue(**epilogue), a=Operand(major=a_major),
                              b=Operand(major=b_major))
    if rng.random() < 0.3:  # symbolic sizes, multiples of the tile (K of 8 or 64)
        k_multiple = rng.choice([8, 64])
        fusion = hopper_gemm("M", "N", "K", params)
        n_multiple = bn * params.cluster.size if rng.random() < 0.5 else bn
        for s, q in (("M", bm), ("N", n_multiple), ("K", k_multiple)):
            fusion.assume(f"{s} % {q} == 0")
        sizes: tuple = ("M", "N", "K")
        shown = f"M, N, K symbolic (K % {k_multiple} == 0)"
    else:
        whole = rng.random() < 0.6
        sizes = (_size(rng, bm, whole), _size(rng, bn, whole), 8 * rng.randint(1 if stages == 1 else 9, 96))
        fusion = hopper_gemm(*sizes, params)
        shown = f"{sizes[0]}x{sizes[1]}x{sizes[2]}"
    return WgmmaCase(fusion, "sm_90a", [shown, repr(params)], sizes)


__all__ = ["WgmmaCase", "wgmma_case"]
