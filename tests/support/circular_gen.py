"""Random register circular buffers, for the circular-buffer differential test: two inputs a and
b [M, N] read through register caches (or cp.async copies into shared memory), u = a + 1, v = u * b (then + a, and now and then a sum over
N), the output's N split once or twice, its axes on Serial / Unroll / TIDx / BIDx, propagated,
parallelized alike and inlined (inline_most), the Unroll axes unrolled after, then one or both caches circular-buffered with 2-3
stages and a random prefetch. Within a loop the statements run a's copy, u, b's copy, v: a
circular buffer of b's cache takes its copy out from between two statements that share the loop
(execution/pipeline.py isolate_circular_copies). Every call with one seed builds the same
schedule."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import tileproof as tp

P = tp.ParallelType


@dataclass
class CircularCase:
    fusion: tp.Fusion
    shape: list[int]
    steps: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"CircularCase({self.shape}: {'; '.join(self.steps)})"


def circular_case(seed: int) -> CircularCase:
    rng = random.Random(seed)
    shape = [rng.randint(1, 3), rng.choice([8, 12, 16, 24, 32, 40, 48, 64])]
    reduce = rng.random() < 0.35
    steps = ["sum over N"] if reduce else []
    with tp.Fusion(f"circular_{seed}") as fusion:
        a = tp.make_contig_concrete_tensor(shape)
        b = tp.make_contig_concrete_tensor(shape)
        fusion.add_input(a)
        fusion.add_input(b)
        v = tp.mul(tp.add(a, 1.0), b)
        if rng.random() < 0.5:
            v = tp.add(v, a)
            steps.append("+ a")
        out = tp.sum(v, [1]) if reduce else v
        fusion.add_output(out)
    # cp.async caches (shared memory) from a stream of their own: every other draw of a seed as before them
    kinds = random.Random(f"{seed}:copies")
    caches = []
    for t, name in ((a, "a"), (b, "b")):
        if kinds.random() < 0.25:
            caches.append(t.cache_after(tp.LoadStoreOpType.CpAsync))
            caches[-1].set_memory_type(tp.MemoryType.Shared)
            steps.append(f"{name}'s cache by cp.async")
        else:
            caches.append(t.cache_after())
    ref = v if reduce else out
    factors = [rng.choice([2, 4, 8]) for _ in range(rng.randint(1, 2))]
    for f in factors:  # [M, N] -> [M, N / f1, f1] -> [M, N / f1 / f2, f2, f1]
        ref.split(1, f)
    steps.append(f"N split by {factors}")
    tp.propagate_transforms(ref)
    kinds = [rng.choice([P.Serial, P.BIDx])] + [rng.choice([P.Serial, P.Unroll, P.Unroll]) for _ in factors[1:]] + \
        [rng.choice([P.Serial, P.Unroll, P.TIDx])]
    kinds.insert(1, P.Serial)  # N / (f1 f2): a serial loop, the circular loop
    for k, kind in enumerate(kinds):
        if kind in (P.BIDx, P.TIDx):
            ref.axis(k).parallelize(kind)
    steps.append(f"axes {[k.name for k in kinds]}")
    tp.parallelize_all_like(ref)
    tp.inline_most(fusion)
    # unrolled after inlining, as recipes/normalization.py unrolls its batch loop: the statements
    # inlined into the loop share it (inline_most stops before an Unroll axis), their registers one
    # iteration's
    for t in [t for t in fusion.tensors if not t.is_fusion_input]:
        for k, kind in enumerate(kinds):
            if kind is P.Unroll and k < len(t.loop) and not t.axis(k).is_broadcast:
                t.axis(k).parallelize(P.Unroll)
    chosen = rng.choice([[1], [1], [0], [0, 1]])
    for c in chosen:
        stages = rng.randint(2, 3)
        prefetch = rng.choice([-1, 0, stages - 1])
        if rng.random() < 0.3 and caches[c].memory_type is not tp.MemoryType.Shared:
            caches[c].set_memory_type(tp.MemoryType.Shared)
            steps.append(f"{'ab'[c]}'s cache in shared memory")
        caches[c].circular_buffer(stages, prefetch)
        steps.append(f"{'ab'[c]}'s cache circular_buffer({stages}, {prefetch})")
    return CircularCase(fusion, shape, steps)


__all__ = ["CircularCase", "circular_case"]
