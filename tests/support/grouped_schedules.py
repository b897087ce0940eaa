"""Schedules of grouped reductions (tp.group_reductions) shared by the tests of the one loop nest
they run in (tests/execution/test_grouped_nest.py), the rule LOOP-NEST-ORDER without the group
(tests/rules/test_grouped_reduction.py) and the CPU simulation of their values
(tests/differential/test_differential_reduction.py)."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def shared_producer_sum_and_max(grouped: bool = True, tile: int = 8, name: str = "shared_producer"):
    """T1 = T0 + 1 of [M, N], T2 = sum(T1, 1), T3 = max(T1, 1), T4 = T2 + T3: each reduction
    rfactored on a serial loop over the row in steps of `tile` (T5, T6: each thread's partials of a
    strided part) and finished on TIDx{tile}, T1 inlined into both partials (nvFuser's
    GroupedReductionAfterComputeAt with a max); `grouped`: the partials and the finals grouped."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.add(t0, 1.0)
        t2 = tp.sum(t1, [1])
        t3 = tp.max(t1, [1])
        fusion.add_output(tp.add(t2, t3))
    fusion.assume("N <= 4096")
    partials = []
    for t in (t2, t3):
        t.split(1, tile)
        partial = t.rfactor([1])
        partial.reorder({1: 2})
        partials.append(partial)
    tp.propagate_transforms(partials[0])
    tp.inline_most(fusion)
    if grouped:
        tp.group_reductions(partials)
        tp.group_reductions([t2, t3])
    t2.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t2)
    return fusion
