"""TensorView.commit_leaf_to_logical: the loop domain becomes the logical domain (nvFuser's
TensorView::commitLeafToLogical, csrc/tensor_view.cpp), an implicit transpose.

The tensor keeps its root domain (the axes its defining op maps to its inputs) and its allocation
domain; its logical domain, what its consumers read and what a fusion output's array is, becomes
its loop domain: a fusion output laid out by its logical domain is stored in the new order.
nvFuser refuses a tensor that already has consumers (they would read the old axes); tileproof
also refuses a loop domain that is not a permutation of the logical axes (a split or merge would
make the commit a view, which nvFuser's header says is untested and tileproof does not model).
Imports only model/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ScheduleError
from .tensor_base import _normalize_contiguity

if TYPE_CHECKING:
    from .tensor import TensorView


def commit_leaf_to_logical(tv: "TensorView") -> None:
    """Make tv's loop domain its logical domain; its root domain stays the old logical (or root)
    domain, its contiguity is filled with True over its allocation domain (nvFuser's
    getContiguityFilledWith(allocation or loop, true))."""
    consumers = tv.fusion.consumers(tv)
    if consumers:
        raise ScheduleError(
            f"commit_leaf_to_logical: {tv.name} is read by {', '.join(c.name for c in consumers)}; changing the "
            f"logical domain of an intermediate tensor is not supported (nvFuser's commitLeafToLogical refuses it "
            f"too): commit before making its consumers")
    logical = {i.uid for i in tv.logical}
    for k, i in enumerate(tv.loop):
        if i.uid not in logical:
            made = f"made by `{i.definition}`" if i.definition is not None else "not of its logical domain"
            raise ScheduleError(
                f"commit_leaf_to_logical: loop axis {k} of {tv.name} ({i.label()}) is {made}; tileproof commits a "
                f"permutation of the logical axes (reorder), an implicit transpose, not a view made by split or merge")
    if len(tv.loop) != len(tv.logical):  # pragma: no cover - a loop of logical IDs covers them all (set_loop_domain)
        raise ScheduleError(f"commit_leaf_to_logical: the loop domain of {tv.name} does not cover its logical domain")
    tv.root = list(tv.root)
    tv.logical = list(tv.loop)
    tv.contiguity = _normalize_contiguity(True, tv.allocation if tv.allocation is not None else tv.logical,
                                          "commit_leaf_to_logical")


__all__ = ["commit_leaf_to_logical"]
