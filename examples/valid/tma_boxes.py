"""Valid TMA schedules from the nvFuser TMA tutorial (seed 004): boxes by partitioning,
compositing and rotation, dense and strided tiles, a TMA store, a swizzled tile, and the
Figure 11 mix of strategies. Each is gmem T0 -> (TMA) smem T1 -> gmem T2 unless stated;
T2 takes T1's block axes (the same splits, the same BID types), so each block stores what it
loaded (shared memory is per block: SMEM-BLOCK-VISIBILITY).

tests/rules/test_tma.py checks the inferred TMA (rank, boxes, tiles, strides) of each.
"""

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


def tma_load(name, shape, dtype=tp.float32, contiguity=True):
    """T0 (gmem) -> T1 (smem, TMA load) -> T2 (gmem)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(shape, contiguity=contiguity, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t1, t2


@tp.schedule(expect=tp.accepted())
def tma_box_by_partitioning():
    """Figure 4: both dimensions boxed by an inner split, box (64, 32) innermost first;
    symbolic M x N (the boxing splits need not divide). Chosen: N % 4 == 0 is assumed, because
    the row stride 4N bytes must be a multiple of 16 (TMA-GLOBAL-STRIDE rejects it otherwise)."""
    fusion, t1, t2 = tma_load("tma_box_by_partitioning", ["M", "N"])
    fusion.assume("N % 4 == 0")
    fusion.assume("M <= 65535 * 32")  # gridDim.y = ceil(M / 32) launches (LAUNCH-GRID)
    for t in (t1, t2):
        t.split(1, 64).split(0, 32).reorder({1: 2})  # [Mo, No, Mi{32}, Ni{64}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_box_by_compositing():
    """The tutorial's T[I1{1024}, I2{2}, I3{4}, I4{8}] (contiguous) with [I3, I4] as box:
    one dimension, box 32, 2048 boxes. Chosen: I1 and I2 stay unmerged coordinates on BIDx/TIDx."""
    fusion, t1, t2 = tma_load("tma_box_by_compositing", [1024, 2, 4, 8])
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_box_by_rotation():
    """Figure 8 (left): I0{N} split 32 -> [I2, I1{32}], I1 split 8 -> [I3{4}, I4{8}], box I4.
    8 divides 32, so the box rotates up: a 1-D TMA partitioning I0 by 8, and the split by 32
    need not divide N (symbolic)."""
    fusion, t1, t2 = tma_load("tma_box_by_rotation", ["N"])
    for t in (t1, t2):
        t.split(0, 32).split(1, 8)  # [I2, I3{4}, I4{8}]
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.BIDy)  # chosen: a serial I3 would put 32-byte tiles at unaligned addresses
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_box_by_rotation_right():
    """Figure 8 (right) with box [I3, I4]: I0 split 8 -> [I5, I4{8}], I5 split 4 -> [I2, I3{4}];
    the two Bulk IDs merge into one dense box of 32 (rotation needs no divisibility)."""
    fusion, t1, t2 = tma_load("tma_box_by_rotation_right", ["N"])
    for t in (t1, t2):
        t.split(0, 8).split(0, 4)  # [I2, I3{4}, I4{8}]
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_indivisible_rotation():
    """Figure 8 with an indivisible box split: I0{1000} split 32 -> [I2, I1{32}], I1 split 12 ->
    [I3{3}, I4{12}], box I4. 12 does not divide 32, but a load's box rotates up anyway: a 1-D
    TMA over I0 (size 1000, box 12) at coordinate 32*i2 + 12*i3, the tile element k being global
    element 32*i2 + 12*i3 + k. The third box of each chunk (i3 = 2) overhangs it: its elements
    8..11 are the next chunk's, landing in the shared-memory slots of T1 points that are holes
    (I1 >= 32), which T2 never reads; past 1000 the hardware fills zeros. Lowered while TMA-VIEW
    still refused it, it ran correctly on an H100 (benchmarks/README.md), as it does verified
    (tests/gpu/test_tma_kernels.py). A store may not overhang (examples/invalid/tma_rules.py,
    tma_store_indivisible_rotation).
    Chosen: one 48-byte tile per block (serial tiles would be misaligned)."""
    fusion, t1, t2 = tma_load("tma_indivisible_rotation", [1000])
    for t in (t1, t2):
        t.split(0, 32).split(1, 12)  # [I2, I3{3}, I4{12}]
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.BIDy)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_strided_tile():
    """Figure 12: box (16, 4) with element strides (1, 2): the outer box is split by its
    element stride 2, tile (16, 2); 2 divides 4, so FTTC does not apply. Chosen: the figure's
    inner box 8 widened to 16 so a tile is 128 bytes; the stride ID (one copy per phase) is
    allocated outside the tile, so both phases' tiles start 128-byte aligned."""
    fusion, t1, t2 = tma_load("tma_strided_tile", [1024, 64])
    t2.split(1, 16).split(0, 4)  # [I0o, I0i{4}, I1o, I1i{16}]
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.BIDy)
    t1.split(1, 16).split(0, 4).split(1, 2).reorder({2: 1})  # [I0o, Stride{2}, Tile{2}, I1o, I1i{16}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)  # the stride ID is allocated: outside the tile, as in Figure 14 (a)
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # in that order, as Figure 14 (a) sets it
    t1.axis(3).parallelize(P.BIDy)
    t1.axis(4).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("TMA-FTTC",)))
def tma_strided_tile_fttc():
    """Figure 1 (right): box 4 rows with element stride 3, tile 2: 3 < 4 < 1024 and 3 does not
    divide 4, so FTTC holds: accepted with a TMA-FTTC warning (holes are not zero-filled).
    Chosen: inner box 16 (128-byte tiles), as in tma_strided_tile."""
    fusion, t1, t2 = tma_load("tma_strided_tile_fttc", [1024, 64])
    t2.split(1, 16).split(0, 4)  # [I0o, I0i{4}, I1o, I1i{16}]
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.BIDy)
    t1.split(1, 16).split(0, 4).split(1, 3).reorder({2: 1})  # [I0o, Stride{3}, Tile{2}, I1o, I1i{16}]
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # the stride ID outside the tile, as in tma_strided_tile
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.BIDy)
    t1.axis(4).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_strided_composited_box():
    """A composited box [I1{4}, I2{8}] merged first, then split by element stride 4 (the seed:
    merge the box IDs before the striding split): box 32, tile 8; 4 divides 32, no FTTC."""
    fusion, t1, t2 = tma_load("tma_strided_composited_box", [64, 4, 8, 16])
    t1.merge(1, 2).split(1, 4).reorder({2: 1})  # [I0, Stride{4}, Tile{8}, I3]
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # the stride ID outside the tile (unset: inside it)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_figure11():
    """Figure 11: nine TMA-domain IDs with contiguity (T, T, T, F, T, T, T, T, T) make a 5-D TMA:
    [I1, I2] (I2 box), I3 partitioned by 32, I4 implicit size-one, [I5, I6] implicit whole,
    [I7, I8, I9] ([I8, I9] box). The seed gives no extents; chosen: 4, 2, 300, 5, 2, 4, 3, 2, 8
    with I3 boxed by 8, so the tile (box 16 x 8 x 1 x 8 x 2 floats = 8 KiB) fits shared memory."""
    fusion, t1, t2 = tma_load("tma_figure11", [4, 2, 300, 5, 2, 4, 3, 2, 8],
                              contiguity=[True, True, True, False, True, True, True, True, True])
    for t in (t1, t2):
        t.split(2, 8)  # I3 -> [I10, I11{8}]: the loop domain has ten IDs
        t.axis(0).parallelize(P.BIDx)  # I1
        t.axis(2).parallelize(P.BIDy)  # I10
        t.axis(4).parallelize(P.BIDz)  # I4
    for axis in (1, 3, 5, 6, 8, 9):  # I2, I11, I5, I6, I8, I9
        t1.axis(axis).parallelize(P.Bulk)
    t1.reorder({7: 0})  # I7, a serial coordinate, is allocated: outermost, so it does not split the tile
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # in that order (unset: the logical order)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_store():
    """A TMA store: gmem T0 -> smem T1 -> (TMA) gmem T2; T2's loop domain is boxed (32, 16)
    innermost first, fp16 (inner box 64 bytes)."""
    with tp.Fusion("tma_store") as fusion:
        t0 = tp.make_contig_concrete_tensor([256, 512], dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=TMA)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, 32).split(0, 16).reorder({1: 2})  # [I0o, I1o, I0i{16}, I1i{32}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_swizzle_64b():
    """Figure 17: fp16 box (32, 16) with 64-byte swizzle; the tile is viewed as [-1, 4, 2, 4, 16B]
    (16B = 8 fp16) and swizzled on axes (1, 3): swizzle bytes 4 x 16 = 64."""
    fusion, t1, t2 = tma_load("tma_swizzle_64b", [256, 256], dtype=tp.float16)
    for t in (t1, t2):
        t.split(1, 32).split(0, 16).reorder({1: 2})  # [I0o, I1o, I0i{16}, I1i{32}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.split(3, 8).split(2, 2).split(2, 4)  # [I0o, I1o, 2, 4, 2, 4, 8]
    t1.swizzle(tp.SwizzleType.XOR, 3, 5)
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # unset, the swizzle's outputs would follow its inner input
    for axis in range(2, 7):
        t1.axis(axis).parallelize(P.Bulk)
    return fusion
