"""Random wgmma schedules, for the fuzzer's wgmma family (benchmarks/fuzz.py): D[M, N] =
sum_k A[M, 1, K] B[1, N, K] built by examples/valid/wgmma.py's hopper() with random parameters,
so that the combinations no bundled example holds are verified, compiled and (with --run) run.

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
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tileproof as tp

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "valid"))
from wgmma import hopper  # noqa: E402

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
    kw: dict = {"block": (bm, bn)}
    if bm == 256 and rng.random() < 0.7:
        kw["warpgroup_rows"] = 128  # two warpgroups of two 64-row wgmmas (else four of one)
    elif rng.random() < (0.5 if bm == 192 else 0.15):
        kw["split_n"] = True  # two warpgroups splitting the columns (else one per 64 rows: three at 192)
    stages = rng.choice([1, 2, 3, 4])
    if stages > 1:
        kw.update(stages=stages, prefetch=rng.randint(0, stages - 1) if rng.random() < 0.9 else stages)
    if rng.random() < 0.5:
        kw["group"] = rng.choice([2, 4, 8])
    if stages > 1 and rng.random() < 0.6:
        regs = rng.choice([(40, 232), (24, 240), None])
        kw["specialized"] = (tp.WarpSpecialized(P.TIDy, num_registers=regs) if regs else
                             tp.WarpSpecialized(P.TIDy))
        if rng.random() < 0.3:
            kw["cluster"] = 2
        if rng.random() < 0.3:
            kw["persistent"] = rng.choice([2, 4, 8, 132])
            kw.setdefault("group", 8)
    elif stages > 1 and rng.random() < 0.3:
        kw["war_mbarriers"] = True
    if rng.random() < 0.1:
        kw["cluster"] = 2  # without warp specialization: CLUSTER-MULTICAST / WS-ROLES reject it
    if rng.random() < 0.4:
        kw["out_dtype"] = tp.bfloat16
        if rng.random() < 0.5:
            kw["stmatrix"] = True
            if not kw.get("split_n") and rng.random() < 0.4:  # one TMA box staged at a time
                kw["store_by_box"] = True
                if rng.random() < 0.3:
                    kw["store_swizzle"] = 64  # boxes of 32 columns
    if rng.random() < 0.2:
        kw["a_major"] = "MN"
    if rng.random() < 0.2:
        kw["b_major"] = "MN"
    if rng.random() < 0.3:  # symbolic sizes, multiples of the tile (K of 8 or 64)
        k_multiple = rng.choice([8, 64])
        fusion = hopper("M", "N", "K", **kw)
        for s, q in (("M", bm), ("N", bn * kw.get("cluster", 1) if rng.random() < 0.5 else bn), ("K", k_multiple)):
            fusion.assume(f"{s} % {q} == 0")
        sizes: tuple = ("M", "N", "K")
        shown = f"M, N, K symbolic (K % {k_multiple} == 0)"
    else:
        whole = rng.random() < 0.6
        sizes = (_size(rng, bm, whole), _size(rng, bn, whole), 8 * rng.randint(1 if stages == 1 else 9, 96))
        fusion = hopper(*sizes, **kw)
        shown = f"{sizes[0]}x{sizes[1]}x{sizes[2]}"
    steps = [shown] + [f"{k}={v}" for k, v in kw.items()]
    return WgmmaCase(fusion, "sm_90a", steps, sizes)


__all__ = ["WgmmaCase", "wgmma_case"]
