"""A copy whose load of the fusion input names a tp.CacheOp (ld.global.ca / .cg / .cs), shared
by tests/codegen/test_codegen_cached_loads.py and tests/gpu/test_cached_loads.py."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType
QUALIFIER = {tp.CacheOp.AllLevels: "ca", tp.CacheOp.Global: "cg", tp.CacheOp.Streaming: "cs"}


def cached_copy(cache_op, dtype=tp.float32, vector=4, *, memory=tp.MemoryType.Local, threads=32):
    """t0 [N] (N a multiple of `vector`) -> t1 = tp.set(t0, cache_op) in `memory` -> t2 = tp.set(t1)
    (the output): blocks of `threads` threads, `vector` elements per thread and load."""
    with tp.Fusion(f"cached_copy_{cache_op.name}_{dtype.name}_{vector}_{memory.name}") as fusion:
        t0 = tp.make_tensor(["N"], contiguity=[True], dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, cache_op=cache_op)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    fusion.assume(f"N % {vector} == 0")
    fusion.assume("N <= 1073741824")
    t1.set_memory_type(memory)
    t1.split(0, vector).split(0, threads)
    tp.propagate_transforms(t1)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    if vector > 1:
        t1.axis(2).parallelize(P.Vectorize)
        t2.axis(2).parallelize(P.Vectorize)
    tp.parallelize_all_like(t1, tensors=[t2])
    tp.inline_most(fusion)
    return fusion
