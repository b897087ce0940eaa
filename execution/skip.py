"""Masked iterations an online max's loop skips (TensorView.skip_masked, model/online.py), derived
once for the verifier (rule ONLINE-SKIP) and the code generator (the loop's bound).

A block runs iterations 0 .. T - 1 of the loop over tiles, T = min(E, trip_count(block)), E the
loop's extent; every statement of that loop does (execution/nest.py gives the placed nest's loop
T iterations, so the pipeline, phase, drain and wgmma-order proofs hold for that symbolic count
as for any other; codegen/lower/loop_nest.py renders the same T). Why a skipped iteration t >= T
changes nothing, where the mask is false at every point of it (ONLINE-SKIP proves that with z3):

  - the where W = where(mask, x, -inf) is -inf at every point of t;
  - the max's input is W (through copies, casts, broadcasts, a positive scale and the tile's max):
    -inf everywhere, so the running max does not grow (its growth 0, every rescale factor
    exp2(a 0) = 1), given a finite running max: iteration 0 always runs (T >= 1), and a row it
    leaves at -inf already holds exp2(-inf - -inf) = NaN terms, run or skipped alike;
  - every rescaled sum's terms are 0 there: exp2 or exp of W (times a number > 0, plus or minus
    values not computed from W: the running max), times or divided by values not computed from W
    (finite inputs: V), cast, copied, broadcast or summed (a tile's P V) -- so acc * 1 + 0 = acc;
  - nothing else is carried across iterations: no other reduction sums over the loop, and every
    value computed inside it reaches only the loop's statements, the max or those sums.

`skip_problems` lists the structural failures; `mask_comparison` gives the mask's value at a
point as a comparison of two affine index expressions (tp.iota through broadcasts, copies,
integer casts and integer adds or multiplies by numbers), the claim's ingredients.

Imports model/ and execution/ only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..model.expr import Expr, add, as_expr, const, maximum, mul, substitute, var
from ..model.online import LOOP_INDEX
from ..model.reduction import is_reduction_tensor
from ..model.types import THREAD_TYPES, OpKind
from .derive import per_fusion
from .indexing import producer_logical
from .loops import execution_order, loop_groups
from .online import online_loop
from .problems import Problem

COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
PASS = ("set", "broadcast")  # ops whose element is its input's


@dataclass(frozen=True)
class SkippedLoop:
    """Online max `max` skips, in the loop at its loop position `position` (loop group `group`),
    the iterations from min(extent, given) on, where `mask` (the condition of `where`) is false."""

    max: object
    mask: object
    where: object | None  # where(mask, x, -inf), None where the max's input is no such where
    position: int
    group: int
    extent: Expr
    given: Expr
    where_position: int | None = None  # the where's loop position in the loop (None: outside it)
    # skip_masked's `unmasked`: the iterations below min(extent, unmasked) keep every point of the
    # mask, which the kernel then computes without (codegen/lower/peel.py; ONLINE-SKIP proves it)
    unmasked: Expr | None = None
    # the tensors computed in the loop for the mask alone (tp.iota, its broadcasts, the comparison):
    # what the peeled iterations do not compute
    mask_only: frozenset[str] = frozenset()

    def named(self, names) -> "SkippedLoop":
        """This loop with each max.loop_index(k) its counts read replaced by names(k) (an index
        expression of the max's loop axis k: the loop group's variable in the nest and the kernel,
        a statement's own loop index in a proof)."""
        env = {LOOP_INDEX + str(i.uid): names(k) for k, i in enumerate(self.max.loop)}
        return replace(self, given=substitute(self.given, env),
                       unmasked=None if self.unmasked is None else substitute(self.unmasked, env))

    def loop_axes(self) -> list[int]:
        """The max's loop axes whose index its counts read (max.loop_index)."""
        read = (self.given.free_vars() | (self.unmasked.free_vars() if self.unmasked is not None else frozenset()))
        return [k for k, i in enumerate(self.max.loop) if LOOP_INDEX + str(i.uid) in read]

    @property
    def trip_count(self) -> Expr:
        """min(extent, given), as extent + given - max(extent, given) (the index algebra has max only)."""
        if self.given == self.extent:
            return self.extent
        return add(self.extent, self.given, mul(maximum(self.extent, self.given), const(-1)))


@per_fusion
def skipped_loops(fusion) -> dict[int, SkippedLoop]:
    """Loop group index -> its SkippedLoop, for every online max with skip_masked whose loop is one
    serial loop (what else is wrong, skip_problems says)."""
    order = execution_order(fusion)
    computed = {t.name for t in order}
    groups = loop_groups(fusion, order)
    out = {}
    for m in order:
        if getattr(m, "skip", None) is None or m.online is None:
            continue
        k, _ = online_loop(m)
        if k is None or m.skip[0].name not in computed:
            continue
        g = groups.of[(m.name, k)]
        w = _masking_where(m)
        at = None if w is None else next((j for j in range(len(w.loop)) if groups.of.get((w.name, j)) is g), None)
        peeled = w is not None and m.skip[2] is not None
        mask_only = _mask_only(fusion, m.skip[0], w, g, groups) if peeled else frozenset()
        out[g.index] = SkippedLoop(m, m.skip[0], w, k, g.index, g.extent, m.skip[1], at, m.skip[2], mask_only)
    return out


def _mask_only(fusion, mask, where, g, groups) -> frozenset[str]:
    """The mask and the tensors it is computed from that the loop (group g) computes and nothing
    but the where reads, through one another."""
    readers: dict[str, set[str]] = {}
    for t in fusion.tensors:
        for i in (t.definition.inputs if t.definition is not None else ()):
            readers.setdefault(i.name, set()).add(t.name)
    in_loop = {t.name for t in fusion.tensors if any(groups.of.get((t.name, j)) is g for j in range(len(t.loop)))}
    only = {where.name}
    frontier = [mask]
    while frontier:
        t = frontier.pop()
        if t.name in only or t.name not in in_loop or not readers.get(t.name, set()) <= only:
            continue
        only.add(t.name)
        frontier.extend(t.definition.inputs if t.definition is not None else ())
    return frozenset(only - {where.name})


def trip_counts(fusion) -> dict[int, Expr]:
    """Loop group index -> the iterations the kernel runs, for the loops that skip (others: extent),
    in the loop groups' variables."""
    return {g: s.trip_count for g, s in named_loops(fusion).items()}


@per_fusion
def named_loops(fusion) -> dict[int, SkippedLoop]:
    """skipped_loops with the counts' loop indices in the loop groups' variables (the nest's and
    the kernel's)."""
    groups = loop_groups(fusion, execution_order(fusion))
    return {g: s.named(lambda k, m=s.max: var(groups.of[(m.name, k)].index_var)) for g, s in skipped_loops(fusion).items()}


def skip_problems(fusion) -> list[Problem]:
    """Why a skip_masked cannot skip its masked iterations exactly (module docstring)."""
    order = execution_order(fusion)
    computed = {t.name for t in order}
    loops = skipped_loops(fusion)
    by_max = {s.max.name: s for s in loops.values()}
    out = []
    for m in order:
        if getattr(m, "skip", None) is None:
            continue
        mask, hint = m.skip[0], (f"skip the iterations of an online max whose input is where({m.skip[0].name}, x, "
                                 f"-inf), its rescaled sums' terms exp2 of that where")
        s = by_max.get(m.name)
        if s is None:
            why = ("its loop is not one serial loop over tiles (ONLINE-RESCALE says why)" if mask.name in computed
                   else f"its mask {mask.name} is not computed by the kernel")
            out.append(Problem(f"online max {m.name} cannot skip masked iterations: {why}", hint=hint, tensor=m.name,
                               location=m.skip_origin))
            continue
        groups = loop_groups(fusion, order)
        out += _identity_problems(fusion, s, groups, hint)
        for k in s.loop_axes():
            g = groups.of[(m.name, k)]
            inside = k >= s.position
            if inside or g.parallel in THREAD_TYPES:
                why = ("a loop inside its loop over tiles" if inside else
                       f"a thread index ({g.parallel.cuda_name}): the threads of a block would run different counts")
                out.append(Problem(f"online max {m.name}'s skip count reads {m.name}.loop_index({k}) "
                                   f"({m.loop[k].label()}), {why}", tensor=m.name, location=m.skip_origin,
                                   hint=f"read the index of a serial loop outside {m.name}'s loop over tiles (axis "
                                        f"{s.position}) or a block index", ids=(m.loop[k].name,)))
        if s.where is not None and s.where_position is None:
            out.append(Problem(f"online max {m.name} skips the iterations where {mask.name} is false, but "
                               f"{s.where.name} = where({mask.name}, ..) is computed outside its loop: which "
                               f"iteration reads which of its points is not the loop's", tensor=s.where.name,
                               location=m.skip_origin, hint=f"inline {s.where.name} into {m.name}'s loop over tiles"))
        if s.where is not None:
            _, why = mask_comparison(mask, [const(0)] * len(mask.logical))
            if why is not None:
                out.append(Problem(f"online max {m.name} skips the iterations where {mask.name} is false, but {why}: "
                                   f"the mask is no affine comparison of indices, so which iterations it drops whole "
                                   f"cannot be proved", tensor=mask.name, location=m.skip_origin,
                                   hint="compare tp.iota values (broadcast, added to or multiplied by integers) with "
                                        "tp.le / tp.lt / tp.ge / tp.gt"))
    return out


def _masking_where(m):
    """The where(mask, x, -inf) the max's input is (through the tile's max, copies, casts,
    broadcasts, positive scales and adds of values not computed from it), else None."""
    mask = m.skip[0]
    t = m.definition.inputs[0]
    while True:
        op = t.definition
        if op is None:
            return None
        if op.name == "where" and op.inputs[0] is mask and op.scalar is not None and op.scalar.position == 2 \
                and op.scalar.value == -math.inf:
            return t
        if op.kind in (OpKind.LOAD_STORE, OpKind.CAST, OpKind.BROADCAST) or op.name in PASS \
                or (op.kind is OpKind.REDUCTION and op.name == "max" and len(op.inputs) == 1):
            t = op.inputs[0]
            continue
        if op.name == "mul" and _positive(op) and len(op.inputs) == 1:
            t = op.inputs[0]
            continue
        return None


def _positive(op) -> bool:
    v = op.scalar.value if op.scalar is not None else None
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _from(t, source, m=None) -> bool:
    """Whether t is computed from source, but through the running max m (finite: the carried state)."""
    stack, seen = [t], set()
    while stack:
        x = stack.pop()
        if x is source:
            return True
        if x.name in seen or x.definition is None or x is m:
            continue
        seen.add(x.name)
        stack.extend(x.definition.inputs)
    return False


def _minus_inf(t, w, m) -> str | None:
    """None where t is -inf wherever w is (w times a number > 0, plus or minus values not computed
    from w, copied, cast or broadcast), else why not."""
    if t is w:
        return None
    op = t.definition
    if op is None or not _from(t, w, m):
        return f"{t.name} is not computed from {w.name}"
    if op.kind in (OpKind.LOAD_STORE, OpKind.CAST, OpKind.BROADCAST) or op.name in PASS:
        return _minus_inf(op.inputs[0], w, m)
    if op.name == "mul" and len(op.inputs) == 1:
        return _minus_inf(op.inputs[0], w, m) if _positive(op) else \
            f"{t.name} multiplies {w.name} by {op.scalar}, not a number > 0 (-inf would not stay -inf)"
    if op.name in ("add", "sub"):
        if len(op.inputs) == 1:  # t + c, t - c: -inf; c - t: +inf
            if op.name == "sub" and op.scalar.position == 0:
                return f"{t.name} = {op.scalar} - {op.inputs[0].name} is +inf where {w.name} is -inf"
            return _minus_inf(op.inputs[0], w, m)
        a, b = op.inputs
        if _from(b, w, m) and op.name == "add":
            a, b = b, a
        if _from(b, w, m):
            return f"{t.name} = {op.name}({a.name}, {b.name}) reads {w.name} twice (-inf - -inf is NaN)"
        return _minus_inf(a, w, m)
    return f"{t.name} = {op.name}(..) of {w.name} is not {w.name} times a number > 0 plus a value"


def _zero(t, w, m) -> str | None:
    """None where t is 0 wherever w is -inf: exp2 or exp of a -inf (_minus_inf), times or divided
    by values not computed from w, copied, cast, broadcast or summed; else why not."""
    op = t.definition
    if op is None or not _from(t, w, m):
        return f"{t.name} is not computed from {w.name}"
    if op.name in ("exp2", "exp"):
        return _minus_inf(op.inputs[0], w, m)
    if op.kind in (OpKind.LOAD_STORE, OpKind.CAST, OpKind.BROADCAST) or op.name in PASS \
            or (op.kind is OpKind.REDUCTION and op.name == "sum"):
        return _zero(op.inputs[0], w, m)
    if op.name in ("mul", "fms") or (op.name == "div" and (len(op.inputs) == 1 or not _from(op.inputs[1], w, m))):
        if op.name == "div" and len(op.inputs) == 1 and op.scalar.position == 0:
            return f"{t.name} divides by {op.inputs[0].name}, which is 0 where {w.name} is -inf"
        zeros = [x for x in op.inputs if _from(x, w, m)]
        if len(zeros) != 1:
            return f"{t.name} = {op.name}(..) reads {w.name} through {len(zeros)} operands"
        return _zero(zeros[0], w, m)
    return f"{t.name} = {op.name}(..) of {w.name} is not 0 where {w.name} is -inf"


def _identity_problems(fusion, s: SkippedLoop, groups, hint: str) -> list[Problem]:
    """Why a skipped iteration would not leave the max and its sums as they were (module docstring)."""
    m, mask = s.max, s.mask
    if s.where is None:
        return [Problem(f"online max {m.name} skips the iterations where {mask.name} is false, but its input is not "
                        f"where({mask.name}, x, -inf) (through the tile's max, copies, casts and positive scales): "
                        f"a skipped iteration could have grown the max", tensor=m.name, location=m.skip_origin,
                        hint=hint)]
    out = []
    group = groups.groups[s.group]
    for t in m.online:
        terms = t.definition.inputs if t.definition.name == "fms" else t.definition.inputs[:1]
        whys = [_zero(x, s.where, m) for x in terms if _from(x, s.where, m)] or [f"its terms do not read {s.where.name}"]
        why = next((w for w in whys if w is not None), None)
        if why is not None:
            out.append(Problem(f"online max {m.name} skips masked iterations, but the terms of its rescaled sum "
                               f"{t.name} are not 0 where {s.where.name} is -inf: {why}", tensor=t.name,
                               location=m.skip_origin, hint=hint))
    carried = {m.name} | {t.name for t in m.online}
    inside = {tv.name for tv, _ in group.members}
    for tv, k in group.members:
        if tv.name in carried:
            continue
        if tv.loop[k].is_reduction:
            out.append(Problem(f"{tv.name} reduces over online max {m.name}'s loop, which skips masked iterations: "
                               f"skipping drops its terms of those iterations", tensor=tv.name, location=m.skip_origin,
                               hint=f"reduce over the loop in {m.name} or a sum it rescales only, or do not skip"))
        escaping = [c.name for c in fusion.consumers(tv) if c.name not in inside and c.name not in carried]
        if tv.is_fusion_output or escaping:
            what = "is a fusion output" if tv.is_fusion_output else f"is read by {', '.join(escaping)} after it"
            out.append(Problem(f"{tv.name}, computed inside online max {m.name}'s loop, {what}: a skipped iteration "
                               f"would leave its value unwritten", tensor=tv.name, location=m.skip_origin,
                               hint=f"carry values out of the loop only through {m.name} and its rescaled sums"))
    return out


def mask_comparison(mask, logical: list[Expr]) -> tuple[tuple[str, Expr, Expr] | None, str | None]:
    """(comparison, left, right): the mask's element at `logical` is `left comparison right`, two
    affine index expressions; or (None, why not)."""
    op = mask.definition
    if op is None or op.name not in COMPARE or len(op.inputs) + (op.scalar is not None) != 2:
        return None, f"{mask.name} is {op.name if op else 'an input'}(..), not a comparison"
    sides = []
    at = {mask.root[j].uid: e for j, e in enumerate(logical)}
    for k, x in enumerate(op.inputs):
        v, why = _affine(x, producer_logical(op, k, at))
        if why is not None:
            return None, why
        sides.append(v)
    if op.scalar is not None:
        if not isinstance(op.scalar.value, (int, Expr)) or isinstance(op.scalar.value, bool):
            return None, f"{mask.name} compares with {op.scalar}, not an integer"
        sides.insert(op.scalar.position, as_expr(op.scalar.value))
    return (op.name, sides[0], sides[1]), None


def _affine(t, logical: list[Expr]) -> tuple[Expr | None, str | None]:
    """t's integer element at `logical` as an index expression, or (None, why not)."""
    op = t.definition
    if op is None:
        return None, f"{t.name} is a fusion input"
    if t.dtype.is_float:
        return None, f"{t.name} is {t.dtype.name}, not an integer"
    if op.kind is OpKind.IOTA:
        if not all(isinstance(v, int) for v in (op.iota.start, op.iota.step)):
            return None, f"{t.name} is an iota of {t.dtype.name}"
        return add(const(op.iota.start), mul(logical[0], const(op.iota.step))), None
    at = {t.root[j].uid: e for j, e in enumerate(logical)}
    if op.kind in (OpKind.LOAD_STORE, OpKind.CAST, OpKind.BROADCAST) or op.name in PASS:
        if op.kind is OpKind.CAST and op.inputs[0].dtype.is_float:
            return None, f"{t.name} casts {op.inputs[0].name} from {op.inputs[0].dtype.name}"
        return _affine(op.inputs[0], producer_logical(op, 0, at))
    if op.name in ("add", "sub", "mul"):
        parts = []
        for k, x in enumerate(op.inputs):
            v, why = _affine(x, producer_logical(op, k, at))
            if why is not None:
                return None, why
            parts.append(v)
        if op.scalar is not None:
            if not isinstance(op.scalar.value, (int, Expr)) or isinstance(op.scalar.value, bool):
                return None, f"{t.name} = {op.name}(.., {op.scalar}) with a number that is no integer"
            parts.insert(op.scalar.position, as_expr(op.scalar.value))
        a, b = parts
        if op.name == "add":
            return add(a, b), None
        if op.name == "sub":
            return add(a, mul(b, const(-1))), None
        if a.const_value() is None and b.const_value() is None:
            return None, f"{t.name} multiplies two indices (not affine)"
        return mul(a, b), None
    return None, f"{t.name} = {op.name}(..) is not affine in the indices"


__all__ = ["SkippedLoop", "mask_comparison", "named_loops", "skip_problems", "skipped_loops", "trip_counts"]
