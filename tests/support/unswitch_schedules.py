"""Schedules with an Unswitch loop (nvFuser's ParallelType::Unswitch), for the codegen tests
(tests/codegen/test_codegen_unswitch.py) and the GPU tests (tests/gpu/test_unswitch.py): a
pointwise exp over a block's tile of `unswitch` x 128 elements (an Unroll loop inside, or an
Unswitch loop of symbolic extent), and a row sum whose serial reduction loop is unswitched.
"""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def unswitched_exp(unswitch: int = 4, unroll: int | None = None, *, symbolic: bool = False,
                   blocks: int = 8) -> tp.Fusion:
    """exp over [M]: [BIDx, Unswitch{unswitch}, (Unroll{unroll},) TIDx{128}]; symbolic: [BIDx{blocks},
    Unswitch{ceil(M / 128 / blocks)}, (Unroll{unroll},) TIDx{128}], a loop of symbolic extent."""
    name = f"unswitched_exp_{'symbolic' if symbolic else unswitch}_{unroll or 1}"
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.exp(t0)
        fusion.add_output(t1)
    t1.split(0, 128)
    if unroll:
        t1.split(0, unroll)
    if symbolic:
        t1.split(0, blocks, inner_split=False)  # [BIDx{blocks}, Unswitch{ceil(. / blocks)}, ...]
    else:
        t1.split(0, unswitch)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Unswitch)
    if unroll:
        t1.axis(2).parallelize(P.Unroll)
    t1.axis(-1).parallelize(P.TIDx)
    return fusion


def unswitched_row_sum(unswitch: int = 4, threads: int = 32) -> tp.Fusion:
    """sum over the last axis of [M, N]: a block per row, [BIDx, r{N / threads / unswitch},
    rUnswitch{unswitch}, rTIDx{threads}], then the block's combine."""
    with tp.Fusion(f"unswitched_row_sum_{unswitch}") as fusion:
        t0 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    t1.split(1, threads).split(1, unswitch)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Unswitch)
    t1.axis(3).parallelize(P.TIDx)
    return fusion


def unswitched_copy_chain(unswitch: int = 2) -> tp.Fusion:
    """T2 = T1 + 1 with T1 = set(T0) in registers, inlined into T2's Unswitch loop: both statements
    run twice over, under one guard."""
    with tp.Fusion(f"unswitched_copy_chain_{unswitch}") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.add(t1, 1.0)
        fusion.add_output(t2)
    t2.split(0, 128).split(0, unswitch)  # [BIDx, Unswitch, TIDx]
    tp.propagate_transforms(t2)
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(1).parallelize(P.Unswitch)
    t2.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(t2)
    tp.inline_most(fusion)
    return fusion
