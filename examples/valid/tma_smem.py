"""Valid shared-memory schedules for TMA from the nvFuser TMA tutorial (seed 004, step 4):
Figure 14 (a-e), Figure 15 (a, b, e), the `[-1, s, 8/s, s, 16B]` swizzle recipe for 32, 64 and
128 bytes, a narrow row padded to the swizzle span, swizzled tiles of 3, 5 or 15 rows padded to
whole swizzle atoms (nvFuser's TMASimpleLdstTest tiles), and the tutorial's three example kernels.

The figures are not in the seed; each case is drawn from its text. Common choice: fp32
T0[I1{64}, I2] loaded by TMA into the shared T1, I1 split by 8 -> [I3, I4{8}] and I2 split
-> [I5, I6]; I4 and I6 are the box. The allocation domain is the loop domain unless set.
The output T2 is split like T1 and parallelized on the same block indices, so each block
stores the tile it loaded (shared memory is per block: SMEM-BLOCK-VISIBILITY).
"""

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA
XOR = tp.SwizzleType.XOR


def tma_load(name, shape, dtype=tp.float32):
    """gmem T0 -> (TMA) smem T1 -> gmem T2; `shape` may name symbolic extents."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(shape, contiguity=True, dtype=dtype)
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


@tp.schedule(expect=tp.accepted())
def figure14a_stride_outside_tile():
    """Figure 14 (a): a strided tile, I4 split by element stride 2 -> [I7{4} tile, I8{2} stride].
    Allocated [I3, I8, I7, I5, I6]: I7 is inner to I8, and I5 between I7 and I6 is on BIDx,
    so it is not allocated. Chosen: I2 = 256 boxed by 32; T2's I5 on BIDx too."""
    fusion, t1, t2 = boxed("figure14a_stride_outside_tile", 256, 32)
    t1.split(1, 2)  # [I3, I7{4}, I8{2}, I5, I6]
    t1.reorder({2: 1})  # [I3, I8, I7, I5, I6]
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # as nvFuser's Figure14a (unset: I8 splits the tile)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.BIDx)
    t1.axis(4).parallelize(P.Bulk)
    t2.axis(2).parallelize(P.BIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def figure14b_split_by_whole_extent():
    """Figure 14 (b): the allocation is [I4, I2], and I2{32} is boxed by exactly its extent,
    so I2 and I6 are the same elements. Chosen: I3 on BIDx (in T1 and T2)."""
    fusion, t1, t2 = boxed("figure14b_split_by_whole_extent", 32, 32)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t1.set_allocation_domain([t1.axis(1), t1.get_logical_domain()[1]])
    return fusion


@tp.schedule(expect=tp.accepted())
def figure14c_extent_one_tile_id():
    """Figure 14 (c): [I3, I4, I5, I6] with I5 on TIDx between the tile IDs I4 and I6; I4 has
    extent 1, so it does not matter where it sits. Chosen: I2 = 128 boxed by 32 (I5{4})."""
    fusion, t1, _ = boxed("figure14c_extent_one_tile_id", 128, 32, box1=1)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(2).parallelize(P.TIDx)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def figure14d_store_split_by_whole_extent():
    """Figure 14 (d): the TMA store counterpart of (b): the shared producer T1 is allocated
    [I4, I2] with I2{32} boxed by its extent in the consumer T2 (the global output)."""
    with tp.Fusion("figure14d_store_split_by_whole_extent") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=TMA)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 8).split(2, 32)  # [I3, I4{8}, I5{1}, I6{32}]
        t.axis(0).parallelize(P.BIDx)
    t1.axis(3).parallelize(P.TIDx)
    t1.set_allocation_domain([t1.axis(1), t1.get_logical_domain()[1]])
    t2.axis(1).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def figure14e_extent_one_between():
    """Figure 14 (e): [I3, I4, I5, I6] with a serial I5 between the tile IDs, but I5 has extent 1
    (I2{32} boxed by 32)."""
    fusion, t1, _ = boxed("figure14e_extent_one_between", 32, 32)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def figure15a_tile_merged_and_resplit():
    """Figure 15 (a): the tile [I4{8}, I6{32}] is viewed arbitrarily in the allocation: merged
    and split by 64 -> [I7{4}, I8{64}]; every tile stays contiguous and whole. I5 on BIDx."""
    fusion, t1, t2 = boxed("figure15a_tile_merged_and_resplit", 256, 32)
    t2.axis(2).parallelize(P.BIDx)
    t1.reorder({1: 2})  # [I3, I5, I4, I6]
    loop = t1.get_loop_domain()
    t1.merge(2).split(2, 64)  # [I3, I5, I7{4}, I8{64}]
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def figure15b_tile_split_inside():
    """Figure 15 (b): I6{32} split by 8 in the allocation -> [I3, I4, I7{4}, I8{8}] (I5 on BIDx)."""
    fusion, t1, t2 = boxed("figure15b_tile_split_inside", 256, 32)
    t2.axis(2).parallelize(P.BIDx)
    t1.reorder({1: 2})  # [I3, I5, I4, I6]
    loop = t1.get_loop_domain()
    t1.split(3, 8)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def figure15e_not_whole_tiles():
    """Figure 15 (e): the tile is merged and split by 96 -> [I7{3}, I8{96}]: each tile is
    contiguous (elements 0..255 in order) in an allocation of 288 elements, not a whole number of
    256-element tiles. The tutorial asks for whole tiles, but the hardware does not: the one copy
    of each block writes bytes [0, 1024) of the 1152-byte buffer and the last 128 bytes are never
    touched (TMA-WHOLE-TILES proves the copy inside the buffer). Chosen: I3 on BIDy, so one tile
    per block."""
    fusion, t1, t2 = boxed("figure15e_not_whole_tiles", 256, 32)
    for t in (t1, t2):
        t.reorder({1: 2})  # [I3, I5, I4, I6]
        t.axis(0).parallelize(P.BIDy)
    t2.axis(1).parallelize(P.BIDx)
    loop = t1.get_loop_domain()
    t1.merge(2).split(2, 96)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


def per_block_tiles(t1, t2, rows, cols):
    """T1 and T2 tiled [I0o, I1o, rows, cols] with I0o on BIDy and I1o on BIDx."""
    for t in (t1, t2):
        t.split(1, cols).split(0, rows).reorder({1: 2})  # [I0o, I1o, rows, cols]
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)


def swizzled(name, swizzle_bytes, rows=16, swap=False):
    """fp16 tile (rows, S/2) with the seed's recipe: tile => [-1, s, 8/s, s, 16B] => swizzle(1, 3);
    the view and swizzle are the shared tensor's loop (= allocation) domain, all Bulk."""
    s = swizzle_bytes // 16
    fusion, t1, t2 = tma_load(name, [256, 256], dtype=tp.float16)
    per_block_tiles(t1, t2, rows, swizzle_bytes // 2)  # [I0o, I1o, rows, S/2]
    t1.split(3, 8)  # [.., rows, s, 16B]
    t1.split(2, 8 // s).split(2, s)  # [.., -1, s, 8/s, s, 16B]
    if swap:
        t1.swizzle(XOR, 5, 3)
    else:
        t1.swizzle(XOR, 3, 5)
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # unset, the swizzle's outputs would follow its inner input
    for a in range(2, 7):
        t1.axis(a).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def swizzle_32b_recipe():
    """32-byte swizzle: fp16 rows of 16 elements viewed as [-1, 2, 4, 2, 16B], swizzle(1, 3)."""
    return swizzled("swizzle_32b_recipe", 32)


@tp.schedule(expect=tp.accepted())
def swizzle_64b_recipe():
    """64-byte swizzle: fp16 rows of 32 elements viewed as [-1, 4, 2, 4, 16B], swizzle(1, 3)."""
    return swizzled("swizzle_64b_recipe", 64)


@tp.schedule(expect=tp.accepted())
def swizzle_128b_recipe():
    """128-byte swizzle: fp16 rows of 64 elements viewed as [-1, 8, 1, 8, 16B], swizzle(1, 3)."""
    return swizzled("swizzle_128b_recipe", 128, rows=32)


@tp.schedule(expect=tp.accepted())
def swizzle_128b_narrow_row_padded():
    """128-byte swizzle with a 64-byte inner box (32 fp16): the hardware still gives each row
    128 bytes. The allocation reserves them: the row is split by 64 (one outer, holes in the
    inner half), then viewed as [-1, 8, 8, 16B] and swizzled. Chosen: 16 rows, the seed's
    short form [-1, 8, 8, 16B] for 128 bytes."""
    fusion, t1, t2 = tma_load("swizzle_128b_narrow_row_padded", [256, 256], dtype=tp.float16)
    per_block_tiles(t1, t2, 16, 32)  # [I0o, I1o, R{16}, C{32}]
    loop = t1.get_loop_domain()
    t1.split(3, 64)  # [.., R, 1, 64]: each row padded to 64 elements = 128 bytes
    t1.split(4, 8).split(2, 8)  # [.., 2, 8, 1, 8, 8]
    t1.swizzle(XOR, 3, 5)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


def padded_tile(name, dtype, rows, swizzle_bytes, padded):
    """T0[M, 64] loaded one tile of `rows` x S bytes per block, S-byte swizzle; the allocation pads
    the tile's rows to `padded` (a multiple of 8) with the seed's recipe on the padded rows:
    [1, padded/8, s, 8/s, s, 16B], swizzle(row chunk, column chunk). The loop keeps [rows, cols]: the
    TMA box has `rows` rows and never touches the padding. T2 stores the tile with 16-byte vectors,
    one row per TIDy: only the rows the box holds."""
    fusion, t1, t2 = tma_load(name, ["M", 64], dtype=dtype)
    fusion.assume(f"M <= 65535 * {rows}")  # gridDim.y = ceil(M / rows) launches (LAUNCH-GRID)
    s, vec = swizzle_bytes // 16, 16 // dtype.bytes
    per_block_tiles(t1, t2, rows, swizzle_bytes // dtype.bytes)  # [I0o, I1o, rows, S/es]
    loop = t1.get_loop_domain()
    t1.split(3, vec)  # [.., rows, s, 16B]
    t1.split(2, padded)  # [.., 1, padded, s, 16B]: rows past `rows` are holes
    t1.split(3, 8 // s).split(3, s)  # [.., 1, padded/8, s, 8/s, s, 16B]
    t1.swizzle(XOR, 4, 6)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t2.split(3, vec)
    t2.axis(2).parallelize(P.TIDy)
    t2.axis(3).parallelize(P.TIDx)
    t2.axis(4).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted())
def swizzle_128b_padded_3_rows():
    """bf16 tiles of 3 x 64 (128-byte rows, 128-byte swizzle) in an allocation of 8 rows, one swizzle
    atom: the copy writes bytes [0, 384) of 1024. Symbolic M: the last block's box is partly out of
    bounds (TMA fills those rows with zeros inside the box, and T2's predicate skips them)."""
    return padded_tile("swizzle_128b_padded_3_rows", tp.bfloat16, 3, 128, 8)


@tp.schedule(expect=tp.accepted())
def swizzle_64b_padded_5_rows():
    """fp32 tiles of 5 x 16 (64-byte rows, 64-byte swizzle) padded to 8 rows: four tiles across the
    64 columns (BIDx), each block's copy writes bytes [0, 320) of its 512-byte buffer."""
    return padded_tile("swizzle_64b_padded_5_rows", tp.float32, 5, 64, 8)


@tp.schedule(expect=tp.accepted())
def swizzle_128b_padded_15_rows():
    """bf16 tiles of 15 x 64 with 128-byte swizzle padded to 16 rows (two swizzle atoms): the copy
    writes bytes [0, 1920) of 2048."""
    return padded_tile("swizzle_128b_padded_15_rows", tp.bfloat16, 15, 128, 16)


@tp.schedule(expect=tp.accepted())
def swizzle_128b_padded_tiles_stacked():
    """Two bf16 tiles of 5 x 64 per block (a serial loop), stacked in one allocation of 10 rows padded
    to 16 and swizzled as a whole: the second copy starts at byte 640, not on the 1024-byte swizzle
    period. The hardware anchors the swizzle to absolute shared addresses, so its rows 5..9 get the
    XOR of rows 5..9 of the buffer, the allocation's (TMA-SWIZZLE-LAYOUT proves it); the copies
    write [0, 640) and [640, 1280) of 2048 bytes (TMA-WHOLE-TILES)."""
    fusion, t1, t2 = tma_load("swizzle_128b_padded_tiles_stacked", ["M", 64], dtype=tp.bfloat16)
    for t in (t1, t2):
        t.split(0, 5).split(0, 2)  # [Mo, 2, 5, 64]
        t.axis(0).parallelize(P.BIDx)
    loop = t1.get_loop_domain()
    t1.merge(1)  # [Mo, 10 rows, 64]
    t1.split(2, 8).split(1, 16)  # [Mo, 1, 16, 8 chunks, 16B]
    t1.split(2, 8)  # [Mo, 1, 2, 8, 8, 16B]
    t1.swizzle(XOR, 3, 4)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t2.split(3, 8)
    t2.axis(2).parallelize(P.TIDy)
    t2.axis(3).parallelize(P.TIDx)
    t2.axis(4).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_simple_ldst_3_rows_flattened():
    """nvFuser's TMASimpleLdstTest (Load, 2-D, 128-byte swizzle, fp32): T0[1024, 128] tiled {3, 32},
    the tile flattened and viewed as [N, 8, 16B] core matrices, then [N/8, 8, 1, 8, 16B] and
    swizzled; the loop is the allocation, all Bulk. 3 rows of 128 bytes are 24 chunks: the view
    pads them to one swizzle atom of 8 rows (holes past row 3), and the copy writes [0, 384) of
    1024 bytes. 1024 rows are not a multiple of 3: the last box is partly out of bounds."""
    fusion, t1, t2 = tma_load("tma_simple_ldst_3_rows_flattened", [1024, 128])
    for t in (t1, t2):
        t.split(1, 32).split(0, 3).reorder({1: 2})  # [I0o, I1o, 3, 32]
        t.merge(0).merge(1)  # [I0o * I1o, 3 * 32]
        t.axis(0).parallelize(P.BIDx)
    t1.split(1, 4).split(1, 8)  # [B, N, 8, 16B]
    t1.split(1, 8).split(3, 8)  # [B, N/8, 8, 1, 8, 16B]
    t1.swizzle(XOR, 2, 4)
    t1.set_allocation_domain(t1.get_loop_domain())
    for a in range(1, t1.ndim):
        t1.axis(a).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_pointwise_vectorized_store():
    """Example 1: T2 = T0 + T1, both inputs loaded by TMA, output stored with 4-wide vectors.
    Chosen (the schedule figure is not in the seed): every tensor is viewed 1-D (merge), split
    by 256: each block loads a 256-element box of each input (1-D TMA), then 64 threads each add
    and store 4 elements. Sizes 16384 x 16384 (2^28 floats, the benchmark's size): with symbolic
    M x N the bank-conflict proof over blocks < ceil(M*N / 256) is nonlinear and takes ~9 s."""
    with tp.Fusion("tma_pointwise_vectorized_store") as fusion:
        t0 = tp.make_contig_concrete_tensor([16384, 16384])
        t1 = tp.make_contig_concrete_tensor([16384, 16384])
        fusion.add_input(t0)
        fusion.add_input(t1)
        t2 = tp.add(t0, t1)
        fusion.add_output(t2)
    t3 = t0.cache_after(op=TMA)
    t4 = t1.cache_after(op=TMA)
    for t in (t3, t4):
        t.set_memory_type(tp.MemoryType.Shared)
    for t in (t2, t3, t4):
        t.merge(0).split(0, 256)
        t.axis(0).parallelize(P.BIDx)
    for t in (t3, t4):
        t.axis(1).parallelize(P.Bulk)
    t2.split(1, 4)
    t2.axis(1).parallelize(P.TIDx)
    t2.axis(2).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_broadcast_discontiguous():
    """Example 2: T3[I0, I1, I2, I3] = T1 + broadcast(T0[I1, I2, I3]), T1's I1 discontiguous
    (contiguity T, F, T, T). Chosen: [I2, I3] merged (contiguous in both inputs) and boxed by
    256; I1 stays its own TMA dimension of T1 (its stride is a launch-time value), I0 and I1
    on blocks, 64 threads x 4-wide vectors store the output. Sizes 8 x 16 x 32 x 64."""
    with tp.Fusion("tma_broadcast_discontiguous") as fusion:
        t0 = tp.make_contig_concrete_tensor([16, 32, 64])
        t1 = tp.make_tensor([8, 16, 32, 64], contiguity=[True, False, True, True])
        fusion.add_input(t0)
        fusion.add_input(t1)
        t2 = tp.broadcast(t0, [True, False, False, False])
        t3 = tp.add(t1, t2)
        fusion.add_output(t3)
    t4 = t0.cache_after(op=TMA)
    t5 = t1.cache_after(op=TMA)
    for t in (t4, t5):
        t.set_memory_type(tp.MemoryType.Shared)
    for t in (t2, t3, t5):
        t.merge(2).split(2, 256)  # [I0, I1, I23o, 256]
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDz)
        t.axis(2).parallelize(P.BIDx)
    t4.merge(1).split(1, 256)  # [I1, I23o, 256]
    t4.axis(0).parallelize(P.BIDz)
    t4.axis(1).parallelize(P.BIDx)
    for t in (t4, t5):
        t.axis(-1).parallelize(P.Bulk)
    for t in (t2, t3):
        t.split(3, 4)
        t.axis(3).parallelize(P.TIDx)
        t.axis(4).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_transpose_bank_conflict_free():
    """Example 3: T1[I1, I0] = transpose(T0[I0, I1]) for 32-bit data. Chosen: a 32 x 32 fp32 tile
    per block is loaded by TMA with 128-byte swizzle (rows of 128 bytes, [-1, 8, 8, 16B],
    swizzle(1, 2)); a warp then reads 8 rows x 4 columns of one 16-byte chunk: the swizzle puts
    the 8 rows' chunks in 8 different bank groups, so the column reads are conflict-free
    (SMEM-BANK-CONFLICT proves it). The output is written from registers."""
    with tp.Fusion("tma_transpose_bank_conflict_free") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.transpose(t0, 0, 1)
        fusion.add_output(t1)
    fusion.assume("N % 4 == 0")  # 16-byte row stride for the TMA (TMA-GLOBAL-STRIDE)
    fusion.assume("M <= 65535 * 32")  # gridDim.y = ceil(M / 32) launches (LAUNCH-GRID)
    t2 = t0.cache_after(op=TMA)
    t2.set_memory_type(tp.MemoryType.Shared)
    t2.split(1, 32).split(0, 32).reorder({1: 2})  # [I0o, I1o, R{32}, C{32}]
    loop = t2.get_loop_domain()
    t2.split(3, 4).split(2, 8)  # [.., 4, 8 rows, 8 chunks, 4]
    t2.swizzle(XOR, 3, 4)
    t2.set_allocation_domain(t2.get_loop_domain())
    t2.set_loop_domain(loop)
    t2.axis(0).parallelize(P.BIDy)
    t2.axis(1).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.Bulk)
    # T1[I1, I0]: tile (32 of I1) x (32 of I0); a warp takes 8 I0 rows x 4 I1 columns
    t1.split(1, 32).split(0, 32).reorder({1: 2})  # [I1o, I0o, c{32}, r{32}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.BIDy)
    t1.split(3, 8).split(2, 4)  # [I1o, I0o, chunk{8}, j{4}, ro{4}, ri{8}]
    t1.reorder({3: 5})  # [I1o, I0o, chunk, ro, ri, j]
    t1.merge(4)  # [I1o, I0o, chunk, ro, ri*j{32}]
    t1.axis(3).parallelize(P.TIDy)
    t1.axis(4).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion
