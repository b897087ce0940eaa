"""Invalid TMA schedules, one per descriptor rule, plus the indivisible-rotation case of the
nvFuser TMA tutorial (seed 004) as a store (a load may rotate through it: examples/valid/tma_boxes.py).
Each is gmem T0 -> (TMA) smem T1 -> gmem T2 (the store: gmem T0 -> smem T1 -> (TMA) gmem T2), fp32
unless stated, with coordinate IDs on BID so only the tile is allocated in shared memory; T2 takes
T1's block axes (the same splits and BID types), so each block stores what it loaded
(SMEM-BLOCK-VISIBILITY) and only the TMA rule under test fails.
"""

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


def tma_load(name, shape, dtype=tp.float32, contiguity=True):
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(shape, contiguity=contiguity, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t1, t2


@tp.schedule(expect=tp.rejected("TMA-VIEW", "TMA-TILE-CONTIGUITY", messages=["cannot be rotated", "TMA store"]))
def tma_store_indivisible_rotation():
    """The store of tma_indivisible_rotation (examples/valid/tma_boxes.py): gmem T0 -> smem T1 ->
    (TMA) gmem T2{1000}, split 32 then the inner split 12, one 12-element box per block. A load's
    box may overhang its 32-element chunk (the overhang lands in shared-memory holes); a store's
    would write the holes' garbage over the next chunk's first 4 elements. So the box does not
    rotate through the split by 32, which becomes part of the view and must divide 1000
    (TMA-VIEW: 1000 % 32 = 8); the 2-D TMA left reads elements 8..11 of the third box from
    bytes where T1 keeps other elements (TMA-TILE-CONTIGUITY)."""
    with tp.Fusion("tma_store_indivisible_rotation") as fusion:
        t0 = tp.make_contig_concrete_tensor([1000])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=TMA)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 32).split(1, 12)  # [I2, I3{3}, I4{12}]
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.BIDy)
    t2.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-VIEW", messages=["discontiguous"]))
def tma_view_discontiguous_merge():
    """The TMA domain merges I0 and I1 of a tensor whose I0 is not contiguous (padded rows):
    merge(I0, I1) has no single stride. Then the merged ID is boxed by 64."""
    fusion, t1, t2 = tma_load("tma_view_discontiguous_merge", [64, 128], contiguity=[False, True])
    for t in (t1, t2):
        t.merge(0).split(0, 64)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-RANK"))
def tma_rank_six():
    """Six discontiguous axes cannot composite: a 6-D TMA."""
    fusion, t1, _ = tma_load("tma_rank_six", [2, 2, 2, 2, 2, 64],
                             contiguity=[False, False, False, False, False, True])
    t1.axis(5).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-BOX-SIZE"))
def tma_box_too_big():
    """Box 512 on the inner dimension (the limit is 256)."""
    fusion, t1, t2 = tma_load("tma_box_too_big", [64, 4096])
    for t in (t1, t2):
        t.split(1, 512)
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-BOX-SIZE", messages=["box 260 when B = 260"]))
def tma_box_symbolic():
    """A symbolic box factor B (assumed a multiple of 4, at most 512): the proof finds B = 260."""
    with tp.Fusion("tma_box_symbolic") as fusion:
        t0 = tp.make_tensor([64, 4096])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    fusion.symbol("B")
    fusion.assume("B % 4 == 0")
    fusion.assume("B <= 512")
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, "B")
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-INNER-BYTES", "TMA-COORD-ALIGN"))
def tma_inner_box_24_bytes():
    """fp16 inner box 12 = 24 bytes, not a multiple of 16 (measured rejected on H200); the second
    box then starts at coordinate 12 (24 bytes), which would also fault (TMA-COORD-ALIGN)."""
    fusion, t1, t2 = tma_load("tma_inner_box_24_bytes", [64, 96], dtype=tp.float16)
    for t in (t1, t2):
        t.split(1, 12)
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-ELEMENT-STRIDE"))
def tma_element_stride_16():
    """A striding split by 16: element stride 16 (the limit is 8)."""
    fusion, t1, t2 = tma_load("tma_element_stride_16", [1024, 64])
    t2.split(0, 64)  # [I0o, I0i{64}, I1]
    t2.axis(0).parallelize(P.BIDx)
    t1.split(0, 64).split(1, 16).reorder({2: 1})  # [I0o, Stride{16}, Tile{4}, I1]: tiles stay contiguous
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # allocated in that order (unset: the logical order)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-ELEMENT-STRIDE", "TMA-COORD-ALIGN"))
def tma_element_stride_innermost():
    """A striding split on the innermost dimension (element stride 2): the hardware ignores
    elementStrides[0], so this tile cannot be loaded; the copy for stride phase 1 would also
    start at an odd innermost coordinate (4 bytes: TMA-COORD-ALIGN)."""
    fusion, t1, t2 = tma_load("tma_element_stride_innermost", [64, 256])
    for t in (t1, t2):
        t.split(1, 64)  # [I0, I1o, I1i{64}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.split(2, 2).reorder({3: 2})  # [I0, I1o, Stride{2}, Tile{32}]
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # allocated in that order (unset: the logical order)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-GLOBAL-STRIDE"))
def tma_row_stride_392_bytes():
    """Rows of 98 fp32 = 392 bytes: the stride of the outer TMA dimension is not a multiple of 16."""
    fusion, t1, t2 = tma_load("tma_row_stride_392_bytes", [64, 98])
    for t in (t1, t2):
        t.split(1, 32).split(0, 8)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-GLOBAL-STRIDE"))
def tma_innermost_discontiguous():
    """The innermost axis is not contiguous (contiguity False): dimension 0 has no unit stride."""
    fusion, t1, t2 = tma_load("tma_innermost_discontiguous", [64, 128], contiguity=[True, False])
    for t in (t1, t2):
        t.split(1, 32)
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-BULK-PLACEMENT"))
def tma_bulk_on_plain_copy():
    """Bulk on the consumer of an ordinary set, not a TMA."""
    with tp.Fusion("tma_bulk_on_plain_copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([1024, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-BULK-PLACEMENT"))
def tma_no_bulk():
    """A TMA whose consumer has no Bulk IDs: there is no tile (the inner split is left serial)."""
    fusion, t1, t2 = tma_load("tma_no_bulk", [1024, 64])
    t1.split(1, 32)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-MIXED-TRANSFORM"))
def tma_merge_tile_with_coordinate():
    """Both axes boxed by 32, then the coordinate of I1 is merged with the box of I0 and split
    again: tile and non-tile IDs transformed together."""
    fusion, t1, t2 = tma_load("tma_merge_tile_with_coordinate", [256, 256])
    t2.split(0, 32)  # [I0o, I0i, I1]
    t2.axis(0).parallelize(P.BIDx)
    t1.split(1, 32).split(0, 32).reorder({1: 2})  # [I0o, I1o, I0i, I1i]
    t1.merge(1, 2).split(1, 4)  # [I0o, (I1o*I0i)/4, 4, I1i]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-MIXED-TRANSFORM"))
def tma_swizzle_tile_with_coordinate():
    """The box of I0 (Bulk) is XOR-swizzled with the coordinate of I1 in the TMA consumer."""
    fusion, t1, t2 = tma_load("tma_swizzle_tile_with_coordinate", [256, 256])
    t2.split(0, 8)  # [I0o{32}, I0i{8}, I1]
    t2.axis(0).parallelize(P.BIDx)
    t1.split(1, 32).split(0, 8)  # [I0o{32}, I0i{8}, I1o{8}, I1i{32}]
    t1.swizzle(tp.SwizzleType.XOR, 1, 2)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("WS-ROLES", messages=["circular over 2 different loops, none inside another"]))
def warp_specialized_loops_side_by_side():
    """exp(a) and exp(b), each over 256-element TMA tiles in a serial loop of its own (4 a block), both
    warp-specialized: one producer thread would have to serve two loops the consumers run one after
    the other, neither inside the other (a loop inside another's is served: the producer runs the
    same nest, examples/valid/attention.py persistent_attention_with_q_from_the_producer)."""
    with tp.Fusion("warp_specialized_loops_side_by_side") as fusion:
        a, b = tp.make_contig_tensor(1), tp.make_contig_tensor(1)
        fusion.add_input(a)
        fusion.add_input(b)
        outs = tp.exp(a), tp.exp(b)
        for o in outs:
            fusion.add_output(o)
    for x, o in zip((a, b), outs):  # [I / 1024 (blockIdx.x), 4 (the circular loop), 256]
        s = x.cache_after(tp.LoadStoreOpType.TMA)
        s.set_memory_type(tp.MemoryType.Shared)
        for t in (o, s):
            t.split(0, 256).split(0, 4)
            t.axis(0).parallelize(P.BIDx)
        s.inline_at(2)
        s.axis(-1).parallelize(P.Bulk)
        o.axis(-1).parallelize(P.TIDx)
        s.circular_buffer(2, 1, tp.WarpSpecialized(P.TIDx))
    return fusion
