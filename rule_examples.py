"""The schedules that the rule docs' Examples and Fixes start from (`tileproof explain CODE`).

A rule's Example calls one of these builders and then writes only the lines that make the
schedule fail the rule; its Fix calls the same builder and writes the lines that make it pass.
So the two read as a diff of a few lines, and the builder is the part they share:

    fusion, t0, t1, t2 = tma_copy("box512", [64, 4096])   # t0 -> t1 (shared, by TMA) -> t2
    t1.split(1, 512)                                       # a 512-element box: TMA-BOX-SIZE
    ...

The docs run with `tp` and these builders in scope (tests/verifier/test_rule_docs.py runs every Example
and Fix); `tileproof explain` prints the import the builders need, so what it shows runs as it
stands after `import tileproof as tp`.

    copy_chain            t0 -> t1 -> ... copies of one input (alloc, lowering, visibility, ...)
    tma_copy              t0 -> t1 (shared, TMA) -> t2 (the tma families)
    cp_async_copy         t0 -> t1 (shared, cp.async) -> t2 (cp_async)
    ldmatrix_copy         an 8 x 8 tile through shared memory into ldmatrix's fragment (ldsm)
    tmem_copy             t0 -> t1 -> t2 (tensor memory) -> t3 (tmem)
    cp_async_k_loop       rows staged through shared memory 32 of K at a time (pipeline)
    register_k_loop       the same, sliced into registers (pipeline)
    tf32_operands         a 16 x K times 8 x K product, unscheduled (mma)
    mma_sync_tile         that product as mma.sync m16n8k8 tiles (mma)
    hopper_gemm_operands  bf16 A and B staged by TMA for wgmma (wgmma, mma, warpspec, cluster)
    one_wgmma             a 64 x 64 x 64 wgmma tile, the operands' layout left open (wgmma)
    hopper_gemm_tile      a warp-specialized wgmma GEMM tile, the pipeline left open
    tcgen05_tile          a 128 x N x 16 tcgen05.mma tile into tensor memory, read back by tcgen05.ld (tcgen05)
    grouped_sum_and_max   a row sum and a row max grouped by tp.group_reductions (reduction)
    online_logsumexp      each row's log-sum-exp by an online max (reduction)
    masked_logsumexp      the same, causally masked, rows in blocks, the masked tiles skippable (online)

Written on the public API only, as a user writes a schedule; nothing of the library imports
this module. Its frames count as tileproof's (model/errors.py): a diagnostic about a tensor or
transform made here points at the line that called the builder.
"""

from __future__ import annotations

from collections.abc import Sequence

import tileproof as tp

# the builders the docs call (in their scope); hopper_gemm_operands is what two of them share
__all__ = ["column_allreduce", "copy_chain", "cp_async_copy", "cp_async_k_loop", "grid_allreduce", "grouped_sum_and_max", "hopper_gemm_tile",
           "ldmatrix_copy",
           "masked_logsumexp", "mma_sync_tile", "one_wgmma", "online_logsumexp", "register_k_loop", "tcgen05_tile", "tf32_operands", "wgmma_row_max", "tma_copy", "tmem_copy"]


# -- copies ---------------------------------------------------------------------------------------

def copy_chain(name: str, shape: Sequence, *, copies: int = 2, dtype=tp.float32, contiguity=True,
               op: tp.LoadStoreOpType = tp.LoadStoreOpType.Set, cache_op: tp.CacheOp = tp.CacheOp.Unspecified):
    """Fusion `name` copying an input of `shape` (ints, or names for symbolic extents) `copies`
    times: t0 (the input) -> t1 -> ... -> t<copies> (the output), each a tp.set, the first with
    `op` and `cache_op`. Nothing is scheduled: the intermediates are in registers, every loop
    serial. Returns (fusion, t0, t1, ..., t<copies>)."""
    with tp.Fusion(name) as fusion:
        tensors = [tp.make_tensor(shape, contiguity=contiguity, dtype=dtype)]
        fusion.add_input(tensors[0])
        tensors.append(tp.set(tensors[0], op=op, cache_op=cache_op))
        for _ in range(copies - 1):
            tensors.append(tp.set(tensors[-1]))
        fusion.add_output(tensors[-1])
    return (fusion, *tensors)


def grouped_sum_and_max(name: str, shape: Sequence = (64, 256)):
    """Fusion `name`: t1 = sum(t0, 1) and t2 = max(t0, 1) of an input of `shape`, grouped
    (tp.group_reductions), and t3 = t1 + t2 the output. Nothing is scheduled. Returns
    (fusion, t1, t2)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor(list(shape)); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.max(t0, [1])
        fusion.add_output(tp.add(t1, t2))
    tp.group_reductions([t1, t2])
    return fusion, t1, t2


def grid_allreduce(name: str, n: int = 1024, tile: int = 128):
    """Fusion `name`: t3 = t0 / broadcast(sum(t0)) of an input of n elements, both t1 = sum(t0)
    and t3 split by `tile` onto [BIDx, TIDx]: the sum runs over the grid and every block reads it
    (an allreduce). Returns (fusion, t1, t3)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor([n]); fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t3 = tp.div(t0, tp.broadcast(t1, [True])); fusion.add_output(t3)
    for t in (t1, t3):
        t.split(0, tile)
        t.axis(0).parallelize(tp.ParallelType.BIDx)
        t.axis(1).parallelize(tp.ParallelType.TIDx)
    return fusion, t1, t3


def column_allreduce(name: str, shape: Sequence = (64, 256)):
    """Fusion `name`: t4 = t0 + broadcast(sum(t1, 0)), t1 = set(t0), of a [M, N] input (nvFuser's
    CrossIterationGroupedGridAllreduce1): rows [BIDy, TIDy{8}], columns [BIDx, TIDx{32}, 2] on
    every tensor, not inlined; every block reads the column sums (an allreduce). Returns
    (fusion, t1, t2, t4), t2 the sum."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor(list(shape)); fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.sum(t1, [0])
        t4 = tp.add(t0, tp.broadcast(t2, [True, False])); fusion.add_output(t4)
    t1.split(1, 2).split(1, 32).split(0, 8)
    tp.propagate_transforms(t1)
    for k, p in enumerate((tp.ParallelType.BIDy, tp.ParallelType.TIDy, tp.ParallelType.BIDx, tp.ParallelType.TIDx)):
        t1.axis(k).parallelize(p)
    tp.parallelize_all_like(t1)
    return fusion, t1, t2, t4


def tma_copy(name: str, shape: Sequence, *, dtype=tp.float32, contiguity=True):
    """t0 (global) -> t1 (shared memory, loaded by TMA) -> t2 (the output); t1's box, tile and
    grid are the caller's to schedule. Returns (fusion, t0, t1, t2)."""
    fusion, t0, t1, t2 = copy_chain(name, shape, dtype=dtype, contiguity=contiguity, op=tp.LoadStoreOpType.TMA)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t0, t1, t2


def cp_async_copy(name: str, shape: Sequence, *, cache_op: tp.CacheOp = tp.CacheOp.Unspecified):
    """t0 (global) -> t1 (shared memory, written by cp.async with `cache_op`) -> t2 (the output),
    unscheduled. Returns (fusion, t0, t1, t2)."""
    fusion, t0, t1, t2 = copy_chain(name, shape, op=tp.LoadStoreOpType.CpAsync, cache_op=cache_op)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t0, t1, t2


def ldmatrix_copy(name: str, *, fragment: bool = True):
    """An 8 x 8 float16 tile: t0 (global) -> t1 (shared memory) -> t2 (registers, read by
    ldmatrix) -> t3 (the output). With `fragment`, t2 and t3 are ldmatrix's register fragment:
    lane 4r + q holds row r's elements 2q and 2q + 1, one 4-byte vector; t1's layout is the
    caller's. Returns (fusion, t0, t1, t2, t3)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1, op=tp.LoadStoreOpType.LdMatrix); t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    if fragment:
        for t in (t2, t3):
            t.split(1, 2).merge(0, 1)  # [row x pair of columns, 2]
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    return fusion, t0, t1, t2, t3


def tmem_copy(name: str, shape: Sequence, *, dtype=tp.float32):
    """t0 (global) -> t1 (registers) -> t2 (tensor memory: its first axis lanes, the others
    32-bit columns) -> t3 (the output), unscheduled. Tensor memory needs target="sm_100a".
    Returns (fusion, t0, t1, t2, t3)."""
    fusion, t0, t1, t2, t3 = copy_chain(name, shape, copies=3, dtype=dtype)
    t2.set_memory_type(tp.MemoryType.Tensor)
    t2.set_tmem_dim_sep_pos(1)
    return fusion, t0, t1, t2, t3


# -- pipelines ------------------------------------------------------------------------------------

def cp_async_k_loop(name: str):
    """Each row of an M x K input (K a multiple of 4) on its own block (BIDx), copied through
    shared memory 32 floats of K at a time: s = a's slice, written by cp.async with 8 threads x
    4 floats, computed inside the K loop (inline_at(2)) and read by out's 32 threads. The caller
    pipelines the K loop: s.circular_buffer(...). Returns (fusion, a, s, out)."""
    fusion, a, s, out = copy_chain(name, ["M", "K"], op=tp.LoadStoreOpType.CpAsync)
    fusion.assume("K % 4 == 0")
    for t in (s, out):
        t.split(1, 4).split(1, 8).axis(0).parallelize(tp.ParallelType.BIDx)  # [M, K loop, 8, 4]
    s.set_memory_type(tp.MemoryType.Shared)
    s.axis(2).parallelize(tp.ParallelType.TIDx); s.axis(3).parallelize(tp.ParallelType.Vectorize)
    out.merge(2).axis(2).parallelize(tp.ParallelType.TIDx)
    s.inline_at(2)
    return fusion, a, s, out


def register_k_loop(name: str):
    """Each row of an M x K input (K a multiple of 32) on its own block (BIDx), 32 of K at a
    time: s (shared, 32 threads) -> r (registers) -> out, r and out in 4 unrolled slices of 8
    threads; s is computed in the K loop, r in its slice loop (inline_at(3)). The caller
    pipelines the slices: r.circular_buffer(...). Returns (fusion, a, s, r, out)."""
    fusion, a, s, r, out = copy_chain(name, ["M", "K"], copies=3)
    fusion.assume("K % 32 == 0")
    for t in (s, r, out):
        t.split(1, 32).axis(0).parallelize(tp.ParallelType.BIDx)  # [M, K loop, 32]
    s.set_memory_type(tp.MemoryType.Shared); s.axis(2).parallelize(tp.ParallelType.TIDx)
    for t in (r, out):
        t.split(2, 8).axis(3).parallelize(tp.ParallelType.TIDx)  # [M, K loop, 4 slices, 8]
        t.axis(2).parallelize(tp.ParallelType.Unroll)
    s.inline_at(2)
    r.inline_at(3)
    return fusion, a, s, r, out


# -- mma.sync -------------------------------------------------------------------------------------

def tf32_operands(name: str, k: int = 8, *, epilogue: bool = False):
    """d[m, n] = sum over K of a[m, k] * b[n, k] for float32 a (16 x k) and b (8 x k, N x K),
    through their broadcasts a3 [M, 1, K] and b3 [1, N, K]; no macro, nothing scheduled. d is the
    output; with `epilogue`, d stays in registers and out = tp.set(d) is the output.
    Returns (fusion, a, b, a3, b3, d), and out after d with `epilogue`."""
    with tp.Fusion(name) as fusion:
        a = tp.make_contig_concrete_tensor([16, k]); fusion.add_input(a)
        b = tp.make_contig_concrete_tensor([8, k]); fusion.add_input(b)
        a3 = tp.broadcast(a, [False, True, False]); b3 = tp.broadcast(b, [True, False, False])
        d = tp.fused_multiply_sum(a3, b3, [-1])
        out = tp.set(d) if epilogue else d
        fusion.add_output(out)
    return (fusion, a, b, a3, b3, d) + ((out,) if epilogue else ())


def mma_sync_tile(name: str, k: int = 8, *, epilogue: bool = False):
    """tf32_operands computed by mma.sync m16n8k8 (tp.MmaMacro.Ampere_16_8_8): d's M, N and K
    axes bound to Mma, a3 and b3 in the instruction's operand fragments on one warp's 32 lanes
    (lane 4g + q holds A's rows g, g + 8 at columns q, q + 4, and B's row g at q, q + 4). A K
    larger than 8 is a serial loop of 8-wide slices, the operands computed inside it.
    Returns what tf32_operands returns."""
    fusion, a, b, a3, b3, d, *out = tf32_operands(name, k, epilogue=epilogue)
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8)
    o = 0 if k == 8 else 1  # the K loop's axis in front
    if o:
        for t in (d, a3, b3):
            t.split(2, 8)
        d.reorder({2: 0, 0: 1, 1: 2})  # [Ko, M, N, Ki]
    for i in range(o, o + 3):
        d.axis(i).parallelize(tp.ParallelType.Mma)
    if o:
        for t in (a3, b3):
            t.reorder({2: 0, 0: 1, 1: 2})
    a3.split(o, 8).split(o + 3, 4).reorder({o: o + 4, o + 2: o, o + 4: o + 2}).merge(o + 1).merge(o + 2)
    b3.split(o + 2, 4).reorder({o + 2: o + 3, o + 3: o + 2}).merge(o + 1)
    a3.axis(o + 1).parallelize(tp.ParallelType.TIDx); b3.axis(o + 1).parallelize(tp.ParallelType.TIDx)
    if o:
        tp.inline_all_at(d, 1)
    return (fusion, a, b, a3, b3, d, *out)


# -- wgmma ----------------------------------------------------------------------------------------

def _hopper_macro(n: int) -> tp.MmaMacro:
    """The wgmma instruction of 64 rows by n columns by 16 of K."""
    return getattr(tp.MmaMacro, f"Hopper_64_{n}_16")


def hopper_gemm_operands(name: str, m: int, n: int, k: int):
    """bfloat16 A (m x k, as [m, 1, k]) and B (n x k, as [1, n, k]): d = A B^T accumulated in
    float32 by wgmma Hopper_64_<n>_16, out = tp.set(d) the output; A and B are copied by TMA into
    sa and sb, unscheduled (their memory and layout are the caller's).
    Returns (fusion, sa, sb, d, out)."""
    with tp.Fusion(name) as fusion:
        a = tp.make_contig_concrete_tensor([m, 1, k], dtype=tp.bfloat16); fusion.add_input(a)
        b = tp.make_contig_concrete_tensor([1, n, k], dtype=tp.bfloat16); fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1]); out = tp.set(d); fusion.add_output(out)
    d.definition.set_macro(_hopper_macro(n))
    sa = a.cache_after(tp.LoadStoreOpType.TMA); sb = b.cache_after(tp.LoadStoreOpType.TMA)
    return fusion, sa, sb, d, out


def one_wgmma(name: str):
    """A 64 x 64 x 64 hopper_gemm_operands tile: d computed by 4 Hopper_64_64_16 wgmmas, one per
    16 of K, out written from d's C fragment in bfloat16; sa and sb in shared memory, the
    broadcast axis first (not part of the box). Their layout, and their Bulk axes, are the
    caller's. Returns (fusion, sa, sb, d, out)."""
    fusion, sa, sb, d, out = hopper_gemm_operands(name, 64, 64, 64)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
        t.reorder({1: 0} if t is sa else {})
    d.split(2, 16).reorder({2: 0})  # [kk, M, N, K16]
    loop = d.get_loop_domain()
    d.set_loop_domain([loop[0], loop[3], loop[1], loop[2]])
    tp.schedule_mma_fragment(d, tp.MmaMacro.Hopper_64_64_16, "C")
    d.set_allocation_domain(d.get_loop_domain(), True); d.set_loop_domain(loop)
    for i in range(1, 4):
        d.axis(i).parallelize(tp.ParallelType.Mma)
    tp.schedule_mma_fragment(out, tp.MmaMacro.Hopper_64_64_16, "C", dtype=tp.bfloat16)
    return fusion, sa, sb, d, out


def tcgen05_tile(name: str, n: int = 64, *, swizzle: tp.MmaInputSmemSwizzle | None = tp.MmaInputSmemSwizzle.B32):
    """float16 A (128 x 16, as [128, 1, 16]) and B (n x 16, as [1, n, 16]): d = A B^T computed by one
    tcgen05.mma (tp.MmaMacro.Blackwell1CTA_128_<n>_16, sm_100a) into tensor memory, d's M axis its
    lanes and N its columns (set_tmem_dim_sep_pos(1)); r = d read into registers by a TMemLoad
    (tcgen05.ld), a thread per row (TIDx{128}); out = r, stored by the same threads. A and B are
    loaded by TMA into sa and sb (the broadcast axis first, not part of the box), laid out as
    TMA's `swizzle` writes them (MmaInputSmemSwizzle.B32: one 32-byte row of K per row of the
    tile), or, with swizzle=None, in plain 32-byte rows. Returns (fusion, sa, sb, d, r, out)."""
    with tp.Fusion(name) as fusion:
        a = tp.make_contig_concrete_tensor([128, 1, 16], dtype=tp.float16); fusion.add_input(a)
        b = tp.make_contig_concrete_tensor([1, n, 16], dtype=tp.float16); fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1]); r = tp.set(d, op=tp.LoadStoreOpType.TMemLoad)
        out = tp.set(r); fusion.add_output(out)
    d.definition.set_macro(getattr(tp.MmaMacro, f"Blackwell1CTA_128_{n}_16"))
    sa = a.cache_after(tp.LoadStoreOpType.TMA); sb = b.cache_after(tp.LoadStoreOpType.TMA)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
        t.reorder({1: 0} if t is sa else {})
        if swizzle is not None:
            t.apply_mma_swizzle_for_tma_load(swizzle)
        for i in t.get_loop_domain()[1:]:
            i.parallelize(tp.ParallelType.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    for i in d.get_loop_domain():
        i.parallelize(tp.ParallelType.Mma)
    d.set_memory_type(tp.MemoryType.Tensor)
    d.set_tmem_dim_sep_pos(1)
    for t in (r, out):
        t.axis(0).parallelize(tp.ParallelType.TIDx)
    return fusion, sa, sb, d, r, out


def wgmma_row_max(name: str):
    """A 64 x 64 x 64 hopper_gemm_operands tile whose accumulators' row maxima m = tp.max(d, 1) are a
    second output: sa and sb TMA tiles in the 128-byte swizzle, d computed by 4 Hopper_64_64_16
    wgmmas with its C fragment's quads on TIDx (mma_output_allocation(d, quads=True): TIDy{32} x
    TIDx{4}), out written from the same fragment. m is the caller's to schedule.
    Returns (fusion, d, out, m)."""
    fusion, sa, sb, d, out = hopper_gemm_operands(name, 64, 64, 64)
    with fusion:
        m = tp.max(d, 1)
        fusion.add_output(m)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
        t.reorder({1: 0} if t is sa else {})
        t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B128)
        for i in t.get_loop_domain()[1:]:
            i.parallelize(tp.ParallelType.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    d.split(2, 16).reorder({2: 0})  # [kk, M, N, K16]
    d.set_allocation_domain(tp.mma_output_allocation(d, quads=True), True)
    for i in range(1, 4):
        d.axis(i).parallelize(tp.ParallelType.Mma)
    tp.schedule_mma_fragment(out, tp.MmaMacro.Hopper_64_64_16, "C", dtype=tp.bfloat16, quads=True)
    return fusion, d, out, m


def online_logsumexp(name: str, rows: int = 32, keys: int = 256, tile: int = 64, *, term=None):
    """Each row's log-sum-exp, lse = log(sum(exp(x - m))) + m with m = max(x), online: a thread per row
    (TIDx), a loop over the row's tiles of `tile` in which x's tile (a register cache, read by the
    tile's max and by the terms: so they share the loop), the tile's max (rfactored), the running
    max m (m.set_online(rescale=[l])), the terms exp(x - m) and the tile's sum (rfactored) run, and l
    adds each tile's part at the running max. `term(x, m_b)` makes the terms (default
    tp.exp(tp.sub(x, m_b))). Returns (fusion, x, m, p, l, lse)."""
    with tp.Fusion(name) as fusion:
        x = tp.make_contig_concrete_tensor([rows, keys])
        fusion.add_input(x)
        m = tp.max(x, 1)
        m_b = tp.broadcast(m, [False, True])
        p = term(x, m_b) if term is not None else tp.exp(tp.sub(x, m_b))
        l = tp.sum(p, 1)
        lse = tp.add(tp.log(l), m)
        fusion.add_output(lse)
    x.cache_after()
    parts = []
    for r in (m, l):  # [rows, r(keys / tile), r(tile)] -> the tile's part and the sum of the tiles
        r.split(1, tile)
        parts.append(r.rfactor([2]))
    between = [t for t in fusion.tensors if not t.is_fusion_input and len(t.logical) == 2 and t not in (m, l)
               and not t.logical[1].is_reduction]
    for t in between:  # [rows, keys / tile, tile]
        t.split(1, tile)
    for t in fusion.tensors:
        if not t.is_fusion_input:
            t.axis(0).parallelize(tp.ParallelType.TIDx)
    m.set_online(rescale=[l])
    for t in parts + between:
        t.inline_at(2)  # inside the loop over tiles
    for t in (m, l):
        t.inline_at(1)
    return fusion, x, m, p, l, lse


def masked_logsumexp(name: str, rows: int = 96, keys: int = 256, tile: int = 64, block: int = 32, *,
                     fill: float = float("-inf"), term=None, keep=None):
    """Each row's log-sum-exp of the causally masked scores, lse = log(sum(exp(s - m))) + m with
    s = where(key <= row + keys - rows, x, -inf) and m = max(s), online: `block` rows a block
    (BIDx, a thread each on TIDx), the loop over the row's tiles of `tile` keys as in
    online_logsumexp; the mask's positions are two tp.iota (the rows' once per thread, a tile of the
    keys' in each iteration). The caller may skip the tiles the mask drops (m.skip_masked(keep, ...)).
    `fill` is the where's value where the mask drops a score, `term(s, m_b)` makes the terms (default
    tp.exp(tp.sub(s, m_b))), `keep(key_b, query_b, x)` the mask (default tp.le(key_b, query_b)).
    Returns (fusion, x, keep, m, l, lse)."""
    with tp.Fusion(name) as fusion:
        x = tp.make_contig_concrete_tensor([rows, keys])
        fusion.add_input(x)
        query = tp.iota(rows, keys - rows, 1, tp.int32)
        key = tp.iota(keys, 0, 1, tp.int32)
        key_b, query_b = tp.broadcast(key, [True, False]), tp.broadcast(query, [False, True])
        keep = keep(key_b, query_b, x) if keep is not None else tp.le(key_b, query_b)
        s = tp.where(keep, x, fill)
        m = tp.max(s, 1)
        m_b = tp.broadcast(m, [False, True])
        p = term(s, m_b) if term is not None else tp.exp(tp.sub(s, m_b))
        l = tp.sum(p, 1)
        lse = tp.add(tp.log(l), m)
        fusion.add_output(lse)
    parts = []
    for r in (m, l):  # [rows / block, block, r(keys / tile), r(tile)] -> the tile's part and the sum of the tiles
        r.split(1, tile).split(0, block)
        parts.append(r.rfactor([3]))
    two_d = [t for t in fusion.tensors if t.definition is not None and len(t.logical) == 2 and t not in (m, l)
             and not t.logical[1].is_reduction]
    for t in two_d:  # [rows / block, block, keys / tile, tile]
        t.split(1, tile).split(0, block)
    for t in fusion.tensors:  # the rows' positions, the logs and lse: [rows / block, block]
        if t.definition is not None and len(t.logical) == 1 and t not in (key, m, l):
            t.split(0, block)
    key.split(0, tile)
    for t in fusion.tensors:
        if t.definition is not None and t is not key:
            for axis, kind in zip(t.get_loop_domain()[:2], (tp.ParallelType.BIDx, tp.ParallelType.TIDx)):
                if not axis.is_broadcast:
                    axis.parallelize(kind)
    m.set_online(rescale=[l])
    for t in parts + [t for t in two_d if fusion.consumers(t)]:
        t.inline_at(3)  # inside the loop over tiles
    for t in (m, l):
        t.inline_at(2)
    key.inline_at(1)  # a tile of key positions an iteration
    return fusion, x, keep, m, l, lse


def hopper_gemm_tile(name: str, m: int, n: int, *, wgmmas: int = 1, block_m: int | None = None):
    """An m x n x 256 hopper_gemm_operands GEMM: a K loop of 64, the A and B tiles loaded by TMA
    into shared memory in wgmma's 128-byte swizzle and computed inside that loop; d's rows in
    warpgroups on TIDy, each issuing `wgmmas` Hopper_64_<n>_16 (an unrolled loop) per 16 of K;
    out written from d's C fragment. With `block_m`, M is tiled by block_m rows on BIDx (B, one
    row, is not). The caller picks the pipeline: sa.circular_buffer(...), sb.circular_buffer(...).
    Returns (fusion, sa, sb, d, out)."""
    fusion, sa, sb, d, out = hopper_gemm_operands(name, m, n, 256)
    o = 0 if block_m is None else 1  # the M tile's axis in front
    w = 0 if wgmmas == 1 else 1  # the axis of a warpgroup's wgmmas
    for t in (sa, sb, d):
        t.split(2, 64).reorder({2: 0})  # [K loop, M, N, 64 of K]
        if block_m is not None:
            t.split(1, 1 if t is sb else block_m).reorder({1: 0})  # [M tile, K loop, block_m of M, N, 64 of K]
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
        t.reorder({o + 2: o + 1} if t is sa else {})  # the broadcast axis next to the K loop: not part of the box
        t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B128)
        for i in t.get_loop_domain()[o + 2:]:
            i.parallelize(tp.ParallelType.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    d.split(o + 3, 16).split(o + 1, 64 * wgmmas)  # [K loop, warpgroup, M of a warpgroup, N, kk, K16]
    if w:
        d.split(o + 2, 64)  # [K loop, warpgroup, mi, M64, N, kk, K16]
    d.reorder({o + 4 + w: o + 2})  # [K loop, warpgroup, kk, (mi,) M64, N, K16]
    d.set_allocation_domain(tp.mma_output_allocation(d), True)
    d.axis(o + 1).parallelize(tp.ParallelType.TIDy)
    for i in range(o + 2, o + 3 + w):
        d.axis(i).parallelize(tp.ParallelType.Unroll)
    for i in range(o + 3 + w, o + 6 + w):  # one wgmma: M64, N, K16
        d.axis(i).parallelize(tp.ParallelType.Mma)
    if block_m is not None:
        out.split(0, block_m)
    out.split(o, 64 * wgmmas)  # [warpgroup, M of a warpgroup, N]
    if w:
        out.split(o + 1, 64)  # [warpgroup, mi, M64, N]
    tp.schedule_mma_fragment(out, _hopper_macro(n), "C")
    out.axis(o).parallelize(tp.ParallelType.TIDy)
    if w:
        out.axis(o + 1).parallelize(tp.ParallelType.Unroll)
    if block_m is not None:
        for t in (sa, d, out):
            t.axis(0).parallelize(tp.ParallelType.BIDx)
    for t in (sa, sb):
        t.inline_at(o + 1)
    return fusion, sa, sb, d, out
