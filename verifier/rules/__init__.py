"""Rule families; importing this package registers every rule."""

from . import alloc, bank, divisibility, swizzle, tma, tmem  # noqa: F401
