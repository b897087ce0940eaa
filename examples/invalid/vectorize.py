"""Vectorize axes that cannot be one access (VECTORIZE-CONTIGUOUS, VECTORIZE-WIDTH): each would
have been emitted element by element, silently dropping the vector the schedule asked for.

examples/valid/vectorize.py holds the fixed schedules.
"""

import tileproof as tp

P = tp.ParallelType


def _copy(name, shape):
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor(shape)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    return fusion, t1


@tp.schedule(expect=tp.rejected("VECTORIZE-CONTIGUOUS", messages=["the next at 32"]))
def vectorize_outer_split():
    """[128] split by 4 as the outer output, reordered so the outer O{4} is innermost: the four
    elements of one vector are 32 apart."""
    fusion, t1 = _copy("vectorize_outer_split", [128])
    t1.split(0, 4, inner_split=False).reorder({1: 0})  # [I{32}, O{4}]
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("VECTORIZE-WIDTH", messages=["12 bytes"]))
def vectorize_twelve_bytes():
    """Three floats per vector: there is no 12-byte access."""
    fusion, t1 = _copy("vectorize_twelve_bytes", [96])
    t1.split(0, 3)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("VECTORIZE-WIDTH", messages=["32 bytes"]))
def vectorize_thirty_two_bytes():
    """Eight floats per vector on sm_90a: a thread's widest access is 16 bytes."""
    fusion, t1 = _copy("vectorize_thirty_two_bytes", [256])
    t1.split(0, 8)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("VECTORIZE-CONTIGUOUS", warnings=("GLOBAL-COALESCING",)))
def vectorize_transposed_operand():
    """T1 = transpose(T0) vectorized along T1's inner axis, which is T0's outer axis."""
    with tp.Fusion("vectorize_transposed_operand") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 64])
        fusion.add_input(t0)
        t1 = tp.transpose(t0, 0, 1)
        fusion.add_output(t1)
    t1.split(1, 4)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion
