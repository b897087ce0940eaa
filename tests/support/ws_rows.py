"""exp of 1-D TMA tiles read by a TIDy x TIDx block of consumer threads, warp-specialized on TIDy,
for the tests of nvFuser's padding (adjustMappingsForWarpSpecialization): a TIDx of `width`
threads under `rows` TIDy indices, so the producer is 128 / width more TIDy indices (one where
width is 128 or more)."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def exp_rows(width: int, rows: int, *, stages: int = 4, prefetch: int = 2, num_registers=None) -> tp.Fusion:
    """out = exp(a): tiles of width x rows elements (one TMA box, both tile axes Bulk), circular-
    buffered over the serial loop, read by threadIdx.y < rows (each a row of `width` on TIDx)."""
    with tp.Fusion("exp_rows") as fusion:
        a = tp.make_contig_tensor(1)
        fusion.add_input(a)
        out = tp.exp(a)
        fusion.add_output(out)
    s = a.cache_after(tp.LoadStoreOpType.TMA)
    s.set_memory_type(tp.MemoryType.Shared)
    out.split(0, width * rows).split(1, width)  # [I / (width x rows), rows, width]
    tp.propagate_transforms(out)
    tp.inline_all_at(out, 1)
    s.axis(1).parallelize(P.Bulk)
    s.axis(2).parallelize(P.Bulk)
    out.axis(1).parallelize(P.TIDy)
    out.axis(2).parallelize(P.TIDx)
    s.circular_buffer(stages, prefetch, tp.WarpSpecialized(P.TIDy, num_registers))
    return fusion
