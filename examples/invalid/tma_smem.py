"""Invalid shared-memory schedules for TMA from the nvFuser TMA tutorial (seed 004, step 4):
Figure 13 (a-e), Figure 15 (c-e), wrong variants of the swizzle recipe, and misaligned or
out-of-range copies. nvFuser does not validate these ("likely you will see misaligned
address error or silent wrong result"); tileproof rejects each with a counterexample.

The figures are not in the seed; each case is drawn from its text. Common choice: fp32
T0[I1{64}, I2] loaded by TMA into the shared T1, I1 split by 8 -> [I3, I4{8}] and I2 split
-> [I5, I6]; I4 and I6 are the box. The allocation domain is the loop domain unless set.
The output T2 is split like T1 and parallelized on the same block indices, so each block
stores the tile it loaded (SMEM-BLOCK-VISIBILITY) and only the rule under test fails.
"""

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA
XOR = tp.SwizzleType.XOR


def tma_load(name, shape, dtype=tp.float32):
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor(shape, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t1, t2


def boxed(name, i2, box2, box1=8):
    """T1 and T2 scheduled to [I3, I4{box1}, I5, I6{box2}]."""
    fusion, t1, t2 = tma_load(name, [64, i2])
    for t in (t1, t2):
        t.split(0, box1).split(2, box2)
    return fusion, t1, t2


def per_block_tiles(t1, t2, rows, cols):
    """T1 and T2 tiled [I0o, I1o, rows, cols] with I0o on BIDy and I1o on BIDx."""
    for t in (t1, t2):
        t.split(1, cols).split(0, rows).reorder({1: 2})  # [I0o, I1o, rows, cols]
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)


@tp.schedule(expect=tp.rejected("TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES", messages=["not contiguous", "overlap"]))
def figure13a_stride_inside_tile():
    """Figure 13 (a): I4 split by element stride 2 -> [I7{4} tile, I8{2} stride]; allocated
    [I3, I7, I8, I6] (I5 on BIDx): the stride ID I8 sits between the tile IDs I7 and I6. The
    block's two copies (one per stride phase) start 128 bytes apart and each writes 512 bytes:
    the second overwrites the first."""
    fusion, t1, t2 = boxed("figure13a_stride_inside_tile", 256, 32)
    t1.split(1, 2)  # [I3, I7{4}, I8{2}, I5, I6]
    t1.reorder({3: 1})  # [I3, I5, I7, I8, I6]
    t1.axis(1).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(4).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES", "ALLOCATION-DISTINCT",
                                messages=["overlap"]))
def figure13b_allocation_holds_coordinate():
    """Figure 13 (b): allocated [I4, I2] where I2{100} holds both I5 (coordinate) and I6{32}
    (box): rows of a tile are 100 elements apart, so the tile is not contiguous; and the serial
    I5's four copies start 128 bytes apart while each writes a 1024-byte tile, so they overwrite
    each other. The boxing split of I2 does not divide it either: the zeros the TMA writes past
    100 (I2's holes) land on the next row's elements (ALLOCATION-DISTINCT). Chosen: I3 on BIDx,
    I5 serial."""
    fusion, t1, t2 = boxed("figure13b_allocation_holds_coordinate", 100, 32)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t1.set_allocation_domain([t1.axis(1), t1.get_logical_domain()[1]])
    return fusion


@tp.schedule(expect=tp.rejected("TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES"))
def figure13c_tid_between_tile_ids():
    """Figure 13 (c): [I3, I4, I5, I6] with I5 on TIDx between the tile IDs I4 and I6; shared
    memory is shared across threads, so I5 is allocated and splits every tile; the four threads'
    copies start 128 bytes apart and overlap."""
    fusion, t1, _ = boxed("figure13c_tid_between_tile_ids", 128, 32)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(2).parallelize(P.TIDx)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-TILE-CONTIGUITY"))
def figure13d_store_allocation_holds_coordinate():
    """Figure 13 (d): the TMA store counterpart of (b): the shared producer T1 is allocated
    [I4, I2] with I2{100} holding I5 and I6{32}, so a tile's rows are 100 elements apart. The
    stores read overlapping ranges, which is harmless, and every range lies inside the buffer
    (the last ends at byte 1408 of 3200): only the layout is wrong."""
    with tp.Fusion("figure13d_store_allocation_holds_coordinate") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 100])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=TMA)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 8).split(2, 32)  # [I3, I4{8}, I5{4}, I6{32}]
        t.axis(0).parallelize(P.BIDx)
    t1.axis(3).parallelize(P.TIDx)
    t1.set_allocation_domain([t1.axis(1), t1.get_logical_domain()[1]])
    t2.axis(1).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES"))
def figure13e_serial_between_tile_ids():
    """Figure 13 (e): [I3, I4, I5, I6] with a serial I5{4} between the tile IDs I4 and I6; the four
    copies start 128 bytes apart and overlap."""
    fusion, t1, _ = boxed("figure13e_serial_between_tile_ids", 128, 32)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


def tile_view(name):
    """T1 and T2 [I3, I5 (BIDx), I4{8}, I6{32}] (T1's tile IDs Bulk after bulk_tile), for
    allocation views of the tile."""
    fusion, t1, t2 = boxed(name, 256, 32)
    for t in (t1, t2):
        t.reorder({1: 2})
    t2.axis(1).parallelize(P.BIDx)
    return fusion, t1, t2


def bulk_tile(t1):
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)


@tp.schedule(expect=tp.rejected("TMA-TILE-CONTIGUITY", messages=["not contiguous"]))
def figure15c_indivisible_split_in_tile():
    """Figure 15 (c): the allocation splits I6{32} by 12 -> [I7{3}, I8{12}]: 36 slots per row,
    so rows of a tile are 36 elements apart (holes inside the tile). Chosen: I3{8} keeps the
    buffer a whole number of tiles (8 x 8 x 36 = 9 tiles), so only the holes are reported."""
    fusion, t1, _ = tile_view("figure15c_indivisible_split_in_tile")
    loop = t1.get_loop_domain()
    t1.split(3, 12)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    bulk_tile(t1)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-TILE-CONTIGUITY"))
def figure15d_flipped_inside_tile():
    """Figure 15 (d): the allocation splits I6{32} by 8 -> [I7{4}, I8{8}] and flips them:
    [I3, I4, I8, I7]; each tile is still in one range, but not in the order TMA writes it."""
    fusion, t1, _ = tile_view("figure15d_flipped_inside_tile")
    loop = t1.get_loop_domain()
    t1.split(3, 8).reorder({3: 4})
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    bulk_tile(t1)
    return fusion


def swizzled(name, swizzle_bytes, row_bytes, swap=False, rows=16):
    """fp16 tile (rows, row_bytes / 2), viewed [-1, s, 8/s, s', 16B] and XOR-swizzled."""
    s = swizzle_bytes // 16
    fusion, t1, t2 = tma_load(name, [256, 256], dtype=tp.float16)
    per_block_tiles(t1, t2, rows, row_bytes // 2)  # [I0o, I1o, rows, cols]
    t1.split(3, 8)  # [.., rows, chunks, 16B]
    if row_bytes > swizzle_bytes:
        t1.split(3, s)  # [.., rows, chunks/s, s, 16B]
    t1.split(2, 8 // s).split(2, s)  # [.., -1, s, 8/s, .., s, 16B]
    x, y = 3, t1.ndim - 2
    t1.swizzle(XOR, y, x) if swap else t1.swizzle(XOR, x, y)
    for a in range(2, t1.ndim):
        t1.axis(a).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-SWIZZLE-LAYOUT", messages=["not the TMA's 64-byte swizzle"]))
def swizzle_64b_swapped_axes():
    """The 64-byte recipe with the swizzle axes swapped: swizzle(3, 1) XORs the row chunk with
    the column chunk in the wrong direction; the counterexample shows an element whose address
    differs from the hardware's."""
    return swizzled("swizzle_64b_swapped_axes", 64, 64, swap=True)


@tp.schedule(expect=tp.rejected("TMA-SWIZZLE-LAYOUT"))
def swizzle_128b_swapped_axes():
    """The 128-byte recipe [-1, 8, 1, 8, 16B] with swizzle(3, 1)."""
    return swizzled("swizzle_128b_swapped_axes", 128, 128, swap=True, rows=32)


@tp.schedule(expect=tp.rejected("TMA-SWIZZLE-WIDTH", messages=["wider than its 32-byte swizzle span"]))
def swizzle_32b_wrong_width():
    """The 32-byte recipe [-1, 2, 4, 2, 16B] applied to 64-byte rows (32 fp16): the inner box is
    wider than the swizzle span, which cuTensorMapEncodeTiled rejects."""
    return swizzled("swizzle_32b_wrong_width", 32, 64)


@tp.schedule(expect=tp.rejected("TMA-SWIZZLE-LAYOUT", "TMA-SWIZZLE-WIDTH",
                                messages=["t1.swizzle(XOR, 2, 4) XORs the wrong loop axes", "wider than its 32-byte"]))
def swizzle_64b_wrong_axes():
    """The 64-byte recipe [-1, 4, 2, 4, 16B] with the XOR on the wrong loop axes: swizzle(2, 4)
    instead of swizzle(3, 5). The XORed axis 4 has 2 chunks, so the TMA mode it implies is 32
    bytes, narrower than the 64-byte rows (TMA-SWIZZLE-WIDTH). The cause, reported first, is the
    axes (TMA-SWIZZLE-LAYOUT, with the call that fixes both, swizzle(3, 5)); the width error
    follows from it."""
    fusion, t1, t2 = tma_load("swizzle_64b_wrong_axes", [256, 256], dtype=tp.float16)
    per_block_tiles(t1, t2, 16, 32)  # [I0o, I1o, R{16}, C{32}]
    t1.split(3, 8)  # [.., R{16}, 4 chunks, 16B]
    t1.split(2, 2).split(2, 4)  # [.., 2, 4, 2, 4 chunks, 16B]
    t1.swizzle(XOR, 2, 4)
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # the layout the swizzle is written for
    for a in range(2, t1.ndim):
        t1.axis(a).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-SWIZZLE-LAYOUT"))
def swizzle_element_xor():
    """An XOR swizzle of fp32 elements rather than 16-byte chunks: rows of 32 floats (128 bytes)
    whose last 8 elements are XORed with the row index. Its inner extent 8 reads as a 128-byte
    mode and the row fills the span, but the layout is not the hardware's: rejected by the
    layout proof (function equality), not by a pattern match."""
    fusion, t1, t2 = tma_load("swizzle_element_xor", [256, 256])
    per_block_tiles(t1, t2, 8, 32)  # [I0o, I1o, R{8}, C{32}]
    loop = t1.get_loop_domain()
    t1.split(3, 8)  # [.., R{8}, 4, 8]
    t1.swizzle(XOR, 2, 4)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("SMEM-ALIGNMENT", messages=["not a multiple of 128"]))
def tma_tiles_per_thread_misaligned():
    """Each of 16 threads loads its own 64-byte tile (16 floats) into consecutive slots: the
    tile of thread 1 starts at byte 64, and a TMA to an address that is not 128-byte aligned
    faults with CUDA_ERROR_MISALIGNED_ADDRESS (measured on H200)."""
    fusion, t1, t2 = tma_load("tma_tiles_per_thread_misaligned", [1024, 256])
    t1.split(1, 16)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-WHOLE-TILES", messages=["past its end"]))
def swizzle_128b_padded_rows_overflow():
    """Tiles of 15 bf16 rows x 64 (128-byte swizzle), one per block, but the allocation is the
    tensor's own 20 rows padded to whole swizzle atoms (24 rows, 3072 bytes) with each row at its
    row index: the layout is right for every element of the tensor, but the second block's box
    covers rows 15..29, and TMA writes its out-of-bounds rows 20..29 too (as zeros), up to byte
    3840: past the buffer."""
    fusion, t1, t2 = tma_load("swizzle_128b_padded_rows_overflow", [20, 64], dtype=tp.bfloat16)
    loop = t1.get_loop_domain()
    t1.split(1, 8).split(0, 8)  # [3, 8 rows, 8 chunks, 16B]: 24 rows
    t1.swizzle(XOR, 1, 2)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    for t in (t1, t2):
        t.split(0, 15)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-COORD-RANGE"))
def tma_flattened_beyond_int32():
    """A pointwise view that flattens a 65536 x 65536 fp16 tensor into one TMA dimension:
    coordinates reach 2^32 - 256, beyond the .s32 coordinate operand."""
    fusion, t1, t2 = tma_load("tma_flattened_beyond_int32", [65536, 65536], dtype=tp.float16)
    for t in (t1, t2):
        t.merge(0).split(0, 256)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-TILE-CONTIGUITY"))
def tma_transpose_allocation_transposed():
    """The transpose example "fixed" for bank conflicts by allocating the shared tile
    column-major ([C, R]), so the transposing read is row-wise: but the TMA writes the tile
    row-major whatever the allocation says, so every read would get the wrong element."""
    with tp.Fusion("tma_transpose_allocation_transposed") as fusion:
        t0 = tp.make_contig_concrete_tensor([1024, 1024])
        fusion.add_input(t0)
        t1 = tp.transpose(t0, 0, 1)
        fusion.add_output(t1)
    t2 = t0.cache_after(op=TMA)
    t2.set_memory_type(tp.MemoryType.Shared)
    t2.split(1, 32).split(0, 32).reorder({1: 2})  # [I0o, I1o, R{32}, C{32}]
    t2.set_allocation_domain([t2.axis(0), t2.axis(1), t2.axis(3), t2.axis(2)])
    t2.axis(0).parallelize(P.BIDy)
    t2.axis(1).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.Bulk)
    t1.split(1, 32).split(0, 32).reorder({1: 2})  # [I1o, I0o, c{32}, r{32}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.BIDy)
    t1.axis(3).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion
