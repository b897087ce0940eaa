"""Rule families; importing this package registers every rule."""

from . import (  # noqa: F401
    alloc, assumptions, bank, cluster, cp_async, divisibility, ldsm, lowering, mma, perf, pipeline, races, reduction, swizzle, tma,
    tma_consumer, tma_smem, tmem, vectorize, visibility, warp_specialization, wgmma,
)
