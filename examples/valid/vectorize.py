"""The schedules of examples/invalid/vectorize.py, fixed: each Vectorize axis is one access of
2, 4, 8 or 16 consecutive bytes per shared/global operand."""

import tileproof as tp

P = tp.ParallelType


def _copy(name, shape):
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor(shape)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    return fusion, t1


@tp.schedule(expect=tp.accepted())
def vectorize_inner_split():
    """[128] -> [O{32}, I{4}]: the inner output of the split is four consecutive floats."""
    fusion, t1 = _copy("vectorize_inner_split", [128])
    t1.split(0, 4)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def vectorize_sixteen_bytes():
    """Eight floats split into two 16-byte vectors per thread ([TIDx{32}, 2, Vectorize{4}])."""
    fusion, t1 = _copy("vectorize_sixteen_bytes", [256])
    t1.split(0, 8).split(1, 4)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def vectorize_transpose_through_registers():
    """The transpose's vector on the output side only: T1 = set(T0) reads T0's rows into
    registers element by element along T1's inner axis (registers take any layout), then
    T2 = transpose(T1) stores four consecutive floats of T2 per access."""
    with tp.Fusion("vectorize_transpose_through_registers") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.transpose(t1, 0, 1)
        fusion.add_output(t2)
    t2.split(1, 4)
    t2.axis(0).parallelize(P.TIDx)
    t2.axis(2).parallelize(P.Vectorize)
    t1.split(0, 4)
    t1.reorder({2: 0})  # [I1{64}, I0o{16}, I0i{4}]: loops like T2's
    t1.axis(0).parallelize(P.TIDx)
    return fusion
