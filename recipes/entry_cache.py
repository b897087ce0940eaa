"""The entries a recipe's module-level call keeps (matmul(), softmax() and the other rows' ops,
sdpa()): one entry per argument set, each holding its compiled kernels, the least recently used
let go past a size."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, TypeVar

E = TypeVar("E")


def lru_entry(entries: "OrderedDict[tuple, E]", key: tuple, make: Callable[[], E], size: int) -> E:
    """entries[key], made by make() where missing (then the least recently used past `size` dropped),
    and marked as used last."""
    entry = entries.get(key)
    if entry is None:
        entry = entries[key] = make()
        while len(entries) > size:
            entries.popitem(last=False)
    else:
        entries.move_to_end(key)
    return entry
