"""Rule families; importing this package registers every rule."""

from . import (  # noqa: F401
    alloc, assumptions, bank, divisibility, ldsm, lowering, perf, races, swizzle, tma, tma_consumer, tma_smem, tmem, vectorize,
    visibility,
)
