"""Tensor memory with 8-, 16- and 64-bit elements. A column is 32 bits: element c of a lane lies
in column (c * bytes) / 4 from byte (c * bytes) % 4, and tcgen05.ld/st move whole 32-bit
registers, so each thread's vectorized elements are packed into them (2 bfloat16 or 4 int8 per
register, low bytes first; a 64-bit element takes two registers).

packed_copy: PerformantVectorizedCopy (seed 000, tmem_performant_copy.py) in another dtype. The
gmem access moves 16 bytes per thread (8 bfloat16, 16 int8, 2 float64) and the tmem access
Serial{2} x those: 16 bytes x 2 = 8 registers, tcgen05.st/ld 32x32b.x8. T2 holds TIDy{2} x
Vectorize{2 x gmem vector} elements per lane, 64 bytes = 16 columns (32 allocated).

packed_transpose: the seed's tensor-memory transpose in bfloat16, two elements per register:
T2 [TIDx{128} | 8 columns of bfloat16 = 4 registers], stored and loaded by 32x32b.x4."""

import importlib.util
from pathlib import Path

import tileproof as tp

P = tp.ParallelType

_spec = importlib.util.spec_from_file_location(
    "_tileproof_example_performant_copy_packed", Path(__file__).parent / "tmem_performant_copy.py"
)
_performant = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_performant)


@tp.schedule(expect=tp.accepted(allocations={"T2": {"columns": 16, "columns_allocated": 32}}), target="sm_100a",
             params={"dtype": [tp.bfloat16, tp.float16, tp.int8, tp.float64]})
def packed_copy(dtype):
    fusion = _performant.performant_vectorized_copy_schedule(f"packed_copy_{dtype}", dtype)
    # the splits by the gmem vector, 128, 2 and 2 lie on the path to the vectorized tmem access
    fusion.assume(f"T0_0 % {16 // dtype.bytes * 128 * 2 * 2} == 0")
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T2": {"columns": 4, "columns_allocated": 32}}), target="sm_100a")
def packed_transpose():
    with tp.Fusion("packed_transpose") as fusion:
        tv0 = tp.make_contig_concrete_tensor([8, 128], dtype=tp.bfloat16)
        fusion.add_input(tv0)
        tv1 = tp.transpose(tv0, 0, 1)
        tv2 = tp.set(tv1)
        tv3 = tp.set(tv2)
        tv4 = tp.transpose(tv3, 0, 1)
        fusion.add_output(tv4)
    tv2.set_memory_type(tp.MemoryType.Tensor)
    tv2.set_tmem_dim_sep_pos(1)
    for tv in (tv1, tv2, tv3):
        tv.axis(0).parallelize(P.TIDx)
    tv4.axis(1).parallelize(P.TIDx)
    for tv in (tv2, tv3):  # 8 bfloat16 per thread: 4 registers, one instruction
        tv.axis(1).parallelize(P.Vectorize)
    return fusion
