"""Broken ldmatrix / stmatrix schedules (seed 003), each rejected with the rule codes it declares.

Unless stated, each is the .x1 case of valid/ldst_matrix.py, T0 (gmem) -> T1 (smem) -ldmatrix->
T2 (registers) -> T3 (gmem), on an 8x8 fp16 tile, with one thing broken. The lane order of the
issuing loop domain is the register layout: a lane order that is not the m8n8 fragment always
breaks LDSM-REGISTER-LAYOUT, and on a row-major tile also the rows the lanes supply.
"""

import tileproof as tp

P = tp.ParallelType
LS = tp.LoadStoreOpType
F16 = tp.float16


def smem_to_registers(shape, dtype=F16):
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
    """[8, 8] -> [(row * column pair)(32) TIDx, column % 2]: the m8n8 fragment."""
    for t in tensors:
        t.split(1, 2).merge(0, 1)
        t.axis(0).parallelize(P.TIDx)


@tp.schedule(expect=tp.rejected("LDSM-THREAD-ROWS", "LDSM-ALIGNMENT", "LDSM-REGISTER-LAYOUT",
                                warnings=("GLOBAL-COALESCING",)))
def ldmatrix_rows_scrambled():
    """Wrong lane order: TIDx = merge(column pair, row), so lane t holds row t % 8 and lanes
    4r .. 4r+3 hold four different rows. On the row-major tile the row that lane 1 supplies
    (lane 4's column 0: row 4) is not what lanes 4..7 hold (THREAD-ROWS), the row lane 2 supplies
    (lane 8's: row 0, column 2) starts at byte 4 (ALIGNMENT), and the registers are not the m8n8
    fragment (REGISTER-LAYOUT)."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8])
    for t in (t2, t3):
        t.split(1, 2).merge(1, 0)
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-THREAD-ROWS", warnings=("GLOBAL-COALESCING",)))
def ldmatrix_rows_interleaved():
    """The registers are the m8n8 fragment, but the shared tile stores each row's even columns
    before its odd ones (allocation [row, column % 2, column / 2]): a row's 16 bytes do not hold
    its columns in order, so lane 0 receives column 4 where it expects column 1."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8])
    t1.split(1, 2)
    t1.set_allocation_domain([t1.axis(0), t1.axis(2), t1.axis(1)])
    fragment_x1(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-REGISTER-LAYOUT", warnings=("GLOBAL-COALESCING",)))
def ldmatrix_rows_permuted():
    """Lanes 4r .. 4r+3 hold one row, but the rows come in the order 0, 2, 4, 6, 1, 3, 5, 7
    (TIDx = merge(row % 2, row / 2, column pair)). The hardware moves the bytes correctly (each
    quad supplies and receives its own row), but the registers are not the m8n8 fragment: lane 4
    holds row 2 where the fragment has row 1."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8])
    for t in (t2, t3):
        t.split(1, 2).split(0, 2)  # [row / 2 (4), row % 2 (2), column pair (4), column % 2 (2)]
        t.merge(1, 0).merge(0, 1)  # [(row % 2, row / 2, column pair)(32), 2]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-REGISTER-LAYOUT", warnings=("GLOBAL-COALESCING",)))
def ldmatrix_columns_swapped():
    """Lane t holds row t % 8, columns 2(t / 8) + {0, 1} (the row and column-pair roles swapped in
    TIDx), and the shared tile is stored [column pair, row, column % 2] so that lanes 4r .. 4r+3
    still find 16 contiguous, aligned bytes: ldmatrix moves the bytes, but the registers hold the
    tile in the wrong places (lane 1 holds (1, 0) where the fragment has (0, 2))."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8])
    t1.split(1, 2)
    t1.set_allocation_domain([t1.axis(1), t1.axis(0), t1.axis(2)])
    for t in (t2, t3):
        t.split(1, 2).merge(1, 0)
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-ALIGNMENT", warnings=("GLOBAL-COALESCING",)))
def ldmatrix_misaligned_rows():
    """The shared tile's rows are padded to 9 elements (its column axis split by 3: 3 x 3), so row r
    starts at element 9r: rows are still 16 contiguous bytes, but row 1 starts at byte 18."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8])
    t1.split(1, 3)
    fragment_x1(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-ALIGNMENT", warnings=("GLOBAL-COALESCING",)))
def stmatrix_misaligned_rows():
    """stmatrix.x4 of a 16x16 fp16 tile into a shared tile whose allocation pads rows to 18
    elements (the column axis outer-split into 3 x 6): row 1 of matrix 0 starts at byte 36."""
    with tp.Fusion("stmatrix") as fusion:
        t0 = tp.make_contig_concrete_tensor([16, 16], dtype=F16)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.StMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t2.set_memory_type(tp.MemoryType.Shared)
    logical = t2.get_loop_domain()
    t2.split(1, 3, inner_split=False)  # [16, 3, 6]: 18 elements per row
    t2.set_allocation_domain(t2.get_loop_domain(), True)
    t2.set_loop_domain(logical)
    for t in (t1, t2):
        t.split(1, 8).split(2, 2).split(0, 8)  # [ro, r, co, cq, cp]
        t.reorder({0: 3, 1: 0, 2: 2, 3: 1})  # [r, cq, co, ro, cp]
        t.merge(0, 1).merge(1, 2).merge(1, 2)
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-THREAD-ROWS", warnings=("GLOBAL-COALESCING",)))
def ldmatrix_float64():
    """A float64 tile: ldmatrix moves 16-bit elements (.b16), or 32-bit ones as pairs of them; not 8-byte ones."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8], dtype=tp.float64)
    fragment_x1(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-THREAD-ROWS", warnings=("GLOBAL-COALESCING",)))
def stmatrix_float32():
    """stmatrix.x4 of a 16x16 float32 register tile: tileproof models 32-bit elements for ldmatrix
    only (CuTe's LDSM_U32x{1,2,4}_N); stmatrix stays 16-bit, refused by the instruction shape."""
    with tp.Fusion("stmatrix") as fusion:
        t0 = tp.make_contig_concrete_tensor([16, 16], dtype=tp.float32)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.StMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t2.set_memory_type(tp.MemoryType.Shared)
    t2.set_allocation_domain(t2.get_logical_domain(), True)
    for t in (t1, t2):
        t.split(1, 8).split(2, 2).split(0, 8)  # [ro, r, co, cq, cp]
        t.reorder({0: 3, 1: 0, 2: 2, 3: 1})  # [r, cq, co, ro, cp]
        t.merge(0, 1).merge(1, 2).merge(1, 2)
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    return fusion


# -- 32-bit elements: a matrix is 8 rows x 4 float32, lane t holds row t/4, column t%4 of each ----


@tp.schedule(expect=tp.rejected("LDSM-THREAD-ROWS", "LDSM-ALIGNMENT", "LDSM-REGISTER-LAYOUT",
                                warnings=("GLOBAL-COALESCING",)))
def ldmatrix_float32_pairs():
    """An 8x8 float32 tile scheduled as the 16-bit fragment (lane t holds columns 2(t%4) + {0, 1} of
    row t/4): with 32-bit elements the two elements are two matrices (.x2), each lane's register v
    holds column t%4 of matrix v, so lane 1 element 0 receives column 1 where the schedule keeps
    column 2 (THREAD-ROWS, REGISTER-LAYOUT), and lane 8 supplies matrix 1's row 0 at byte 4
    (lane 0's element 1, column 1: ALIGNMENT)."""
    fusion, t1, t2, t3 = smem_to_registers([8, 8], dtype=tp.float32)
    fragment_x1(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-REGISTER-LAYOUT", warnings=("GLOBAL-COALESCING",)))
def ldmatrix_float32_columns_swapped():
    """ldmatrix.x4 of a 16x8 float32 tile (32-bit elements, as valid/ldst_matrix.py's ldmatrix_x4_float32)
    with the lane roles swapped: TIDx = merge(column % 4, row % 8), so lane t holds row t % 8, column
    t / 8 of each 8x4 block, and the shared tile stores each block column-major ([row / 8, column / 4,
    column % 4, row % 8]) so that lanes 4r .. 4r+3 still find 16 contiguous, aligned bytes: ldmatrix
    moves the bytes, but register v of lane 1 holds T2[1, 0] (+ the block of v) where the hardware puts
    row 0, column 1 (T2[0, 1]): the wrong element for an mma.sync tf32 A operand."""
    fusion, t1, t2, t3 = smem_to_registers([16, 8], dtype=tp.float32)
    t1.split(1, 4).split(0, 8)  # [ro(2), r(8), co(2), cq(4)]
    t1.set_allocation_domain([t1.axis(0), t1.axis(2), t1.axis(3), t1.axis(1)])  # [ro, co, cq, r]
    for t in (t2, t3):
        t.split(1, 4).split(0, 8)  # [ro, r, co, cq]
        t.reorder({0: 3, 1: 1, 2: 2, 3: 0})  # [cq, r, co, ro]
        t.merge(0, 1).merge(1, 2)  # [(cq * r)(32), (co * ro)(4)]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-THREAD-ROWS", warnings=("GLOBAL-COALESCING",)))
def ldmatrix_six_elements():
    """Six fp16 elements per thread (a [16, 12] tile, columns split by 6): .x1/.x2/.x4 move 2, 4 or 8."""
    fusion, t1, t2, t3 = smem_to_registers([16, 12])
    for t in (t2, t3):
        t.split(1, 6).merge(0, 1)  # [(16 * 2)(32), 6]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-THREAD-ROWS", warnings=("GLOBAL-COALESCING",)))
def ldmatrix_partial_warp():
    """A [4, 8] tile: TIDx{16}, so lanes 16..31 of the warp do not execute the .sync.aligned ldmatrix."""
    fusion, t1, t2, t3 = smem_to_registers([4, 8])
    fragment_x1(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-GLOBAL-STRIDE"))
def ldst_matrix_set_any_size():
    """The seed's LdStMatrixSet schedule (valid/ldst_matrix.py) with M and K symbolic and nothing
    assumed: a row of K = 1 bf16 is 2 bytes, not a multiple of the 16-byte TMA global stride
    (TMA-GLOBAL-STRIDE). Its partial tiles are no problem: at M = 1 the CTA tile split by 128 has
    holes inside the warps, but there the warp-collective ldmatrix and stmatrix run whole, on the
    zeros the TMA load writes past M (nvFuser issue #3963 was wrong results from lanes skipping
    them); valid/ldst_matrix.py's "any" case assumes K % 8 == 0 and is accepted. The seed only
    runs 8192 x 8192."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "valid" / "ldst_matrix.py"
    spec = importlib.util.spec_from_file_location("_ldst_matrix_valid", path)
    valid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(valid)
    return valid.ld_st_matrix_set(["M", "K"])
