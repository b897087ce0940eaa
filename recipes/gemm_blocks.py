"""Schedule pieces both GEMM recipes use on D[M, N] = sum_k A[M, 1, K] B[1, N, K]: tiling
[M, N, K] by the block tile, binding the block tiles to the grid in groups of M tiles, the
symbolic sizes' tile-multiple and grid-size assumptions, and the stmatrix epilogue's path through
a shared tile to a TMA store. Imports only the public `tileproof` API.
"""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType
LS = tp.LoadStoreOpType


def permute(tv, order):
    """Reorder tv's loop axes: `order` lists the old positions in their new order."""
    tv.reorder({old: new for new, old in enumerate(order)})


def tile_mnk(tv, bm, bn, bk):
    """[M, N, K] -> [Mo, No, Ko, bm, bn, bk]; a broadcast axis (A's N, B's M) is not split, so A
    becomes [Mo, 1, Ko, bm, bk] and B [1, No, Ko, bn, bk]."""
    inner = []
    for axis, factor in ((0, bm), (1, bn), (2, bk)):
        at = axis + len(inner)
        if tv.axis(at).is_broadcast:
            continue
        tv.split(at, factor)
        inner.append(at + 1)
    outer = [i for i in range(len(tv.get_loop_domain())) if i not in inner]
    tv.reorder({old: new for new, old in enumerate(outer + inner)})
    return tv


def grouped_blocks(tensors, group):
    """Bind the block tiles [Mo, No, ..] of `tensors` to blocks: blockIdx.x the M tile, blockIdx.y
    the N tile; with group > 1 the M tiles in groups [Mo / group, group, No], blockIdx.z the group
    and blockIdx.x the tile in it (x runs fastest: the blocks running at once share `group` tiles
    of A). Returns the axes the grouping added (0 or 1)."""
    at = 1 if group > 1 else 0
    for t in tensors:
        if group > 1:
            t.split(0, 1 if t.axis(0).is_broadcast else group)  # B's M: two broadcasts of extent 1
        for i, p in enumerate([P.BIDz, P.BIDx, P.BIDy][1 - at:]):
            if not t.axis(i).is_broadcast:
                t.axis(i).parallelize(p)
    return at


GRID_YZ = 65535  # the most blocks along blockIdx.y or .z (LAUNCH-GRID); .x takes 2^31 - 1, more than M's tiles


def grid_fits(fusion, m, n, *, n_per_y, m_per_z=None):
    """Assume the symbolic sizes whose grid the GPU launches (LAUNCH-GRID proves it): N's tiles
    on blockIdx.y, n_per_y columns a block, at most 65535 of them, so N <= 65535 n_per_y; with
    m_per_z (M's rows a blockIdx.z covers: a group of M tiles) likewise for M. A size given as
    an int needs no assumption (LAUNCH-GRID checks it as it is)."""
    for size, per in ((n, n_per_y), (m, m_per_z)):
        if isinstance(size, str) and per is not None:
            fusion.assume(f"{size} <= {GRID_YZ * per}")


def tile_multiples(fusion, k_multiple, m_multiple=128, n_multiple=128):
    """Assume the symbolic sizes multiples of the block tile (M, N) and of `k_multiple` (K)."""
    for s, q in (("M", m_multiple), ("N", n_multiple), ("K", k_multiple)):
        fusion.assume(f"{s} % {q} == 0")
    return fusion


def through_shared(out):
    """The cast output's path [c, c_smem, out]: c = cast(D) in registers, c_smem its shared tile
    (stmatrix) and out the output (TMA store)."""
    cs = out.cache_before(LS.TMA)  # out = TMA store(cs)
    c = cs.cache_before(LS.StMatrix)  # cs = stmatrix(c), c = cast(d)
    cs.set_memory_type(tp.MemoryType.Shared)
    return [c, cs, out]


def swizzle_tma_box(tv, swizzle_bytes):
    """nvFuser's TensorView::swizzleTMABox on [..., rows, columns of one swizzle span]:
    [..., ko, kio(8 * S / 128), kii(128 / S), nio(S / 16), nii(16 bytes)], XOR (kio, nio)."""
    tv.split(-2, 8)
    tv.split(-2, 128 // swizzle_bytes)
    tv.split(-1, 16 // tv.dtype.bytes)
    tv.swizzle(tp.SwizzleType.XOR, -4, -2)


def tma_store_boxes(epilogue, block, swizzle=128, by_box=False):
    """[c, cs, out] of through_shared tiled [Mo, No, bm, bn]; cs allocated as the TMA store's
    swizzled boxes of one swizzle span of columns, out's boxes [Mo, No, bn / span (a loop of
    stores), bm, span] Bulk. The caller lays out c and cs as the accumulators' fragment.
    by_box=True: cs's loop keeps the box axis [Mo, No, bn / span, bm, span], the axis of its
    allocation too, so that cs inlined past it holds one box."""
    c, cs, out = epilogue
    bm, bn = block
    for t in (c, cs, out):
        t.split(1, bn).split(0, bm)  # [Mo, bm, No, bn]
        permute(t, [0, 2, 1, 3])  # [Mo, No, bm, bn]
    store_boxes(cs, out, 2, swizzle, by_box)


def store_boxes(cs, out, rows: int, swizzle=128, by_box=False):
    """cs (the staged tile) and out (its TMA store), both [.., rows, columns] with the rows at axis
    `rows` and the columns last, as the store's boxes [.., columns / span, rows, span], span = one
    swizzle's columns: cs allocated as them, swizzled, its loop kept [.., rows, columns] (by_box:
    the boxes' loop, so that cs inlined past the box axis holds one box); out's box axes Bulk."""
    tile = cs.get_loop_domain()
    for t in (cs, out):
        t.split(rows + 1, swizzle // cs.dtype.bytes)
        t.reorder({rows + 1: rows})
    if by_box:
        tile = cs.get_loop_domain()
    swizzle_tma_box(cs, swizzle)  # cs is allocated as the boxes, swizzled
    cs.set_allocation_domain(cs.get_loop_domain(), True)
    cs.set_loop_domain(tile)
    for i in out.get_loop_domain()[rows + 1:]:
        i.parallelize(P.Bulk)


__all__ = ["GRID_YZ", "grid_fits", "grouped_blocks", "permute", "store_boxes", "swizzle_tma_box", "through_shared", "tile_mnk",
           "tile_multiples", "tma_store_boxes"]
