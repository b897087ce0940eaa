"""Binary ops over inputs of distinct symbolic extents, as nvFuser's tests write them
(`add(makeContigTensor(n), makeContigTensor(n))`): the add unifies the extents
(model/extent_unification.py) and the launch checks the inputs agree.

tests/model/test_extent_unification.py checks the op, tests/codegen/test_binding_unified_extents.py
the launch's binding without a GPU, tests/gpu/test_unified_extents.py runs the kernels.
"""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def add_symbolic(ndims: int, second=None, vector: int = 1) -> tp.Fusion:
    """T2 = T0 + T1 of two contiguous float32 inputs with `ndims` symbolic extents each (T1's
    extents are `second` instead where given, e.g. [512]); T2 [.., ceildiv(T0_last, 128 * vector),
    TIDx{128}, (Vectorize{vector})], the outer axis on BIDx, the others serial. A vectorized schedule
    assumes its inner extent a multiple of `vector`, stated on T1's symbol before the add."""
    with tp.Fusion(f"add_symbolic_{ndims}d") as fusion:
        t0 = tp.make_contig_tensor(ndims)
        t1 = tp.make_contig_tensor(ndims) if second is None else tp.make_contig_concrete_tensor(second)
        fusion.add_input(t0)
        fusion.add_input(t1)
        if vector > 1:
            fusion.assume(f"T1_{ndims - 1} % {vector} == 0")
        t2 = tp.add(t0, t1)
        fusion.add_output(t2)
    if vector > 1:
        t2.split(-1, vector)
    t2.split(-1 if vector == 1 else -2, 128)
    t2.axis(0).parallelize(P.BIDx)
    inner = -1 if vector == 1 else -2
    t2.axis(inner).parallelize(P.TIDx)
    if vector > 1:
        t2.axis(-1).parallelize(P.Vectorize)
    return fusion
