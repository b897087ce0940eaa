"""Welford schedules (tp.welford, tp.var_mean) for the model, codegen and simulator tests and
tests/gpu/test_welford.py: a block per row with the threads on TIDx (each a serial Welford of its
strided part, then the block's combine of the states), with and without rfactor, a row per
thread with no combine, a column Welford over TIDy, a grid Welford (the row over BIDy, and TIDx),
one whose mean every block reads (an allreduce), and siblings scheduled apart (rejected).
"""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def _rows(name: str, dtype: str, length, outputs: str):
    """A fusion over x [M, length] and its Welford over the row: outputs "welford" (avg, var_sum,
    n) or "var_mean" (var, mean, correction 1). Returns (fusion, the avg tensor)."""
    with tp.Fusion(name) as fusion:
        x = tp.make_tensor(["M", length], contiguity=True, dtype=dtype)
        fusion.add_input(x)
        if outputs == "var_mean":
            var, mean = tp.var_mean(x, [1])
            fusion.add_output(var)
            fusion.add_output(mean)
            return fusion, mean
        result = tp.welford(x, [1])
        for t in result:
            fusion.add_output(t)
    return fusion, result.avg


def block_welford(threads: int = 128, length="N", rfactor: bool = True, dtype: str = "float32",
                  outputs: str = "welford"):
    """A block per row: [M, r{N / threads}, r{threads}], the threads on TIDx; with `rfactor` the
    serial part is a Welford per thread (the partial states) and the avg, var_sum and n combine
    those over the block, else the outputs themselves loop and combine."""
    fusion, avg = _rows(f"welford_block_{threads}_{'rf' if rfactor else 'direct'}_{dtype}", dtype, length, outputs)
    avg.split(1, threads)
    if rfactor:
        avg.rfactor([1])
    tp.propagate_transforms(avg)
    avg.axis(0).parallelize(P.BIDx)
    avg.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(avg)
    tp.inline_most(fusion)
    return fusion


def serial_welford(threads: int = 64, length="N", dtype: str = "float32"):
    """A row per thread: [M / threads (BIDx), threads (TIDx), rN], each thread's Welford a serial
    loop, no combine."""
    fusion, avg = _rows(f"welford_serial_{threads}_{dtype}", dtype, length, "welford")
    avg.split(0, threads)
    tp.propagate_transforms(avg)
    avg.axis(0).parallelize(P.BIDx)
    avg.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(avg)
    tp.inline_most(fusion)
    return fusion


def column_welford(tidx: int = 32, tidy: int = 8, dtype: str = "float32"):
    """The Welford of each column of [M, N]: `tidx` columns a block, the rows shared by `tidy`
    threads on TIDy (a serial loop each), then the combine over TIDy (lanes of a warp in
    different groups: every state through shared memory)."""
    with tp.Fusion(f"welford_column_{tidx}x{tidy}") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=dtype)
        fusion.add_input(x)
        result = tp.welford(x, [0])
        for t in result:
            fusion.add_output(t)
    avg = result.avg
    avg.split(0, tidy)  # [r{M / tidy}, r{tidy}, N]
    avg.split(2, tidx)  # [r, r{tidy}, N / tidx, tidx]
    avg.reorder({2: 0, 3: 1, 1: 2, 0: 3})  # [N / tidx, tidx, r{tidy}, r]
    tp.propagate_transforms(avg)
    avg.axis(0).parallelize(P.BIDx)
    avg.axis(1).parallelize(P.TIDx)
    avg.axis(2).parallelize(P.TIDy)
    tp.parallelize_all_like(avg)
    tp.inline_most(fusion)
    return fusion


def grid_welford(blocks: int = 4, threads: int | None = None, rfactor: bool = False, outputs: str = "welford"):
    """A grid Welford: a row per BIDx, its reduction axis split into `blocks` parts on BIDy
    ([M, r{blocks}, r{N / blocks}]), each part a serial loop, or with `threads` split again over
    TIDx ([M, r{blocks}, r{N / blocks / threads}, r{threads}]; with `rfactor` the serial part is a
    Welford per thread first). The last block of each row combines the blocks' states."""
    name = f"welford_grid_{blocks}_{threads or 1}{'_rf' if rfactor else ''}_{outputs}"
    fusion, avg = _rows(name, "float32", "N", outputs)
    avg.split(1, blocks, inner_split=False)  # [M, r{blocks}, r{N / blocks}]
    if threads:
        avg.split(2, threads)  # [M, r{blocks}, r{N / blocks / threads}, r{threads}]
        if rfactor:
            avg.rfactor([2])
    tp.propagate_transforms(avg)
    avg.axis(0).parallelize(P.BIDx)
    avg.axis(1).parallelize(P.BIDy)
    if threads:
        avg.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(avg)
    tp.inline_most(fusion)
    return fusion


def grid_welford_read_everywhere(blocks: int = 4, threads: int | None = None, centered_sum: bool = False):
    """x - avg of each row, with the row on BIDy in both (the Welford as grid_welford's): every
    block of a row reads the row's mean, an allreduce of a grid Welford (a grid-wide barrier, every
    block combining the states). `threads`: the row's parts split again over TIDx (the block's
    combine after the grid's); `centered_sum`: (x - avg) * var_sum, two of the outputs read."""
    name = f"welford_grid_allreduce_{blocks}_{threads or 1}{'_var' if centered_sum else ''}"
    with tp.Fusion(name) as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype="float32")
        fusion.add_input(x)
        avg, var_sum, _ = tp.welford(x, [1])
        y = tp.sub(x, tp.broadcast(avg, [False, True]))
        if centered_sum:
            y = tp.mul(y, tp.broadcast(var_sum, [False, True]))
        fusion.add_output(y)
    y.split(1, blocks, inner_split=False)
    if threads:
        y.split(2, threads)
    tp.propagate_transforms(y)
    y.axis(0).parallelize(P.BIDx)
    y.axis(1).parallelize(P.BIDy)
    if threads:
        y.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(y)
    tp.inline_most(fusion)
    return fusion


def siblings_apart():
    """avg split by 128, var_sum by 64 (no propagation): REDUCTION-GROUP rejects it."""
    fusion, avg = _rows("welford_apart", "float32", "N", "welford")
    var_sum = next(t for t in fusion.outputs if t.definition.name == "welford_var_sum")
    avg.split(1, 128)
    var_sum.split(1, 64)
    for t in fusion.outputs:
        t.axis(0).parallelize(P.BIDx)
    return fusion


__all__ = ["block_welford", "column_welford", "grid_welford", "grid_welford_read_everywhere", "serial_welford",
           "siblings_apart"]
