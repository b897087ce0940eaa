"""Rule families; importing this package registers every rule."""

from . import alloc, divisibility, swizzle, tmem  # noqa: F401
