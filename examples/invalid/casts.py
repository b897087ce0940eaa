"""A vectorized cast whose operands have different element sizes: a width legal for one operand
is not for the other (VECTORIZE-WIDTH checks each shared/global operand's bytes).

examples/valid/casts.py holds the fixed schedule (cast_bfloat16_vector_of_eight_through_registers).
"""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.rejected("VECTORIZE-WIDTH", messages=["8 elements of T1 (float32) at once: 32 bytes"]))
def cast_bfloat16_to_float32_vector_of_eight():
    """bfloat16 -> float32 straight into global memory, eight per vector: 16 bytes of the
    bfloat16 input (legal) but 32 bytes of the float32 output, wider than any access.
    Counterexample: elements 8, bytes 32."""
    with tp.Fusion("cast_bfloat16_to_float32_vector_of_eight") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 256], dtype=tp.bfloat16)
        fusion.add_input(t0)
        t1 = tp.cast(t0, tp.float32)
        fusion.add_output(t1)
    t1.merge(0).split(0, 8).split(0, 128)  # [BIDx{16}, TIDx{128}, Vectorize{8}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("VECTORIZE-WIDTH", messages=["4 elements of T0 (float64) at once: 32 bytes"]))
def cast_float64_to_int8_vector_of_four():
    """float64 -> int8, four per vector: 4 bytes of int8 (legal) but 32 bytes of float64.
    Counterexample: elements 4, bytes 32."""
    with tp.Fusion("cast_float64_to_int8_vector_of_four") as fusion:
        t0 = tp.make_contig_concrete_tensor([1024], dtype=tp.float64)
        fusion.add_input(t0)
        t1 = tp.cast(t0, tp.int8)
        fusion.add_output(t1)
    t1.split(0, 4).split(0, 128)  # [BIDx{2}, TIDx{128}, Vectorize{4}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion
