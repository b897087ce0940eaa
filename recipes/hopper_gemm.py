"""The Hopper wgmma GEMM recipe: D[M, N] = sum_k A[M, 1, K] B[1, N, K] in float32, A and B
bfloat16, both operands in shared memory (TMA loads, swizzled boxes) read by wgmma.mma_async
through matrix descriptors, the accumulators in each warpgroup's registers as wgmma's D fragment
(sm_90a).

    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=ws),
                              grid=GridOrder(group=8))
    fusion = hopper_gemm("M", "N", "K", params)

The parameters are hopper_params.py's. This file holds the builder and its pieces: the operand
tiles' layouts, the block orders (grouped, patches, persistent), the warpgroups' tiles and the
stmatrix epilogue. Imports only the public `tileproof` API.
"""

from __future__ import annotations

import tileproof as tp

from .gemm_blocks import grid_fits, grouped_blocks, permute, through_shared, tile_mnk, tma_store_boxes
from .hopper_params import HopperGemmParams, swizzled_box
from .params import EpilogueOps

P = tp.ParallelType


def mn_major_box(tile, swizzle_bytes):
    """The operand tile [.., rows (M or N), K] as an MN-major TMA box lays it out: [.., rows /
    span, K rows, span] with span one swizzle span of rows (64 bf16 for 128 bytes), swizzled:
    rows of MN contiguous, as a transposed operand (M-major A, N-major B) arrives from memory.
    wgmma reads it with its transpose bit set."""
    span = swizzle_bytes // tile.dtype.bytes
    tile.split(-2, span)
    tile.reorder({-1: -2, -2: -1})
    swizzled_box(tile, swizzle_bytes)


def patched_blocks(tensors, patch):
    """Bind the block tiles [Mo, No, ..] of `tensors` to blocks in patches of pm x pn tiles, each
    block running over its patch: [Mo / pm (blockIdx.x), No / pn (blockIdx.y), pm, pn (serial
    loops), ..]. A and B split their broadcast axis by 1 to have one for each loop of the other
    operand. Returns the axes added (2)."""
    pm, pn = patch
    for t in tensors:
        t.split(1, 1 if t.axis(1).is_broadcast else pn)  # [Mo, No / pn, pn, ..]
        t.split(0, 1 if t.axis(0).is_broadcast else pm)  # [Mo / pm, pm, No / pn, pn, ..]
        permute(t, [0, 2, 1, 3] + list(range(4, len(t.get_loop_domain()))))
        for i, p in ((0, P.BIDx), (1, P.BIDy)):
            if not t.axis(i).is_broadcast:
                t.axis(i).parallelize(p)
    return 2


def persistent_blocks(tensors, sms, group):
    """Bind the block tiles [Mo, No, ..] of `tensors` to a persistent grid of `sms` blocks: the
    tiles in groups of `group` M tiles [Mo / group, No, group] (the blocks running at once share
    their A tiles), merged into one tile index, split by `sms`: [tiles / sms (a serial loop),
    sms (blockIdx.x), ..]; block b computes tiles b, b + sms, ... A's and B's tiles merge their
    broadcast axis where D merges the other operand's tiles: the merge iterates D's tiles (loop
    promotion), each loading the operand's tile of D's tile. Returns the axes added (0)."""
    for t in tensors:
        t.split(0, 1 if t.axis(0).is_broadcast else group)  # [Mo / group, group, No, ..]
        permute(t, [0, 2, 1] + list(range(3, len(t.get_loop_domain()))))  # [Mo / group, No, group, ..]
        t.merge(0).merge(0).split(0, sms)  # [tiles / sms, sms, ..]
        t.axis(1).parallelize(P.BIDx)
    return 0


def warpgroup_tiles(t, split_n, rows=64, at=2):
    """A block tile [.., bm, bn, ..] (axes at, at + 1) as its warpgroups' wgmma tiles: one
    warpgroup per 64 rows [.., wg, 64, bn, ..], per `rows` rows [.., wg, mi, 64, bn, ..] (a loop mi
    over its rows / 64 wgmmas), or with split_n two warpgroups splitting the columns
    [.., wg, mi, 64, bn / 2, ..] (bm / 64 wgmmas each); wg bound to TIDy, mi unrolled."""
    bn = t.axis(at + 1).static_extent
    if split_n:
        t.split(at + 1, bn // 2).split(at, 64)  # [.., mi, 64, wg, bn / 2, ..]
        rest = len(t.get_loop_domain()) - at - 4
        permute(t, list(range(at)) + [at + 2, at, at + 1, at + 3] + list(range(at + 4, at + 4 + rest)))
    elif rows > 64:
        t.split(at, rows).split(at + 1, 64)
    else:
        t.split(at, 64)
    t.axis(at).parallelize(P.TIDy)
    if split_n or rows > 64:
        t.axis(at + 1).parallelize(P.Unroll)


def stmatrix_epilogue(epilogue, macro, block, split_n=False, rows=64, by_box=False, swizzle=128, chain=(),
                      pairs=()):
    """[c, cs, out] of gemm_blocks.through_shared: c = cast(D) in D's fragment layout ([Mo, No, wg
    (TIDy), (mi,) thread (TIDx), N / 16, 8]), cs = stmatrix(c) (a thread's 8 elements of a 16 x 16
    tile: stmatrix.x4) into the TMA store's swizzled boxes, out = their TMA store (tma_store_boxes).
    by_box=True: c and cs [Mo, No, box, wg, (mi,) thread, N / 16 of the box, 8], a loop over the
    output's TMA boxes (one `swizzle` span: 64 columns, 32 at swizzle=64) outside the threads, so
    that cs can hold one box at a time. `chain`: the fused ops' tensors [M, N] between D and c
    (epilogue_ops), laid out as c; those of them in `pairs` (the residual's registers) further split
    [..., N / 16, 4, 2], a vector of each pair of adjacent columns."""
    tma_store_boxes(epilogue, block, swizzle, by_box=by_box)
    c, cs, _ = epilogue
    span = swizzle // cs.dtype.bytes
    for t in chain:  # [M, N] -> [Mo, No, bm, bn], as tma_store_boxes tiles c
        t.split(1, block[1]).split(0, block[0])
        permute(t, [0, 2, 1, 3])
    registers = (*chain, c)
    for t in (*registers, cs):  # [Mo, No, bm, bn] -> [Mo, No, wg, (mi,) thread, N / 16, 8]: D's fragment
        if by_box and t is not cs:  # [Mo, No, box, bm, span] (cs's already): D's fragment of each box's columns
            t.split(3, span)
            permute(t, [0, 1, 3, 2, 4])
        warpgroup_tiles(t, split_n, rows, at=3 if by_box else 2)
        tp.schedule_mma_fragment(t, getattr(tp.MmaMacro, f"Hopper_64_{span}_16") if by_box else macro, "C")
        t.split(-1, 8)
        t.axis(-2).parallelize(P.Unroll)
    for t in (*chain, *epilogue) if by_box else ():  # the box loop unrolled: c reads D's registers at constant indices
        t.axis(2).parallelize(P.Unroll)
    for t in registers:
        if t in pairs:
            t.split(-1, 2).axis(-1).parallelize(P.Vectorize)
            t.axis(-2).parallelize(P.Unroll)
        else:
            t.axis(-1).parallelize(P.Unroll)
    cs.axis(-1).parallelize(P.Vectorize)


def epilogue_ops(d, ops, dtype, m, n):
    """Inside D's fusion: the tensors of EpilogueOps' ops on D, activation(scale * D + bias +
    residual) in float32, reading the new inputs straight from global memory in D's fragment
    layout: the bias [1, N] or [M, 1] in float32 (read by the add: a widened copy would be a
    tensor with a broadcast axis, which does not inline into D's fragment), the residual [M, N]
    in `dtype` (read by a cast to float32, or a set where `dtype` is float32: the one tensor
    reading it, which a schedule may vectorize). Returns the last tensor (D itself where there
    are no ops)."""
    fusion = d.fusion
    x = d if ops.scale is None else tp.mul(d, float(ops.scale))
    if ops.bias is not None:
        bias = tp.make_tensor([1, n] if ops.bias == "column" else [m, 1], dtype=tp.float32)
        fusion.add_input(bias)
        x = tp.add(x, bias)
    if ops.residual:
        residual = tp.make_tensor([m, n], dtype=dtype)
        fusion.add_input(residual)
        x = tp.add(x, tp.set(residual) if dtype == tp.float32 else tp.cast(residual, tp.float32))
    if ops.activation is not None:
        x = {"relu": tp.relu, "gelu": tp.gelu, "gelu_tanh": tp.tanh_gelu, "silu": tp.silu}[ops.activation](x)
    return x


def gemm_fusion(name: str, shape: tuple, ops: EpilogueOps, out_dtype: tp.DataType):
    """The unscheduled GEMM: bfloat16 A [M, 1, K] and B [1, N, K] inputs, D = sum_k A B (an
    MmaOp), `ops` on D (epilogue_ops), the output in out_dtype. Returns (fusion, a, b, d, out,
    chain): chain the ops' tensors from D to the output's input, in order."""
    m, n, k = shape
    with tp.Fusion(name) as fusion:
        a = tp.make_tensor([m, 1, k], dtype=tp.bfloat16)
        b = tp.make_tensor([1, n, k], dtype=tp.bfloat16)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        x = epilogue_ops(d, ops, out_dtype, m, n)
        out = tp.set(x) if out_dtype == tp.float32 else tp.cast(x, out_dtype)
        fusion.add_output(out)
    chain = [t for t in fusion.tensors if t not in (a, b, d, out) and not t.is_fusion_input]  # D -> x, in order
    return fusion, a, b, d, out, chain


def hopper_gemm(m, n, k, params: HopperGemmParams | None = None) -> tp.Fusion:
    """D[M, N] = sum_k A[M, 1, K] B[1, N, K] in float32 on wgmma (sizes ints or symbol names):
    block tile params.tile.m x .n x (swizzle bytes of K), one warpgroup per 64 rows (TIDy), each
    issuing one Hopper_64_{n}_16 wgmma per 16 columns of K; A's and B's tiles loaded by TMA as
    boxes of one swizzle span of K, allocated as the TMA's swizzled boxes; D's accumulators
    allocated as wgmma's D fragment (128 threads on TIDx) and stored to the output from there
    (or through the stmatrix epilogue); params None: HopperGemmParams(). The fusion is named
    hopper_matmul; its tensors: T0 = A, T1 = B, T2 the accumulators, T3 the output, T4 and T5
    A's and B's shared tiles."""
    params = HopperGemmParams() if params is None else params
    if not isinstance(params, HopperGemmParams):
        raise tp.ScheduleError(f"hopper_gemm: params must be a HopperGemmParams, got {type(params).__name__}")
    tile, pipeline, grid, cluster, epilogue_params = (params.tile, params.pipeline, params.grid, params.cluster,
                                                      params.epilogue)
    bm, bn = block = (tile.m, tile.n)
    swizzle = tile.swizzle
    bk = swizzle // 2
    macro = tile.macro
    fusion, a, b, d, out, chain = gemm_fusion("hopper_matmul", (m, n, k), epilogue_params.ops, epilogue_params.dtype)
    # the residual's reader (epilogue_ops): a column pair at a time (D's pairs of adjacent columns), one vector
    residual = fusion.consumers(fusion.inputs[-1]) if epilogue_params.ops.residual else []
    d.definition.set_macro(macro)
    mn_major = {t for t, operand in ((a, params.a), (b, params.b)) if operand.major == "MN"}
    for t in mn_major:  # M or N innermost in global memory: [1, K, M] / [1, K, N]
        t.set_allocation_domain([t.axis(2), t.axis(1), t.axis(0)] if t is a else [t.axis(0), t.axis(2), t.axis(1)],
                                True)
    sa = a.cache_after(params.a.load)
    sb = b.cache_after(params.b.load)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    for t in (d, sa, sb):
        tile_mnk(t, bm, bn, bk)
    d.split(5, 16)  # D [Mo, No, Ko, bm, bn, kk, K16] -> [Mo, No, Ko, wg, (mi,) M64, N, kk, K16]
    warpgroup_tiles(d, tile.split_n, tile.warpgroup_rows, at=3)
    kk = len(d.get_loop_domain()) - 2  # -> [Mo, No, Ko, wg, kk, (mi,) M64, N, K16]
    permute(d, [0, 1, 2, 3, kk] + list(range(4, kk)) + [kk + 1])
    # the accumulators: [Mo, No, Ko, kk, K16, wg, (mi,) thread (TIDx), v], wgmma's D fragment
    d.set_allocation_domain(tp.mma_output_allocation(d), True)
    d.axis(4).parallelize(P.Unroll)
    for i in (-3, -2, -1):
        d.axis(i).parallelize(P.Mma)
    if epilogue_params.stmatrix:  # through shared memory: stmatrix, then a TMA store
        epilogue = through_shared(out)
        stmatrix_epilogue(epilogue, macro, block, tile.split_n, tile.warpgroup_rows, epilogue_params.by_box,
                          epilogue_params.swizzle, chain, residual)
    else:  # the output [M, N] -> [Mo, No, wg, (mi,) thread, v]: D's fragment
        epilogue = [out]
        pairs = not (isinstance(n, int) and n % 2)
        for t in (*chain, out):
            t.split(1, bn).split(0, bm)
            permute(t, [0, 2, 1, 3])
            warpgroup_tiles(t, tile.split_n, tile.warpgroup_rows)
            tp.schedule_mma_fragment(t, macro, "C", dtype=tp.bfloat16)
            # an even N: no pair of columns straddles N's end (rows past M: both out); D's element pairs are
            # adjacent columns: 8-byte stores
            if pairs:
                t.split(-1, 2).axis(-1).parallelize(P.Vectorize if t is out or t in residual else P.Unroll)
            # the thread's accumulators read by constant indices: registers, not local memory
            t.axis(-2 if pairs else -1).parallelize(P.Unroll)
    # A [Mo, 1, Ko, bm, bk], B [1, No, Ko, bn, bk]: one TMA box each, swizzled
    spread = cluster.spread
    for t, g, operand in ((sa, a, params.a), (sb, b, params.b)):
        (mn_major_box if g in mn_major else operand.layout)(t, swizzle)
        if spread and t is sb:  # B's 8-row groups [bn / 8] -> [cluster (a loop of boxes), bn / 8 / cluster]
            t.split(3, bn // 8 // cluster.size)
        for i in t.get_loop_domain()[3 + ((spread and t is sb) or g in mn_major):]:  # past a loop of boxes
            i.parallelize(P.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    tiles = (d, *chain, *epilogue, sa, sb)
    if grid.patch:
        at = patched_blocks(tiles, grid.patch)
        grid_fits(fusion, m, n, n_per_y=bn * grid.patch[1])
    elif grid.persistent:  # `persistent` blocks along x, whatever the sizes
        at = persistent_blocks(tiles, grid.persistent, grid.group)
    else:
        at = grouped_blocks(tiles, grid.group)
        grid_fits(fusion, m, n, n_per_y=bn, m_per_z=bm * grid.group if grid.group > 1 else None)
    for t in (sa, sb):
        t.inline_at(3 + at)
        if pipeline.stages > 1:
            t.circular_buffer(pipeline.stages, pipeline.prefetch, pipeline.strategy)
    d.inline_at(2 + at)
    for t in chain:  # each element's ops in registers, in their consumers' loops (not a vector store's)
        if t in residual:  # outside its pair's vector (through shared memory: its 4 pairs of a 16-column step)
            t.inline_at(len(t.loop) - (t.axis(-1).parallel_type is P.Vectorize) - epilogue_params.stmatrix)
        else:
            vector = any(c.axis(-1).parallel_type is P.Vectorize for c in fusion.consumers(t))
            t.inline_at(len(t.loop) - vector)
    if epilogue_params.stmatrix:
        c, cs, _ = epilogue
        c.inline_at(len(c.loop) - 1)
        cs.inline_at(3 + at if epilogue_params.by_box else 2 + at)  # by box: one box of shared memory, reused
    if cluster.size > 1:
        fusion.cluster_dims = (cluster.size, 1, 1)
        sb.multicast(P.BIDx)
    return fusion


__all__ = ["epilogue_ops", "hopper_gemm", "mn_major_box", "patched_blocks", "persistent_blocks", "stmatrix_epilogue",
           "warpgroup_tiles"]
