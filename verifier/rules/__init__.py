"""Rule families; importing this package registers every rule."""

from . import alloc, bank, divisibility, swizzle, tma, tma_consumer, tmem  # noqa: F401
