"""Schedules with loops over split broadcast axes that no concrete loop shares (nvFuser's trivial
loops: they run once, with index 0), shared by the rule tests (tests/rules/test_tma_broadcast_loops.py),
the execution tests (tests/execution/test_broadcast_loops.py) and the GPU run
(tests/gpu/test_broadcast_loops.py)."""

from __future__ import annotations

import tileproof as tp
from tileproof.rule_examples import copy_chain, tma_copy

P = tp.ParallelType


def tma_broadcast_loops(split: int = 4, shape=None):
    """out[M, 1, N] = in[M, 1, N] through a TMA tile in shared memory: out split into [M/8, N/32, 8,
    b1, 32] (BIDx, BIDy, TIDy, -, TIDx), the TMA tile [8, 32] per block, its broadcast split by
    `split` into its own loops b{1}, b{split} (right of its compute-at position 2, shared by no
    loop of out). Symbolic M and N, or the concrete `shape` (M, N). Returns (fusion, t1, t2)."""
    fusion, t0, t1, t2 = tma_copy("tma_broadcast_loops", ["M", 1, "N"] if shape is None else [shape[0], 1, shape[1]])
    if shape is None:
        fusion.assume("N % 4 == 0")  # the TMA's row stride: a multiple of 16 bytes
        fusion.assume("N <= 65535 * 32")  # gridDim.y
    t2.split(0, 8).split(3, 32).reorder({3: 1, 1: 2, 2: 3})  # [M/8, N/32, 8, b1, 32]
    tp.propagate_transforms(t2)
    t1.split(3, split)  # [M/8, N/32, 8, b{1}, b{split}, 32]
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.BIDy)
    t2.axis(2).parallelize(P.TIDy)
    t2.axis(-1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(-1).parallelize(P.Bulk)
    t1.inline_at(2)
    return fusion, t1, t2


def shared_broadcast_loops(*, allocation_merge: bool):
    """t0[32, 1] -> t1 (shared) -> t2, one thread per row (TIDx), t1's broadcast split by 4 into its
    own loops b{1}, b{4}. With `allocation_merge`, t1 is allocated along merge(I0, b1): the broadcast
    loop's index reaches that concrete ID (a different address per iteration), which running the loop
    once would skip. Returns (fusion, t1)."""
    fusion, t0, t1, t2 = copy_chain("shared_broadcast_loops", [32, 1])
    t1.set_memory_type(tp.MemoryType.Shared)
    if allocation_merge:
        t1.merge(0)
        t1.set_allocation_domain(t1.get_loop_domain())
        t1.set_loop_domain(t1.get_logical_domain())
    t1.split(1, 4)
    for t in (t1, t2):
        t.axis(0).parallelize(P.TIDx)
    return fusion, t1
