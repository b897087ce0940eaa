"""Casts between data types and binary ops with a number operand (issue 12, first slice).

A cast converts each value (tp.cast: round to nearest even into a float type; truncate toward
zero, saturate and NaN -> 0 into an integer). Its two operands have different element sizes, so
a Vectorize axis is checked per operand: VECTORIZE-WIDTH wants 2, 4, 8 or 16 bytes of each
shared or global operand. examples/invalid/casts.py holds a vector that is legal for the narrow
operand but not for the wide one.
"""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.accepted())
def cast_float32_to_bfloat16_vectorized():
    """[M, N] float32 -> bfloat16, four elements per thread: a 16-byte load of float32 and an
    8-byte store of bfloat16 in one vector statement."""
    with tp.Fusion("cast_float32_to_bfloat16_vectorized") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(t0)
        t1 = tp.cast(t0, tp.bfloat16)
        fusion.add_output(t1)
    fusion.assume("N % 4 == 0")
    fusion.assume("M * N <= (2**31 - 1) * 512")  # gridDim.x = ceil(M N / 512) launches (LAUNCH-GRID)
    t1.merge(0).split(0, 4).split(0, 128)  # [blocks, TIDx{128}, Vectorize{4}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def cast_bfloat16_vector_of_eight_through_registers():
    """bfloat16 -> float32 with a vector of eight: the bfloat16 load is 16 bytes; the eight
    float32 (32 bytes) land in registers, which take any width, and go out as two 16-byte
    stores."""
    with tp.Fusion("cast_bfloat16_vector_of_eight_through_registers") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 256], dtype=tp.bfloat16)
        fusion.add_input(t0)
        t1 = tp.cast(t0, tp.float32)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.merge(0).split(0, 8).split(0, 128)  # [BIDx{16}, TIDx{128}, Vectorize{8}]
    t2.merge(0).split(0, 8).split(0, 128).split(2, 4)  # [BIDx{16}, TIDx{128}, 2, Vectorize{4}]
    for tv in (t1, t2):
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
        tv.axis(-1).parallelize(P.Vectorize)
    t1.inline_at(2)
    return fusion


@tp.schedule(expect=tp.accepted())
def cast_chain_with_scalars():
    """out = bfloat16((float32(x) * 2 - 0.5) / 3) and its int32 truncation, x bfloat16: casts
    and number operands inlined into one loop nest."""
    with tp.Fusion("cast_chain_with_scalars") as fusion:
        x = tp.make_tensor(["N"], dtype=tp.bfloat16)
        fusion.add_input(x)
        wide = tp.cast(x, tp.float32)
        scaled = tp.sub(tp.mul(wide, 2), 0.5)
        third = tp.div(scaled, 3.0)
        out = tp.cast(third, tp.bfloat16)
        whole = tp.cast(third, tp.int32)
        fusion.add_output(out)
        fusion.add_output(whole)
    for tv in fusion.tensors[1:]:
        tv.split(0, 128)
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.accepted())
def scalar_on_the_left_of_an_integer_tensor():
    """out = 100 - x for int8 x: the number is an int (an integer tensor takes no float), the
    arithmetic is done in int32 and the result stored back as int8 (its low bits)."""
    with tp.Fusion("scalar_on_the_left_of_an_integer_tensor") as fusion:
        x = tp.make_contig_concrete_tensor([4096], dtype=tp.int8)
        fusion.add_input(x)
        out = tp.sub(100, x)
        fusion.add_output(out)
    out.split(0, 4).split(0, 256)  # [BIDx{4}, TIDx{256}, Vectorize{4}]: 4-byte int8 vectors
    out.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.TIDx)
    out.axis(2).parallelize(P.Vectorize)
    return fusion
