"""Online reductions: a running max whose consumers inside its loop read the value so far, and the
sums rescaled as it grows (the online softmax of attention; a tileproof extension, nvFuser has none).

    m = tp.max(s, 1); p = tp.exp2(tp.mul(tp.sub(s, tp.broadcast(m, ..)), c)); l = tp.sum(p, 1)
    m.set_online(rescale=[l])

In nvFuser's model a consumer of m reads m's total, so s stays whole (a persistent buffer) until
the max is known. Online, m's loop over key tiles runs once for everything: at iteration k m holds
the max of the tiles so far (its store runs inside the loop), the consumers inlined into the loop
read that running value, and a sum T over the same loop whose terms read it keeps its accumulator
at the running max: before adding iteration k's term, acc *= exp2(a (m_k - m_{k-1})), where a is
the coefficient of m in the terms' exponent (each term is exp2(a m) times something m does not
change: verifier rule ONLINE-RESCALE proves it and derives a, execution/online.py). After the
loop T holds exactly the sum with every term at the final max: the value the fusion means.

set_online records the rescaled sums and gives each one m as a second input, read at the row its
terms read it: the rescale factor is an operand like any other, so the visibility rules prove the
thread that rescales holds m's value for that row.

Imports model/ only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ScheduleError, user_location
from .expr import Expr, as_expr, var
from .types import BLOCK_TYPES, OpKind, float32

if TYPE_CHECKING:
    from .tensor import TensorView


def online_max(tv) -> "TensorView | None":
    """The online max whose value tv rescales by (a rescaled sum: its second input; a rescaled
    MmaOp: its rescale_max), else None."""
    op = tv.definition
    if op is None or op.kind is not OpKind.REDUCTION:
        return None
    if op.name == "fms":
        return op.rescale_max
    if op.name != "sum" or len(op.inputs) != 2:
        return None
    m = op.inputs[1]
    return m if getattr(m, "online", None) is not None else None


def rescaled_in_place(tv) -> bool:
    """Whether tv is an MmaOp an online max rescales: its accumulators are multiplied in place at
    each iteration of the max's loop, before that iteration's products (no second input)."""
    op = tv.definition
    return op is not None and op.name == "fms" and op.rescale_max is not None


def set_online(m: "TensorView", rescale) -> None:
    """TensorView.set_online (module docstring): check and record."""
    fusion = m.fusion
    if m.definition is None or m.definition.kind is not OpKind.REDUCTION or m.definition.name != "max":
        raise ScheduleError(f"set_online: {m.name} is not a tp.max; only a running max is online "
                            f"(its consumers read the max so far)")
    if m.dtype != float32:
        raise ScheduleError(f"set_online: {m.name} is {m.dtype.name}; an online max is float32")
    if m.online is not None:
        raise ScheduleError(f"set_online: {m.name} is online already (rescaling "
                            f"{', '.join(t.name for t in m.online)})")
    if isinstance(rescale, (str, bytes)) or not hasattr(rescale, "__iter__"):
        raise ScheduleError(f"set_online: rescale must be a list of the sums whose terms read {m.name}, "
                            f"got {rescale!r:.60}")
    sums = list(rescale)
    for t in sums:
        if getattr(t, "fusion", None) is not fusion:
            raise ScheduleError(f"set_online: rescale holds {t!r:.60}, not a tensor of {m.name}'s fusion")
        op = t.definition
        if op is None or op.kind is not OpKind.REDUCTION or op.name not in ("sum", "fms"):
            raise ScheduleError(f"set_online: {t.name} is not a sum (tp.sum, tp.fused_multiply_sum, or the sum an "
                                f"MmaOp's rfactor leaves); only sums are rescaled")
        if online_max(t) is not None or (op.name == "sum" and len(op.inputs) != 1):
            raise ScheduleError(f"set_online: {t.name} is rescaled already")
        if t.dtype != float32 or (op.name == "sum" and op.inputs[0].dtype.compute != float32):
            raise ScheduleError(f"set_online: {t.name} accumulates in {op.inputs[0].dtype.compute.name}; a "
                                f"rescaled sum accumulates float32")
        if t.compute_at:
            raise ScheduleError(f"set_online: {t.name} is inlined at {t.compute_at}; call set_online before inlining")
    if len({id(t) for t in sums}) != len(sums):
        raise ScheduleError("set_online: rescale lists a tensor twice")
    maps = [(t, row_map(t, m)) for t in sums]
    for t, read in maps:
        if t.definition.name == "fms":  # its accumulators, in place (the wgmma's operands stay its inputs)
            t.definition.rescale_max, t.definition.rescale_map = m, read
        else:
            t.definition.inputs.append(m)
            t.definition.logical_map.append(read)
    m.online = tuple(sums)
    m.online_origin = user_location()  # ONLINE-RESCALE's reports point at the call


def row_map(t: "TensorView", m: "TensorView") -> list[int | None]:
    """For each root axis of sum t: the logical axis of m that t's terms read m at through that
    axis (None for the others), following the ops from t's input back to m. Every element axis
    of m must be read through one of t's (non-reduced) axes: then m's element for a term depends
    on t's element only, and one factor rescales it. ScheduleError where t's terms do not read m
    or read it along an axis t sums over."""
    # tensor name -> {logical position: t's root position it is read through}; an MmaOp's terms are
    # products of its two operands
    tags: dict[str, dict[int, int]] = {}
    terms = t.definition.inputs if t.definition.name == "fms" else t.definition.inputs[:1]
    for k, first in enumerate(terms):
        mine = tags.setdefault(first.name, {})
        for j, a in enumerate(t.definition.logical_map[k]):
            if a is not None and not t.root[j].is_reduction:
                mine[a] = j
    for c in reversed(list(t.fusion.topo_tensors())):  # consumers first: a tensor's tags are whole when it is reached
        if c.name not in tags or c is m or c.definition is None:
            continue
        at = {c.logical[a].uid: j for a, j in tags[c.name].items()}
        for k, producer in enumerate(c.definition.inputs):
            mine = tags.setdefault(producer.name, {})
            for b, root in enumerate(c.root):
                a = c.definition.logical_map[k][b] if b < len(c.definition.logical_map[k]) else None
                if a is not None and root.uid in at:
                    if mine.get(a, at[root.uid]) != at[root.uid]:
                        raise ScheduleError(f"set_online: {t.name}'s terms read {producer.name}'s axis {a} through "
                                            f"two of {t.name}'s axes")
                    mine[a] = at[root.uid]
    if m.name not in tags:
        raise ScheduleError(f"set_online: {t.name}'s terms do not read {m.name}; rescale only the sums computed "
                            f"from the running max")
    read = tags.get(m.name, {})
    out: list[int | None] = [None] * len(t.root)
    for a, i in enumerate(m.logical):
        if i.is_reduction:
            continue
        if a not in read:
            raise ScheduleError(f"set_online: {t.name}'s terms read {m.name} along {m.name}'s axis {a} "
                                f"({i.label()}), which {t.name} sums over or does not have: one factor per "
                                f"element of {t.name} cannot rescale them")
        out[read[a]] = a
    return out


def skip_masked(m: "TensorView", mask, trip_count, unmasked=None) -> None:
    """TensorView.skip_masked (its docstring says what it means): check and record. `trip_count`
    (and `unmasked`) is called with the block indices blockIdx.x, .y, .z as index expressions; what
    it returns (an int or an expression of them and of the fusion's extent symbols) is kept."""
    fusion = m.fusion
    if m.online is None:
        raise ScheduleError(f"skip_masked: {m.name} is not an online max; call {m.name}.set_online(rescale=[...]) "
                            f"first (only the loop of an online max skips its masked iterations)")
    if getattr(m, "skip", None) is not None:
        raise ScheduleError(f"skip_masked: {m.name} skips the iterations masked by {m.skip[0].name} already")
    if getattr(mask, "fusion", None) is not fusion or not mask.dtype.is_bool:
        raise ScheduleError(f"skip_masked: mask must be a bool tensor of {m.name}'s fusion (a comparison of "
                            f"tp.iota, the where's condition), got {mask!r:.60}")
    value = _block_count(m, "trip_count", trip_count, "the iterations a block runs")
    kept = None if unmasked is None else _block_count(m, "unmasked", unmasked,
                                                       "the first iterations whose every point the mask keeps")
    m.skip = (mask, value, kept)
    m.skip_origin = user_location()  # ONLINE-SKIP's reports point at the call


def _block_count(m, name: str, count, what: str):
    """count(blockIdx.x, .y, .z) as an index expression of the block indices, the extents and the
    indices of m's loops (m.loop_index)."""
    fusion = m.fusion
    if not callable(count):
        raise ScheduleError(f"skip_masked: {name} must be a function of the block indices (bx, by, bz) "
                            f"returning {what}, got {count!r:.60}")
    blocks = [var(p.cuda_name) for p in BLOCK_TYPES]
    value = count(*blocks)
    if isinstance(value, bool) or not isinstance(value, (int, Expr)):
        raise ScheduleError(f"skip_masked: {name} returned {value!r:.60}, not an int or an index expression "
                            f"of the block indices and extents")
    value = as_expr(value)
    allowed = {b.value for b in blocks} | set(fusion.symbols) | {LOOP_INDEX + str(i.uid) for i in m.loop}
    stray = sorted(value.free_vars() - allowed)
    if stray:
        raise ScheduleError(f"skip_masked: {name} reads {', '.join(stray)}; it may read the block indices, "
                            f"{m.name}.loop_index(k) of its loops outside the loop over tiles and the fusion's "
                            f"extent symbols only (every role of the block runs the same count)")
    return value


LOOP_INDEX = "loop_index."  # a skip count's placeholder for the index of a loop: loop_index.<IterDomain uid>


def loop_index(tv: "TensorView", axis: int) -> Expr:
    """TensorView.loop_index: the index of the loop over tv's loop axis `axis`, as an index
    expression a skip_masked count may read (execution/skip.py names it in each role's nest)."""
    if isinstance(axis, bool) or not isinstance(axis, int) or not -len(tv.loop) <= axis < len(tv.loop):
        raise ScheduleError(f"loop_index: axis must be a position of {tv.name}'s loop domain (0 to "
                            f"{len(tv.loop) - 1}), got {axis!r}")
    return var(LOOP_INDEX + str(tv.loop[axis].uid))


__all__ = ["LOOP_INDEX", "loop_index", "online_max", "rescaled_in_place", "row_map", "set_online", "skip_masked"]
