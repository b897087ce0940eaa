"""nvFuser's loop rotation (scheduler_utils::rotateLoop, device_lower/pass/loop_rotation.cpp):
the statements of `selection` that open the body of loop_tv's loop at `axis` run one iteration
early, at the end of the previous iteration:

    for i: A(i); B(i)          becomes        A(0) if 0 < n
                                               for i: B(i); A(i + 1) if i + 1 < n

The same statements run in the same order (A(0) B(0) A(1) B(1) ..), so the values are the
fusion's; what changes is which loop body holds them, so that what A(i + 1) issues (a load, an
asynchronous product) overlaps B(i). execution/rotation.py places it on the loop nest, rule
LOOP-ROTATION says where it cannot (the selection is not the body's first statements).
"""

from __future__ import annotations

from .errors import ScheduleError, user_location
from .tensor import TensorView


def rotate_loop(loop_tv, axis: int, selection) -> None:
    """Rotate the loop of loop_tv's loop axis `axis` (negative counts from the end) by the
    statements of the tensors in `selection` (module docstring). nvFuser's
    scheduler_utils::rotateLoop(loop_tv, axis, selection); recorded on the fusion (its
    "loop_rotation" managed parameter), applied when the fusion is verified and lowered."""
    if not isinstance(loop_tv, TensorView):
        raise ScheduleError(f"rotate_loop: expected the TensorView whose loop is rotated, got {loop_tv!r}")
    fusion = loop_tv.fusion
    if getattr(fusion, "frozen", False):
        raise ScheduleError("rotate_loop: the fusion is a frozen snapshot")
    n = len(loop_tv.loop)
    if not isinstance(axis, int) or isinstance(axis, bool) or not -n <= axis < n:
        raise ScheduleError(f"rotate_loop: axis must be an int in [{-n}, {n}) for {loop_tv.name}'s {n} loop axes, "
                            f"got {axis!r}")
    try:
        chosen = list(selection)
    except TypeError:
        raise ScheduleError(f"rotate_loop: selection must be a list of tensors, got {selection!r}") from None
    if not chosen:
        raise ScheduleError("rotate_loop: the selection is empty (nothing to rotate)")
    for tv in chosen:
        if not isinstance(tv, TensorView) or tv.fusion is not fusion:
            raise ScheduleError(f"rotate_loop: {tv!r} is not a tensor of fusion {fusion.name}")
        if tv.definition is None:
            raise ScheduleError(f"rotate_loop: {tv.name} is a fusion input: it has no statement to rotate")
    if any(r[0] is loop_tv and r[1] == axis % n for r in fusion.loop_rotation):
        raise ScheduleError(f"rotate_loop: {loop_tv.name}'s loop axis {axis % n} is rotated already")
    names = sorted({t.name for t in chosen})
    fusion.loop_rotation.append((loop_tv, axis % n, tuple(t for t in fusion.tensors if t.name in names)))
    fusion.loop_rotation_origins.append(user_location())


__all__ = ["rotate_loop"]
