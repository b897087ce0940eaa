"""Random reduction schedules with concrete extents, for the reduction differential test and the
fuzzer's reduction family: tp.sum or tp.max of a small [M, N] (or [M, N, K]) tensor over some
axes, with indivisible splits, reorders, reduction axes on Serial / Unroll / TIDx / TIDy / TIDz
(and now and then on BIDx or Vectorize, which must be rejected), iteration axes on blocks and
threads, rfactor, a cached (sometimes vectorized) input, a cache_before'd output, and shared
memory. Every call with one seed builds the same schedule.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import tileproof as tp

P = tp.ParallelType
THREADS = (P.TIDx, P.TIDy, P.TIDz)
BLOCKS = (P.BIDx, P.BIDy)


@dataclass
class ReductionCase:
    fusion: tp.Fusion
    op: str  # "sum" or "max"
    shape: list[int]
    axes: list[int]
    steps: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"ReductionCase({self.op} over {self.axes} of {self.shape}: {'; '.join(self.steps)})"


def _split_some(rng: random.Random, tv, steps: list[str], name: str, only_reduction: bool | None = None) -> None:
    for _ in range(rng.randint(0, 2)):
        choices = [k for k, i in enumerate(tv.loop) if (i.static_extent or 0) > 1
                   and i.parallel_type is P.Serial and (only_reduction is None or i.is_reduction == only_reduction)]
        if not choices:
            return
        k = rng.choice(choices)
        factor = rng.choice([2, 3, 4, 5, 8, 16, 32, 48, 96, 128])
        if factor >= (tv.loop[k].static_extent or 0) * 2:
            factor = rng.randint(1, max(1, tv.loop[k].static_extent))
        tv.split(k, factor)
        steps.append(f"{name}.split({k}, {factor})")


def _parallelize(rng: random.Random, tv, steps: list[str], name: str) -> None:
    used: set = set()
    threads = 1
    for k, i in enumerate(tv.loop):
        e = i.static_extent or 1
        if i.is_reduction:
            options = [P.Serial, P.Unroll] + [p for p in THREADS if p not in used] * 2
            if rng.random() < 0.05:
                options.append(P.BIDx if P.BIDx not in used else P.Serial)
            if rng.random() < 0.05 and k == len(tv.loop) - 1:
                options.append(P.Vectorize)
        else:
            options = [P.Serial, P.Unroll] + [p for p in THREADS + BLOCKS if p not in used]
        p = rng.choice(options)
        if p in THREADS and threads * e > 1024:
            p = P.Serial
        if p is P.Unroll and e > 64:
            p = P.Serial
        if p is not P.Serial:
            tv.axis(k).parallelize(p)
            steps.append(f"{name}.axis({k}).parallelize({p})")
            used.add(p)
            if p in THREADS:
                threads *= e


def reduction_case(seed: int) -> ReductionCase:
    rng = random.Random(seed)
    rank = rng.choice([2, 2, 2, 3])
    shape = [rng.randint(1, 5)] + [rng.randint(1, 70) for _ in range(rank - 1)]
    if rank == 3:
        shape = [rng.randint(1, 4), rng.randint(1, 12), rng.randint(1, 24)]
    axes = sorted(rng.sample(range(rank), rng.randint(1, rank)))
    axes = [a for a in axes if shape[a] > 1] or [rank - 1]
    if shape[axes[0]] == 1:
        shape[axes[0]] = 2
    op = rng.choice(["sum", "sum", "max"])
    dtype = tp.float32 if op == "sum" else rng.choice([tp.float32, tp.int32])
    steps: list[str] = []
    with tp.Fusion(f"reduction_{seed}") as fusion:
        t0 = tp.make_contig_concrete_tensor(shape, dtype=dtype)
        fusion.add_input(t0)
        t1 = getattr(tp, op)(t0, axes)
        fusion.add_output(t1)
    red = t1
    if rng.random() < 0.3:
        red = t1.cache_before()
        steps.append("cache_before")
    cache = None
    if rng.random() < 0.4:
        cache = t0.cache_after()
        steps.append("cache_after")
    _split_some(rng, red, steps, "red")
    if rng.random() < 0.5:
        order = list(range(red.ndim))
        rng.shuffle(order)
        red.reorder(order)
        steps.append(f"red.reorder({order})")
    partial = None
    reduction_axes = [k for k, i in enumerate(red.loop) if i.is_reduction]
    if len(reduction_axes) >= 2 and rng.random() < 0.5:
        picked = rng.sample(reduction_axes, rng.randint(1, len(reduction_axes) - 1))
        partial = red.rfactor(picked)
        steps.append(f"rfactor({picked})")
    _parallelize(rng, red, steps, "red")
    if partial is not None:
        for k, i in enumerate(partial.loop):  # the partial keeps the loop's parallel types; sometimes change one
            if rng.random() < 0.2 and i.parallel_type is P.Serial and not i.is_reduction:
                partial.axis(k).parallelize(P.Unroll if (i.static_extent or 0) <= 16 else P.Serial)
        if rng.random() < 0.2:
            partial.set_memory_type(tp.MemoryType.Shared)
            steps.append("partial shared")
    if red is not t1:
        if rng.random() < 0.5:
            tp.parallelize_all_like(red, [p for p in THREADS + BLOCKS], [t1])
            steps.append("t1 like red")
        if rng.random() < 0.3:
            red.set_memory_type(tp.MemoryType.Shared)
            steps.append("red shared")
    if cache is not None:
        if rng.random() < 0.7:
            tp.propagate_transforms(partial or red)
            tp.parallelize_all_like(partial or red, list(THREADS + BLOCKS), [cache])
            steps.append("cache like the reduction")
            last = cache.loop[-1]
            if rng.random() < 0.3 and last.static_extent in (2, 4) and last.parallel_type is P.Serial:
                cache.axis(-1).parallelize(P.Vectorize)
                steps.append("cache vectorized")
        if rng.random() < 0.6:
            tp.inline_most(fusion)
            steps.append("inline_most")
    return ReductionCase(fusion, op, shape, axes, steps)


__all__ = ["ReductionCase", "reduction_case"]
