"""Schedules with a rotated loop (tp.rotate_loop), shared by the CPU tests (tests/rules/test_loop_rotation.py)
and the GPU tests (tests/gpu/test_loop_rotation.py)."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def rotated_rows(name: str, rotated=(1, 2), tile: int = 32):
    """out = exp(x) + x over x [M, N] (symbolic): a block a row (BIDx), the row in tiles of `tile`
    threads (TIDx), a serial loop over the tiles; the load of x and the exp are inlined into it and
    the statements of the tensors numbered in `rotated` (1: the load, 2: the exp, 3: the add, 4: the
    store) rotated. Returns (fusion, [t1, t2, t3, t4])."""
    with tp.Fusion(name) as fusion:
        x = tp.make_tensor(["M", "N"]); fusion.add_input(x)
        t1 = tp.set(x)
        t2 = tp.exp(t1)
        t3 = tp.add(t2, t1)
        t4 = tp.set(t3); fusion.add_output(t4)
    tensors = [t1, t2, t3, t4]
    for t in tensors:
        t.split(1, tile)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    for t in (t1, t2, t3):
        t.inline_at(2)
    tp.rotate_loop(t4, 1, [tensors[k - 1] for k in rotated])
    return fusion, tensors


def rotated_flat(name: str, block: int = 128, per_block: int = 4):
    """out = x * 2 over x [M, N] (symbolic, strided: not contiguous) merged flat and split into blocks
    of `per_block` tiles of `block` threads: the loop over a block's tiles is serial and x's indices
    divide by N (a variable), the load rotated. Returns (fusion, [t1, t2])."""
    with tp.Fusion(name) as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=False); fusion.add_input(x)
        t1 = tp.set(x)
        t2 = tp.mul(t1, 2.0); fusion.add_output(t2)
    fusion.assume("M <= 4096"); fusion.assume("N <= 65536")  # the blocks within gridDim.x's limit
    for t in (t1, t2):
        t.merge(0).split(0, block).split(0, per_block)  # [blocks, per_block, block]
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t1.inline_at(2)
    tp.rotate_loop(t2, 1, [t1])
    return fusion, [t1, t2]
