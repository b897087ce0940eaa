"""nvFuser tests/cpp/tutorial_ldmatrix_stmatrix.cpp (doc/dev/ldmatrix_stmatrix.md), translated
(tests/support/nvfuser.py says how).

HopperLdStMatrixTutorial.SetShmoo copies a bf16 [M, K] tensor gmem -TMA-> smem -ldmatrix.x4->
registers -stmatrix.x4-> smem -TMA-> gmem, parameterised by the TMA swizzle and the CTA tile
(64 or 128 rows by 256 or 512 columns); a few of its 12 instances are cases. The C++'s helpers
(scheduleLdStMatrixBase / Registers, mma_utils' scheduleTMALoadForMma and
scheduleTMAStoreForMmaOutput) are written out below; TensorView::swizzleTMABox is tileproof's
apply_mma_swizzle_for_tma_load. nvFuser's AbstractTensor is replaced by scheduling the loop domain
and restoring it with set_loop_domain. setAlternateLoopDomain (the shared-memory side's loop
domain, for nvFuser's indexer) is not written: tileproof derives the rows each lane addresses
from the fragment layout and the shared tensor's allocation domain.
"""

import pytest

import tileproof as tp
from support.nvfuser import VALID, Case, check, params

P = tp.ParallelType
LS = tp.LoadStoreOpType
SWIZZLE = {32: tp.MmaInputSmemSwizzle.B32, 64: tp.MmaInputSmemSwizzle.B64, 128: tp.MmaInputSmemSwizzle.B128}


def schedule_ld_st_matrix_registers(tv, swizzle_bytes):
    """scheduleLdStMatrixBase + scheduleLdStMatrixRegisters on tv's loop domain [.., m(64), n(256)]
    -> [.., (no * nio), (mo * mii * niiio)(128), (niio * mio * niiii)(8)]: four x4 matrices of
    16 x 16 side by side, each thread's 8 elements in the wgmma accumulator order."""
    tv.split(-1, swizzle_bytes // tv.dtype.bytes).reorder({-2: -3, -3: -2})  # [.., no, m(64), ni(box)]
    tv.split(-2, 16).split(-1, 16).reorder({-2: -3, -3: -2})  # [.., no, mo(4), nio, mi(16), nii(16)]
    tv.split(-2, 8).split(-1, 8)
    tv.split(-1, 2)
    tv.reorder({-5: -2, -4: -5, -2: -4})  # [.., no, mo, nio, mii(8), niiio(4), niio(2), mio(2), niiii(2)]
    tv.merge(-2, -1).merge(-2, -1)
    tv.reorder({-5: -4, -4: -5})  # [.., no, nio, mo, mii, niiio, 8]
    tv.merge(-4, -3).merge(-3, -2)
    tv.merge(-4, -3)


def _tma_box_for_mma(tv, swizzle_bytes):
    """[.., m, n] -> [.., no, m, ni (one swizzle span)] -> swizzleTMABox; returns the IDs to skip before Bulk."""
    skip = len(tv.get_loop_domain()) - 2 + 1
    tv.split(-1, swizzle_bytes // tv.dtype.bytes).reorder({-2: -3})
    tv.apply_mma_swizzle_for_tma_load(SWIZZLE[swizzle_bytes])
    return skip


def schedule_tma_load_for_mma(tv, swizzle_bytes):
    """mma_utils::MmaSwizzler::scheduleTMALoadForMma: the swizzled box, Bulk, allocation = loop."""
    skip = _tma_box_for_mma(tv, swizzle_bytes)
    for i in tv.get_loop_domain()[skip:]:
        i.parallelize(P.Bulk)
    tv.set_allocation_domain(tv.get_loop_domain(), True)


def schedule_tma_store_for_mma_output(tv, swizzle_bytes):
    """mma_utils::scheduleTMAStoreForMmaOutput: the swizzled box; a shared tensor is allocated as
    it, a global one gets Bulk."""
    skip = _tma_box_for_mma(tv, swizzle_bytes)
    if tv.memory is tp.MemoryType.Shared:
        tv.set_allocation_domain(tv.get_loop_domain(), True)
    else:
        for i in tv.get_loop_domain()[skip:]:
            i.parallelize(P.Bulk)


def set_shmoo(swizzle_bytes, cta_multiple_m, cta_multiple_n, shape=(8192, 8192)):
    """HopperLdStMatrixTutorial.SetShmoo: CTA tile (64 * cta_multiple_m, 256 * cta_multiple_n),
    warp tile (64, 256) on TIDy, TMA box (64, swizzle span), four ldmatrix.x4 / stmatrix.x4 per
    step over TIDx{128}, eight bf16 per thread (Vectorize). The C++ runs 8192 x 8192."""
    warp_m, warp_n = 64, 256
    cta_m, cta_n = warp_m * cta_multiple_m, warp_n * cta_multiple_n
    with tp.Fusion("ld_st_matrix_set_shmoo") as fusion:
        tv0 = tp.make_contig_concrete_tensor(list(shape), dtype=tp.bfloat16)  # M, K
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        fusion.add_output(tv1)
    tv0_smem = tv0.cache_after()
    tv0_smem.definition.op_type = LS.TMA
    tv0_smem.set_memory_type(tp.MemoryType.Shared)
    tv0_reg = tv0_smem.cache_after()
    tv0_reg.definition.op_type = LS.LdMatrix
    tv1_smem = tv1.cache_before()
    tv1_smem.definition.op_type = LS.StMatrix
    tv1_smem.set_memory_type(tp.MemoryType.Shared)
    tv1.definition.op_type = LS.TMA

    tv1.split(0, cta_m).split(-1, cta_n).reorder({-2: -3, -3: -2})  # (GM, GN, cta_m, cta_n)
    tv1.split(-2, warp_m).split(-1, warp_n).reorder({-2: -3, -3: -2})  # (GM, GN, cm, cn, 64, 256)
    tp.propagate_transforms(tv1)
    tv1.axis(0).parallelize(P.BIDx)
    tv1.axis(1).parallelize(P.BIDy)
    tv1.axis(2).parallelize(P.TIDy)
    tp.parallelize_all_like(tv1)

    schedule_tma_load_for_mma(tv0_smem, swizzle_bytes)
    schedule_tma_store_for_mma_output(tv1, swizzle_bytes)

    # stmatrix: the register-order loop domain; allocated as the TMA store's swizzled box
    warp_tile = tv1_smem.get_loop_domain()
    schedule_ld_st_matrix_registers(tv1_smem, swizzle_bytes)
    stmatrix_loop = tv1_smem.get_loop_domain()
    tv1_smem.set_loop_domain(warp_tile)
    schedule_tma_store_for_mma_output(tv1_smem, swizzle_bytes)
    tv1_smem.set_loop_domain(stmatrix_loop)
    tv1_smem.axis(-2).parallelize(P.TIDx)
    tv1_smem.axis(-1).parallelize(P.Vectorize)

    # ldmatrix: the same loop domain, allocated as it
    schedule_ld_st_matrix_registers(tv0_reg, swizzle_bytes)
    tv0_reg.set_allocation_domain(tv0_reg.get_loop_domain(), True)
    tv0_reg.axis(-2).parallelize(P.TIDx)
    tv0_reg.axis(-1).parallelize(P.Vectorize)

    tp.inline_most(fusion)
    return fusion


def _run_copy(kernel, torch):
    t0 = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    (out,) = kernel.run(t0)
    assert torch.equal(out, t0)


def _case(swizzle_bytes, cta_multiple_m, cta_multiple_n):
    name = f"swizzle_{swizzle_bytes}B_cta_m_{64 * cta_multiple_m}_cta_n_{256 * cta_multiple_n}"
    return Case(f"HopperLdStMatrixTutorial.SetShmoo/{name}",
                lambda: set_shmoo(swizzle_bytes, cta_multiple_m, cta_multiple_n), VALID, run=_run_copy)


CASES = [_case(*p) for p in [(128, 1, 1), (128, 2, 1), (128, 2, 2), (64, 1, 2), (64, 2, 1), (32, 1, 1),
                             (32, 2, 2)]]


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
