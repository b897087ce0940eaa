"""ldmatrix / stmatrix schedules (seed 003, the nvFuser LdMatrix/StMatrix tutorial): its
LdStMatrixSet example (TMA load with 128-byte swizzle -> ldmatrix.x4 -> stmatrix.x4 -> TMA store
with 128-byte swizzle), and small .x1 / .x2 / .x4 cases.

An ldmatrix is `tp.set(smem, op=LdMatrix)` into a Local tensor whose loop domain issues it; a
stmatrix is `tp.set(regs, op=StMatrix)` into a Shared tensor whose loop domain issues it. In both,
the issuing loop domain has TIDx (lanes) and Vectorize (2, 4 or 8 16-bit elements per thread: .x1,
.x2, .x4) and is the m8n8 fragment: lane t holds row t/4, columns 2(t%4) + {0, 1} of each matrix.
An ldmatrix also moves float32 (CuTe's LDSM_U32x{1,2,4}_N on Float32, as in MoYe's tf32 matmul):
a matrix is 8 rows x 4 32-bit columns (16 bytes), each thread holds 1, 2 or 4 elements, one per
matrix, and lane t holds row t/4, column t%4 of each: the mma.sync m16n8k8 tf32 operand fragment.
tileproof has no AbstractTensor: where the seed gives a tensor a loop domain other than its
allocation domain, the loop domain is scheduled first and saved, the allocation branch is scheduled
from the earlier loop domain (set_loop_domain), set as the allocation domain, and the saved loop
domain restored.
"""

import tileproof as tp

P = tp.ParallelType
LS = tp.LoadStoreOpType
F16 = tp.float16
F32 = tp.float32


# -- the seed's helpers ------------------------------------------------------------------------------


def schedule_ld_st_matrix(tv):
    """The seed's scheduleLdStMatrix on tv's loop domain [..., m(64), n(256)] (the warp tile):
    -> [..., (no * nio)(16), (mo * mii * niiio)(128), (niio * mio * niiii)(8)]. Returns the loop IDs."""
    tv.split(-1, 64).reorder({-2: -3, -3: -2})  # [..., no(4), m(64), ni(64)]: the TMA box
    tv.split(-2, 16).split(-1, 16).reorder({-2: -3, -3: -2})  # [..., no, mo(4), nio(4), mi(16), nii(16)]
    tv.split(-2, 8).split(-1, 8)  # mi -> mio(2), mii(8); nii -> niio(2), niii(8)
    tv.split(-1, 2)  # niii -> niiio(4), niiii(2): two adjacent elements per register
    # the (16, 16) tile's four 8x8 matrices in the wgmma accumulator order: 0 TL, 1 BL, 2 TR, 3 BR
    tv.reorder({-5: -2, -4: -5, -2: -4})  # [..., no, mo, nio, mii(8), niiio(4), niio(2), mio(2), niiii(2)]
    tv.merge(-2, -1).merge(-2, -1)  # [..., no, mo, nio, mii, niiio, (niio * mio * niiii)(8)]
    tv.reorder({-5: -4, -4: -5})  # [..., no, nio, mo, mii, niiio, 8]
    tv.merge(-4, -3).merge(-3, -2)  # four ldmatrix.x4 side by side: (mo * mii * niiio)(128)
    tv.merge(-4, -3)  # the hard-coded shared-memory index wanted one serial ID: (no * nio)(16)
    return tv.get_loop_domain()


def swizzle_tma_box(tv, swizzle_bytes):
    """nvFuser's TensorView::swizzleTMABox on [..., rows, columns of one swizzle span]:
    [..., ko, kio(8 * S / 128), kii(128 / S), nio(S / 16), nii(16 bytes)], XOR (kio, nio)."""
    tv.split(-2, 8)
    tv.split(-2, 128 // swizzle_bytes)
    tv.split(-1, 16 // tv.dtype.bytes)
    tv.swizzle(tp.SwizzleType.XOR, -4, -2)


def schedule_tma_for_mma(tv, swizzle_bytes):
    """The inner tile [..., m, n] -> [..., no, m, ni] with ni one swizzle span, then swizzleTMABox
    (scheduleTMALoadForMma and scheduleTMAStoreForMmaOutput with a swizzle)."""
    tv.split(-1, swizzle_bytes // tv.dtype.bytes).reorder({-2: -3})
    swizzle_tma_box(tv, swizzle_bytes)


def parallelize_as_bulk_skipping_first_ids(tv, skip):
    for i in tv.get_loop_domain()[skip:]:
        i.parallelize(P.Bulk)


def ld_st_matrix_set(shape):
    """The seed's LdStMatrixSet fusion and schedule for a bf16 tensor of the given shape."""
    cta_m, cta_n, warp_m, warp_n = 128, 256, 64, 256
    with tp.Fusion("ldst_matrix_set") as fusion:
        tv0 = tp.make_tensor(shape, contiguity=True, dtype=tp.bfloat16)  # M, K
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        fusion.add_output(tv1)
    if isinstance(shape[1], str):  # gridDim.y = ceil(K / 256) launches up to 65535 (LAUNCH-GRID)
        fusion.assume(f"{shape[1]} <= 65535 * {cta_n}")
    tv0_smem = tv0.cache_after(LS.TMA)  # TMA load, 128-byte swizzle
    tv0_smem.set_memory_type(tp.MemoryType.Shared)
    tv0_reg = tv0_smem.cache_after(LS.LdMatrix)  # ldmatrix: shared -> registers
    tv1_smem = tv1.cache_before(LS.TMA)  # tv1 = TMA store(tv1_smem)
    tv1_smem.definition.op_type = LS.StMatrix  # the seed's setOpType(StMatrix): registers -> shared
    tv1_smem.set_memory_type(tp.MemoryType.Shared)

    # 2-D block tile, then warp tile: (GM, GN, cta_m(2), cta_n(1), warp_m(64), warp_n(256))
    tv1.split(0, cta_m).split(-1, cta_n).reorder({-2: -3, -3: -2})
    tv1.split(-2, warp_m).split(-1, warp_n).reorder({-2: -3, -3: -2})
    tp.propagate_transforms(tv1)
    tv1.axis(0).parallelize(P.BIDx)
    tv1.axis(1).parallelize(P.BIDy)
    tv1.axis(2).parallelize(P.TIDy)
    tp.parallelize_all_like(tv1)

    # tmaSwizzleSharedMemory: the inner tile is 256 bf16 = 512 bytes, a multiple of 128: 128B swizzle
    swizzle = 128
    # scheduleTMALoadForMma: box (64, 64), Bulk after the first 5 IDs, allocation = loop domain
    schedule_tma_for_mma(tv0_smem, swizzle)
    parallelize_as_bulk_skipping_first_ids(tv0_smem, 5)
    tv0_smem.set_allocation_domain(tv0_smem.get_loop_domain(), True)
    # scheduleTMAStoreForMmaOutput on the global output: the same box, Bulk
    schedule_tma_for_mma(tv1, swizzle)
    parallelize_as_bulk_skipping_first_ids(tv1, 5)

    # stmatrix: loop domain from scheduleLdStMatrix, allocation domain = the swizzled TMA box
    warp_tile = tv1_smem.get_loop_domain()
    ldst_loop = schedule_ld_st_matrix(tv1_smem)
    tv1_smem.set_loop_domain(warp_tile)
    schedule_tma_for_mma(tv1_smem, swizzle)  # scheduleTMAStoreForMmaOutput on the shared tensor
    tv1_smem.set_allocation_domain(tv1_smem.get_loop_domain(), True)
    tv1_smem.set_loop_domain(ldst_loop)
    tv1_smem.axis(-2).parallelize(P.TIDx)  # four stmatrix.x4 in parallel (a warp group)
    tv1_smem.axis(-1).parallelize(P.Vectorize)  # eight elements per thread: x4

    # ldmatrix: loop domain from scheduleLdStMatrix, allocation domain = loop domain
    schedule_ld_st_matrix(tv0_reg)
    tv0_reg.set_allocation_domain(tv0_reg.get_loop_domain(), True)
    tv0_reg.axis(-2).parallelize(P.TIDx)
    tv0_reg.axis(-1).parallelize(P.Vectorize)

    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T2": {"bytes": 65536}, "T3": {"bytes": 16}, "T4": {"bytes": 65536}}),
             params={"size": ["symbolic", "any", "8192x8192"]})
def ldst_matrix_set(size):
    """The seed's LdStMatrixSet: tv0 (M, K bf16) -TMA-> T2 (smem, 128B swizzle) -ldmatrix.x4->
    T3 (registers) -stmatrix.x4-> T4 (smem, 128B swizzle) -TMA-> tv1. CTA tile (128, 256), warp tile
    (64, 256) on TIDy, TMA box (64, 64), four x4 instructions per step over TIDx{128}, 16 steps.
    T3 holds 8 bf16 per thread; each shared tile is 2 warp tiles x 64 x 256 bf16 = 64 KiB.

    Chosen where the seed leaves it open: the seed's test runs 8192 x 8192; the symbolic case
    assumes M % 128 == 0 and K % 256 == 0 (whole CTA tiles), the "any" case only K % 8 == 0 (the
    TMA's 16-byte row stride): at a partial tile the warp-collective ldmatrix and stmatrix run
    at their holes, on the zeros the TMA load writes past M and K, and the TMA store clips
    what lies past them (execution/clipped_holes.py; invalid/ldst_matrix.py without the stride).
    The tensors are made with cache_after / cache_before as in the seed; cache_before gives the new
    copy (tv1 = TMA(T4)) its op type, so the LdMatrix -> T4 op is set to StMatrix afterwards, as
    the seed's setOpType does. tmaSwizzleSharedMemory's choice is written out: 128 bytes."""
    fusion = ld_st_matrix_set([8192, 8192] if size == "8192x8192" else ["M", "K"])
    if size == "symbolic":
        fusion.assume("M % 128 == 0")
        fusion.assume("K % 256 == 0")
    if size == "any":
        fusion.assume("K % 8 == 0")
    return fusion


# -- small cases ---------------------------------------------------------------------------------------


def smem_to_registers(shape, dtype=F16):
    """T0 (gmem) -> T1 (smem) -ldmatrix-> T2 (registers) -> T3 (gmem)."""
    with tp.Fusion("ldmatrix") as fusion:
        t0 = tp.make_contig_concrete_tensor(shape, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.LdMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t1, t2, t3


def fragment_x1(*tensors):
    """[8, 8] -> [(row(8) * column pair(4))(32) TIDx, column % 2 (2)]."""
    for t in tensors:
        t.split(1, 2).merge(0, 1)
        t.axis(0).parallelize(P.TIDx)


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",),
                                allocations={"T1": {"bytes": 128}, "T2": {"bytes": 4}}))
def ldmatrix_x1():
    """One 8x8 fp16 matrix: lane t holds row t/4, columns 2(t%4), 2(t%4)+1 (two elements: .x1);
    the shared tile is row-major, so lane r (r < 8) supplies row r at byte 16r."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8])
    fragment_x1(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def ldmatrix_x2():
    """A 16x8 fp16 tile as two matrices stacked in rows (.x2): register 0 = rows 0-7, register 1 =
    rows 8-15; lanes 8-15 supply the rows of the second matrix."""
    fusion, t1, t2, t3 = smem_to_registers([16, 8])
    for t in (t2, t3):
        t.split(1, 2).split(0, 8)  # [row / 8 (2), row % 8 (8), column pair (4), column % 2 (2)]
        t.reorder({0: 2})  # [8, 4, 2 (matrix), 2]
        t.merge(0, 1).merge(1, 2)  # [32, (matrix * column % 2)(4)]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


def fragment_x4(*tensors):
    """[16, 16] -> [32 TIDx, (column / 8, row / 8, column % 2)(8)]: matrices 0 TL, 1 BL, 2 TR, 3 BR."""
    for t in tensors:
        t.split(1, 8).split(2, 2).split(0, 8)  # [ro(2), r(8), co(2), cq(4), cp(2)]
        t.reorder({0: 3, 1: 0, 2: 2, 3: 1})  # [r, cq, co, ro, cp]
        t.merge(0, 1).merge(1, 2).merge(1, 2)  # [32, 8]
        t.axis(0).parallelize(P.TIDx)


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def ldmatrix_x4():
    """A 16x16 fp16 tile as four matrices (.x4) in the seed's (wgmma accumulator) order."""
    fusion, t1, t2, t3 = smem_to_registers([16, 16])
    fragment_x4(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def ldmatrix_x4_two_warps_swizzled():
    """Two warps (TIDx{64}) each load a 16x16 bf16 tile (.x4) of a [32, 16] shared tile whose
    16-byte chunks are XOR-swizzled by row (rows stay whole 16-byte chunks, so they stay valid
    ldmatrix rows; the swizzle only moves them)."""
    fusion, t1, t2, t3 = smem_to_registers([32, 16], dtype=tp.bfloat16)
    t1.split(1, 8).split(0, 2)  # [row / 2 (16), row % 2 (2), chunk (2), 8]
    t1.swizzle(tp.SwizzleType.XOR, 1, 2)  # chunk ^= row % 2
    for t in (t2, t3):
        t.split(0, 16)  # [warp (2), 16, 16]
        t.split(2, 8).split(3, 2).split(1, 8)  # [w, ro(2), r(8), co(2), cq(4), cp(2)]
        t.reorder({1: 4, 2: 1, 3: 3, 4: 2})  # [w, r, cq, co, ro, cp]
        t.merge(1, 2).merge(2, 3).merge(2, 3)  # [w, 32, 8]
        t.merge(0, 1)  # [64, 8]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def stmatrix_x4():
    """stmatrix.x4 of a 16x16 fp16 register tile into a row-major shared tile: T1 (registers)
    and T2 (the stmatrix consumer) share the fragment loop domain; T2's allocation domain is its
    logical domain (row-major), set apart from its loop domain."""
    with tp.Fusion("stmatrix") as fusion:
        t0 = tp.make_contig_concrete_tensor([16, 16], dtype=F16)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.StMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t2.set_memory_type(tp.MemoryType.Shared)
    t2.set_allocation_domain(t2.get_logical_domain(), True)
    fragment_x4(t1, t2)
    t2.axis(1).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    return fusion


# -- 32-bit elements (ldmatrix only) ---------------------------------------------------------------


def fragment_x4_b32(*tensors):
    """[16, 8] float32 -> [(row % 8, column % 4)(32) TIDx, (column / 4, row / 8)(4)]: the 32-bit .x4
    fragment, lane 4g + q element v = (g + 8 (v % 2), q + 4 (v / 2)), matrix v the 8x4 block at
    rows 8 (v % 2), columns 4 (v / 2): the A fragment of mma.sync m16n8k8 tf32."""
    for t in tensors:
        t.split(1, 4).split(0, 8)  # [ro(2), r(8), co(2), cq(4)]
        t.reorder({0: 3, 1: 0, 2: 2, 3: 1})  # [r, cq, co, ro]
        t.merge(0, 1).merge(1, 2)  # [32, (co * ro)(4)]
        t.axis(0).parallelize(P.TIDx)


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",),
                                allocations={"T1": {"bytes": 512}, "T2": {"bytes": 16}}))
def ldmatrix_x4_float32():
    """A 16x8 float32 tile (the A operand of mma.sync m16n8k8 tf32) T0 (gmem) -> T1 (smem, row-major)
    -ldmatrix.x4, 32-bit elements-> T2 (registers) -> T3 (gmem): CuTe's
    make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, float>, SM80_16x8x8_F32TF32TF32F32_TN). Each lane holds
    4 floats, one per matrix: lane 4g + q element v = T1[g + 8 (v % 2), q + 4 (v / 2)]; lane 8m + r
    supplies row r of matrix m, 16 bytes at byte 32 (r + 8 (m % 2)) + 16 (m / 2)."""
    fusion, t1, t2, t3 = smem_to_registers([16, 8], dtype=F32)
    fragment_x4_b32(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def ldmatrix_x2_float32():
    """An 8x8 float32 tile as two 8x4 matrices side by side (.x2): register v holds row t/4, column
    4v + t%4: the B operand of mma.sync m16n8k8 tf32 stored [n, k] (element (k, n) = (q + 4v, g))."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8], dtype=F32)
    for t in (t2, t3):
        t.split(1, 4)  # [r(8), co(2), cq(4)]
        t.reorder({1: 2, 2: 1})  # [r, cq, co]
        t.merge(0, 1)  # [32, 2]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted())
def ldmatrix_x1_float32():
    """One 8x4 float32 matrix (.x1): one element per lane, lane t holds row t/4, column t%4 and lane
    r (r < 8) supplies row r at byte 16r. The LDSM rules accept it without a Vectorize axis too;
    the code generator issues an ldmatrix from a Vectorize axis (LOWERING-SUPPORTED), here of extent 1."""
    fusion, t1, t2, t3 = smem_to_registers([8, 4], dtype=F32)
    for t in (t2, t3):
        t.split(1, 1).merge(0, 1)  # [32, 1]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def ldmatrix_x4_float32_warps_swizzled():
    """Four warps (TIDx{128}) each load a 16x8 float32 tile (.x4) of a [32, 16] shared tile whose
    16-byte chunks (4 floats) are XOR-swizzled by row % 4: rows stay whole chunks, so they stay
    ldmatrix rows. Warp w = (row / 16, column / 8)."""
    fusion, t1, t2, t3 = smem_to_registers([32, 16], dtype=F32)
    t1.split(1, 4).split(0, 4)  # [row / 4 (8), row % 4 (4), chunk (4), 4]
    t1.swizzle(tp.SwizzleType.XOR, 1, 2)  # chunk ^= row % 4
    for t in (t2, t3):
        t.split(0, 16).split(2, 8)  # [wr(2), 16, wc(2), 8]
        t.reorder({1: 2, 2: 1})  # [wr, wc, 16, 8]
        t.merge(0, 1)  # [w(4), 16, 8]
        t.split(2, 4).split(1, 8)  # [w, ro(2), r(8), co(2), cq(4)]
        t.reorder({1: 4, 2: 1, 3: 3, 4: 2})  # [w, r, cq, co, ro]
        t.merge(1, 2).merge(2, 3)  # [w, 32, 4]
        t.merge(0, 1)  # [128, 4]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion
