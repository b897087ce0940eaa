"""nvFuser tests/cpp/test_mma.cpp, translated (tests/support/nvfuser.py says how): single MMA
instruction tiles on mma.sync (Turing / Ampere macros, operands read from global memory into
their register fragments), on wgmma (Hopper: A in registers (RS) or both operands in shared
memory (SS), every layout and operand swizzle) and on tcgen05 (Blackwell, sm_100a).

tileproof spells nvFuser's MMA scheduling helpers as follows: applyMmaSwizzle(MmaOperand) is
tp.schedule_mma_fragment(tv, macro, operand); scheduleMmaOutputAllocation on the MmaOp's output
is tp.mma_output_allocation(tv) with the M, N, K tile bound to Mma, and on a copy of the output
tv.set_loop_domain(tp.mma_output_allocation(tv)) as in C++; applyMmaSwizzle(MmaInputSmemSwizzle) on a shared
operand has no tileproof name and is written out below (mma_smem_swizzle) as nvFuser's
MmaSwizzler::scheduleOperandRead writes it. Imports tileproof and the scaffolding only.
"""

import pytest

import tileproof as tp
from support.nvfuser import VALID, Case, check, params

P = tp.ParallelType
SW = tp.MmaInputSmemSwizzle
DTYPES = {"half": tp.float16, "bfloat16": tp.bfloat16}

# matmulAtInputShape3DSS: the operands of each layout, as [A, B] shapes of (M, N, K)
SHAPES = {"TT": lambda m, n, k: ([m, k, 1], [1, k, n]), "TN": lambda m, n, k: ([m, 1, k], [1, n, k]),
          "NT": lambda m, n, k: ([k, m, 1], [k, 1, n]), "NN": lambda m, n, k: ([1, k, m], [n, k, 1])}
REDUCED = {"NT": 0, "TT": 1, "NN": 1, "TN": 2}  # K's position
TO_MNK = {"TT": {-2: -1}, "TN": {}, "NT": {-3: -1}, "NN": {-1: -3}}  # the accumulator reordered to [M, N, K]

def move_inner_broadcast_left(tv, n=3):
    """matmul_utils::moveInnerBroadcastLeft: the broadcast axes among the n innermost first."""
    pos = [i - n for i in range(n)]
    order = [p for p in pos if tv.axis(p).is_broadcast] + [p for p in pos if not tv.axis(p).is_broadcast]
    tv.reorder({old: new - n for new, old in enumerate(order)})


def mma_smem_swizzle(tv, swizzle):
    """TensorView::applyMmaSwizzle(MmaInputSmemSwizzle) (MmaSwizzler::scheduleOperandRead): the
    tile [.., rows, cols] as 8 x 8 core matrices, swizzled by `swizzle` (a span wider than the
    tile's columns pads them), allocated so."""
    tv.split(-2, 8).split(-1, 8)  # [Ko, K8, Mo, M8]
    if swizzle.value == 0:
        tv.reorder({-2: -3})  # [Ko, Mo, K8, M8]
    else:
        size = swizzle.swizzle_bytes // 16
        tv.split(-2, size)  # [Ko, K8, Moo, Mo2, M8]
        tv.split(-4, 8 // size)  # [Ko, K2, K4, Moo, Mo2, M8]
        tv.swizzle(tp.SwizzleType.XOR, -5, -2)
        tv.reorder({-3: -5})  # [Ko, Moo, K2, K4, Mo2, M8]
    tv.set_allocation_domain(tv.get_loop_domain(), True)


def schedule_tma_load_for_mma(tv, swizzle):
    """TensorView::applyMmaSwizzleForTMALoad (MmaSwizzler::scheduleTMALoadForMma): the TMA boxes
    (tileproof's apply_mma_swizzle_for_tma_load), their axes Bulk (parallelizeAsBulkSkippingFirstIDs:
    not the loops of boxes), allocated as the loop."""
    box = 2 if swizzle.value == 0 else 5  # a core matrix [8, 16 bytes]; a swizzled box [rows / 8, .., 16 bytes]
    tv.apply_mma_swizzle_for_tma_load(swizzle)
    for i in tv.get_loop_domain()[-box:]:
        i.parallelize(P.Bulk)
    tv.set_allocation_domain(tv.get_loop_domain(), True)


def naively_parallelize(tv):
    """test_mma.cpp's naivelyParallelize: every axis merged, split by 128 threads."""
    while tv.ndim > 1:
        tv.merge(0)
    tv.split(0, 128)
    tv.axis(1).parallelize(P.TIDx)


def accumulate_as_fragments(acc, out):
    """The MmaOp's register output allocated as its C fragments, its tile bound to Mma, and the
    output copy's loop as the C fragment (scheduleMmaOutputAllocation on both)."""
    acc.set_allocation_domain(tp.mma_output_allocation(acc), True)
    for i in (-3, -2, -1):
        acc.axis(i).parallelize(P.Mma)
    out.set_loop_domain(tp.mma_output_allocation(out))


# -- MmaTest: mma.sync, operands global -> registers ------------------------------------------

def mma_single_tile(macro, dtype, strided=False, propagate_backwards=False):
    """MmaTest.SingleTile (A [M, 1, K], B [1, N, K]) and SingleTileWithStridedInput (A [M, K, 1],
    B [1, K, N] stored K-innermost, reduced over axis 1): scheduleCompileAndRun."""
    m, n, k = macro.m, macro.n, macro.k
    with tp.Fusion("mma_single_tile") as fusion:
        tva = tp.make_tensor([m, k, 1] if strided else [m, 1, k], dtype=dtype)
        tvb = tp.make_tensor([1, k, n] if strided else [1, n, k], dtype=dtype)
        if strided:
            tvb.set_allocation_domain([tvb.axis(0), tvb.axis(2), tvb.axis(1)], True)
        fusion.add_input(tva)
        fusion.add_input(tvb)
        tv0 = tp.set(tva)  # global -> registers
        tv1 = tp.set(tvb)
        tv2 = tp.fused_multiply_sum(tv0, tv1, [1 if strided else 2])
        fusion.add_output(tv2)
    tv2.definition.set_macro(macro)
    if strided:  # B's allocation permutation [0, 2, 1] applied to the output, then to B
        tv2.reorder({1: 2})
        if propagate_backwards:
            tp.propagate_transforms(tv2)
        else:
            tv1.reorder({1: 2})
    tv2c = tv2.cache_before()
    move_inner_broadcast_left(tv0)
    tp.schedule_mma_fragment(tv0, macro, tp.MmaOperand.A)
    tp.schedule_mma_fragment(tv1, macro, tp.MmaOperand.B)
    accumulate_as_fragments(tv2c, tv2)
    return fusion


def run_single_tile(macro, dtype, strided=False):
    """scheduleCompileAndRun's check at the C++ size: the output is A x B over K (torch, float32),
    for three random draws of the operands (B stored [1, N, K] where strided)."""
    m, n, k = macro.m, macro.n, macro.k

    def run(kernel, torch):
        dt = getattr(torch, dtype)
        for seed in range(3):
            torch.manual_seed(seed)
            a = torch.randn([m, k, 1] if strided else [m, 1, k], device="cuda", dtype=dt)
            b = torch.randn(1, n, k, device="cuda", dtype=dt)
            if strided:
                b = b.transpose(1, 2)  # [1, K, N], K innermost in memory
            (out,) = kernel.run(a, b)
            want = (a.float() * b.float()).sum(1 if strided else 2)
            torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    return run


MMA_TEST_PARAMS = [("Turing_16_8_8", "half"), ("Turing_16_8_16", "half"), ("Turing_16_16_16", "half"),
                   ("Ampere_16_8_16", "half"), ("Ampere_16_8_16", "bfloat16"), ("Ampere_16_16_16", "half"),
                   ("Ampere_16_16_16", "bfloat16")]


# -- HopperRS: wgmma with A in registers ------------------------------------------------------

def hopper_rs_single_tile(macro, dtype, layout, swizzle_b):
    """HopperRS.SingleTile: A global -> registers (its fragment), B global -> shared (swizzled)."""
    m, n, k = macro.m, macro.n, macro.k
    s0, s1 = SHAPES[layout](m, n, k)
    with tp.Fusion("hopper_rs") as fusion:
        a = tp.make_tensor(s0, dtype=dtype)
        b = tp.make_tensor(s1, dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        tv0 = tp.set(a)
        tv1 = tp.set(b)
        tv1.set_memory_type(tp.MemoryType.Shared)
        tv2 = tp.fused_multiply_sum(tv0, tv1, [REDUCED[layout]])
        fusion.add_output(tv2)
    tv2.definition.set_macro(macro)
    tv2c = tv2.cache_before()
    move_inner_broadcast_left(tv0)
    tp.schedule_mma_fragment(tv0, macro, tp.MmaOperand.A)
    mma_smem_swizzle(tv1, swizzle_b)
    naively_parallelize(tv1)
    if layout == "TT":
        tv2c.reorder({-1: -2})  # [M, K, N] -> [M, N, K]
    accumulate_as_fragments(tv2c, tv2)
    return fusion


def hopper_rs_stmatrix(macro, dtype, tile_m, tile_n):
    """HopperRSStmatrix.SingleTileWithTMALoadStoreStMatrix (TN, B unswizzled): A in registers,
    B loaded by TMA, D cast in registers, stored by stmatrix (tile_m x tile_n tiles) into shared
    memory and by a TMA store to the output."""
    m, n, k = macro.m, macro.n, macro.k
    with tp.Fusion("hopper_rs_stmatrix") as fusion:
        a = tp.make_contig_concrete_tensor([m, 1, k], dtype=dtype)
        b = tp.make_contig_concrete_tensor([1, n, k], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        tv0 = tp.set(a)
        tv1 = tp.set(b, op=tp.LoadStoreOpType.TMA)
        tv1.set_memory_type(tp.MemoryType.Shared)
        tv2 = tp.fused_multiply_sum(tv0, tv1, [2])
        tv3 = tp.cast(tv2, dtype)
        tv4 = tp.set(tv3, op=tp.LoadStoreOpType.TMA)
        tv3.set_memory_type(tp.MemoryType.Shared)
        fusion.add_output(tv4)
    tv2.definition.set_macro(macro)
    tv3c = tv3.cache_before(tp.LoadStoreOpType.StMatrix)  # tv3c = cast (registers), tv3 = stmatrix(tv3c)
    move_inner_broadcast_left(tv0)
    tp.schedule_mma_fragment(tv0, macro, tp.MmaOperand.A)
    move_inner_broadcast_left(tv1)
    schedule_tma_load_for_mma(tv1, SW["None"])
    tv2.set_allocation_domain(tp.mma_output_allocation(tv2), True)
    for i in (-3, -2, -1):
        tv2.axis(i).parallelize(P.Mma)
    for t in (tv3c, tv3):
        t.set_loop_domain(tp.mma_output_allocation(t))
        t.split(-1, tile_m * tile_n // 32)  # one stmatrix tile's elements a lane
    tv3c.set_allocation_domain(tv3c.get_loop_domain(), True)
    # no allocation in the C++: nvFuser's unswizzled stmatrix index (hardCodedSharedMemoryIndexForLdStMatrix) and the
    # TMA store read it row-major [M, N]
    tv3.set_allocation_domain(tv3.get_logical_domain(), True)
    tv3.axis(-1).parallelize(P.Vectorize)
    for i in tv4.get_loop_domain():
        i.parallelize(P.Bulk)
    return fusion


def run_rs_stmatrix(macro):
    """The C++ check at its size: the half output is A x B over K (torch, float32, rounded to
    half), for three random draws of the TN operands."""
    m, n, k = macro.m, macro.n, macro.k

    def run(kernel, torch):
        for seed in range(3):
            torch.manual_seed(seed)
            a, b = (torch.randn(s, device="cuda", dtype=torch.float16) for s in SHAPES["TN"](m, n, k))
            (out,) = kernel.run(a, b)
            want = (a.float() * b.float()).sum(2).half()
            torch.testing.assert_close(out, want, rtol=1e-2, atol=1e-2)
    return run


# -- HopperSS / Blackwell: both operands in shared memory -------------------------------------

def ss_tile(macro, dtype, layout, swizzle_a, swizzle_b, tiles=1, transposed=False, blackwell=False):
    """HopperSS.SingleTile (tiles=1), .SingleTileTransposed (the core matrices' first two
    allocation axes swapped), .MultipleTile (tiles=2: a 2 x 2 x 2 grid of instruction tiles in one
    swizzled block tile, inlined) and Blackwell1CTAM128SS.SingleTile (blackwell: D in tensor
    memory, read by tcgen05.ld). Both operands global -> shared by a plain set."""
    m, n, k = macro.m * tiles, macro.n * tiles, macro.k * tiles
    s0, s1 = SHAPES[layout](m, n, k)
    with tp.Fusion("hopper_ss") as fusion:
        a = tp.make_tensor(s0, dtype=dtype)
        b = tp.make_tensor(s1, dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        tv0 = tp.set(a)
        tv0.set_memory_type(tp.MemoryType.Shared)
        tv1 = tp.set(b)
        tv1.set_memory_type(tp.MemoryType.Shared)
        tv2 = tp.fused_multiply_sum(tv0, tv1, [REDUCED[layout]])
        tv2.reorder(TO_MNK[layout])
        tv2.commit_leaf_to_logical()  # NN's output [N, M] becomes [M, N] (elsewhere only rK's position changes)
        if blackwell:
            tv3 = tp.set(tv2)  # tensor memory -> registers
            tv4 = tp.set(tv3)  # registers -> global
            fusion.add_output(tv4)
        else:
            fusion.add_output(tv2)
    tv2.definition.set_macro(macro)
    move_inner_broadcast_left(tv0)
    move_inner_broadcast_left(tv1)
    mma_smem_swizzle(tv0, swizzle_a)
    mma_smem_swizzle(tv1, swizzle_b)
    if transposed:
        for t in (tv0, tv1):
            alloc = t.get_allocation_domain()
            alloc[0], alloc[1] = alloc[1], alloc[0]
            t.set_allocation_domain(alloc, True)
    naively_parallelize(tv0)
    naively_parallelize(tv1)
    if blackwell:
        for i in range(3):
            tv2.axis(i).parallelize(P.Mma)
        tv2.set_memory_type(tp.MemoryType.Tensor)
        tv2.set_tmem_dim_sep_pos(1)
        tv3.set_memory_type(tp.MemoryType.Local)
        tv3.definition.op_type = tp.LoadStoreOpType.TMemLoad
        for t in (tv3, tv4):
            t.axis(0).parallelize(P.TIDx)
        return fusion
    tv2c = tv2.cache_before()
    if tiles > 1:
        tv2c.split(-3, macro.m).split(-2, macro.n).split(-1, macro.k)
        tv2c.reorder({-5: -3, -3: -2})  # [Mo, Mi, No, Ni, Ko, Ki] -> [Mo, No, Ko, Mi, Ni, Ki]
        tv2.split(-2, macro.m).split(-1, macro.n)
        tv2.reorder({-3: -2})  # [Mo, Mi, No, Ni] -> [Mo, No, Mi, Ni]
    accumulate_as_fragments(tv2c, tv2)
    if tiles > 1:
        tp.inline_most(fusion)
    return fusion


def run_ss(macro, dtype, layout, tiles=1):
    """The C++ check at its size (the macro tile, times `tiles`): the output is A x B over K
    (torch, float32), for three random draws of the operands in `layout`."""
    m, n, k = macro.m * tiles, macro.n * tiles, macro.k * tiles

    def run(kernel, torch):
        dt = getattr(torch, dtype)
        for seed in range(3):
            torch.manual_seed(seed)
            a, b = (torch.randn(s, device="cuda", dtype=dt) for s in SHAPES[layout](m, n, k))
            (out,) = kernel.run(a, b)
            want = (a.float() * b.float()).sum(REDUCED[layout])
            if layout == "NN":  # [N, M]; commit_leaf_to_logical made the output [M, N]
                want = want.t()
            torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-3)
    return run


def ss_case(suite, tiles=1, transposed=False, gap=None):
    def make(macro, layout, sa, sb, dtype):
        name = f"{suite}/{macro}_{layout}_{sa}_{sb}_{dtype}"
        return Case(name, lambda: ss_tile(getattr(tp.MmaMacro, macro), DTYPES[dtype], layout, SW[sa], SW[sb],
                                          tiles, transposed), VALID, gap=gap,
                    run=run_ss(getattr(tp.MmaMacro, macro), "float16" if dtype == "half" else dtype, layout, tiles))
    return make


SINGLE = ss_case("HopperSS.SingleTile")
TRANSPOSED = ss_case("HopperSS.SingleTileTransposed", transposed=True)
MULTIPLE = ss_case("HopperSS.MultipleTile", tiles=2)

CASES = [
    *(Case(f"MmaTest.SingleTile/{mac}_{dt}", lambda mac=mac, dt=dt: mma_single_tile(getattr(tp.MmaMacro, mac),
                                                                                     DTYPES[dt]),
           VALID, run=run_single_tile(getattr(tp.MmaMacro, mac), "float16" if dt == "half" else dt))
      for mac, dt in MMA_TEST_PARAMS),
    Case("MmaTest.SingleTileWithStridedInput/Ampere_16_16_16_half",
         lambda: mma_single_tile(tp.MmaMacro.Ampere_16_16_16, tp.float16, strided=True), VALID,
         run=run_single_tile(tp.MmaMacro.Ampere_16_16_16, "float16", strided=True)),
    Case("MmaTest.SingleTileWithStridedInput/Turing_16_8_16_half",
         lambda: mma_single_tile(tp.MmaMacro.Turing_16_8_16, tp.float16, strided=True), VALID,
         run=run_single_tile(tp.MmaMacro.Turing_16_8_16, "float16", strided=True)),
    Case("MmaTest.SingleTileWithStridedInput/Ampere_16_8_16_bfloat16/propagate_backwards",
         lambda: mma_single_tile(tp.MmaMacro.Ampere_16_8_16, tp.bfloat16, strided=True, propagate_backwards=True),
         VALID,
         run=run_single_tile(tp.MmaMacro.Ampere_16_8_16, "bfloat16", strided=True)),
    Case("HopperRS.SingleTile/Hopper_64_64_16_TN_128B_half",
         lambda: hopper_rs_single_tile(tp.MmaMacro.Hopper_64_64_16, tp.float16, "TN", SW.B128), VALID,
         run=run_ss(tp.MmaMacro.Hopper_64_64_16, "float16", "TN")),
    Case("HopperRS.SingleTile/Hopper_64_8_16_TT_None_bfloat16",
         lambda: hopper_rs_single_tile(tp.MmaMacro.Hopper_64_8_16, tp.bfloat16, "TT", SW["None"]), VALID,
         run=run_ss(tp.MmaMacro.Hopper_64_8_16, "bfloat16", "TT")),
    Case("HopperRSStmatrix.SingleTileWithTMALoadStoreStMatrix/Hopper_64_64_16_TN_None_half_16x16",
         lambda: hopper_rs_stmatrix(tp.MmaMacro.Hopper_64_64_16, tp.float16, 16, 16), VALID,
         run=run_rs_stmatrix(tp.MmaMacro.Hopper_64_64_16)),
    Case("HopperRSStmatrix.SingleTileWithTMALoadStoreStMatrix/Hopper_64_256_16_TN_None_half_16x8",
         lambda: hopper_rs_stmatrix(tp.MmaMacro.Hopper_64_256_16, tp.float16, 16, 8), VALID,
         run=run_rs_stmatrix(tp.MmaMacro.Hopper_64_256_16)),
    SINGLE("Hopper_64_64_16", "TN", "B128", "B128", "half"),
    SINGLE("Hopper_64_256_16", "TN", "B32", "B32", "half"),
    SINGLE("Hopper_64_8_16", "TT", "None", "None", "bfloat16"),  # B N-major in 8 x 16-byte core matrices
    SINGLE("Hopper_64_128_16", "NT", "B64", "B128", "half"),
    SINGLE("Hopper_64_24_16", "TT", "B128", "B64", "bfloat16"),
    Case("HopperSS.SingleTile/Hopper_64_16_16_NN_B32_B64_bfloat16",
         lambda: ss_tile(tp.MmaMacro.Hopper_64_16_16, tp.bfloat16, "NN", SW.B32, SW.B64), VALID,
         run=run_ss(tp.MmaMacro.Hopper_64_16_16, "bfloat16", "NN")),
    TRANSPOSED("Hopper_64_64_16", "TN", "B128", "B128", "half"),
    TRANSPOSED("Hopper_64_32_16", "NT", "B64", "B64", "half"),
    MULTIPLE("Hopper_64_64_16", "TN", "B128", "B128", "half"),
    MULTIPLE("Hopper_64_128_16", "NT", "B64", "B128", "bfloat16"),
    MULTIPLE("Hopper_64_8_16", "TT", "None", "None", "half"),
    MULTIPLE("Hopper_64_64_16", "TN", "B32", "B32", "half"),
    *(Case(f"Blackwell1CTAM128SS.SingleTile/{mac}_TN_{sa}_{sb}_half",
           lambda mac=mac, sa=sa, sb=sb: ss_tile(getattr(tp.MmaMacro, mac), tp.float16, "TN", SW[sa], SW[sb],
                                                  blackwell=True),
           VALID, target="sm_100a")
      for mac, sa, sb in (("Blackwell1CTA_128_64_16", "B128", "B128"), ("Blackwell1CTA_128_256_16", "B64", "B32"))),
]


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
