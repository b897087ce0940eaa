"""Rule families; importing this package registers every rule."""

from . import alloc, bank, divisibility, ldsm, swizzle, tma, tma_consumer, tma_smem, tmem, visibility  # noqa: F401
