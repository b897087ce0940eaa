"""One derivation per fusion: the execution facts of a frozen fusion (Fusion.snapshot(), what
verify and compile work on) are derived once and shared by every rule, the code generator and
the reports.

    ex = derive(snapshot)            # the snapshot's Execution (None for a fusion still being scheduled)
    ex.memo(key, compute)            # compute() once per key for this fusion

Functions of execution/ that every rule asks again (a tensor's statement, the loop groups, the
allocations, the holes run unpredicated) are `@per_fusion`: on a frozen fusion they answer from its
Execution, on a live one (a schedule still changing) they compute afresh. A frozen fusion never
changes, so nothing cached can go stale; the cache goes when the snapshot does.
"""

from __future__ import annotations

import functools
import weakref
from typing import Callable, TypeVar

from ..model.fusion import Fusion

T = TypeVar("T")


class Execution:
    """The execution facts derived for one frozen fusion, each computed once (memo)."""

    def __init__(self, fusion: Fusion):
        self.fusion = fusion
        self._memo: dict = {}

    def memo(self, key, compute: Callable[[], T]) -> T:
        """compute(), once per key for this fusion."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


_EXECUTIONS: "weakref.WeakKeyDictionary[Fusion, Execution]" = weakref.WeakKeyDictionary()


def derive(fusion: Fusion) -> Execution | None:
    """The Execution of a frozen fusion; None for a live one, whose schedule may still change."""
    if not getattr(fusion, "frozen", False):
        return None
    ex = _EXECUTIONS.get(fusion)
    if ex is None:
        ex = _EXECUTIONS[fusion] = Execution(fusion)
    return ex


def _key(value):
    """A hashable stand-in for an argument: tensors by name, dicts and lists by their items."""
    if isinstance(value, dict):
        return tuple((_key(k), _key(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    name = getattr(value, "name", None)
    if name is not None and hasattr(value, "fusion"):  # a TensorView: its name is its identity in the fusion
        return ("tensor", name)
    return value


def per_fusion(func: Callable[..., T]) -> Callable[..., T]:
    """Memoize func(subject, *args) on the subject's frozen fusion (the subject: a fusion or one
    of its tensors); a live fusion's calls are computed each time."""

    @functools.wraps(func)
    def cached(subject, *args, **kwargs):
        fusion = subject if isinstance(subject, Fusion) else getattr(subject, "fusion", None)
        ex = derive(fusion) if fusion is not None else None
        if ex is None:
            return func(subject, *args, **kwargs)
        key = (func.__module__, func.__qualname__, _key(subject), _key(args), _key(kwargs))
        return ex.memo(key, lambda: func(subject, *args, **kwargs))

    return cached


__all__ = ["Execution", "derive", "per_fusion"]
