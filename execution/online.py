"""How an online max and its rescaled sums run (model/online.py), derived once for the verifier
(rule ONLINE-RESCALE) and the code generator (codegen/lower/reduction.py).

An online max m reduces one serial loop L (the loop over tiles; its tile's part rfactored): its
store runs inside L after each accumulation (execution/reduction.py phases), and before it the
online store keeps delta = m_new - m_old per element (0 where they are equal, +inf the first
time, where m_old is the -inf it starts at). A rescaled sum T sums over L too; its accumulation
is acc = acc * exp2(a delta) + term, with delta read at the row the term reads m.

Why that is the sum the fusion means: if every term of T is exp2(a m) times a value m does not
change, then with m_k the max after iteration k, acc_k = sum over j <= k of term_j(m_k) (by
induction: term_j(m_k) = term_j(m_{k-1}) exp2(a (m_k - m_{k-1}))), so after L it holds every term at
the final max. `coefficient` proves the form by walking the ops from T's terms to m (exp2 or exp
of an affine function of m, times, divided or summed over axes of one tile) and returns a; a < 0
(the terms shrink as the max grows), so the first factor exp2(a inf) is 0 and multiplies the
accumulator's initial 0. What else reads the running value must end in such sums (it would
otherwise escape with a max that is not the final one).

Imports model/ and execution/ only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model.online import online_max, rescaled_in_place
from ..model.reduction import is_reduction_tensor
from ..model.types import OpKind, ParallelType
from ..model.expr import const
from .clipped_holes import reduced_at_holes
from .derive import per_fusion
from .indexing import indices_from_logical
from .statements import Cond, CondKind
from .loops import execution_order, loop_groups
from .problems import Problem

SERIAL = (ParallelType.Serial, ParallelType.Unroll)
LINEAR = ("set", "broadcast", "cast", "neg")  # ops whose output is its input up to rounding and sign


@dataclass(frozen=True)
class RescaledSum:
    """Sum `tensor` rescaled by online max `max`: acc *= exp2(coefficient * delta) per iteration of
    the max's loop; `in_place`: an MmaOp's accumulators, multiplied by a statement of their own
    (Phase.RESCALE) before the iteration's products; otherwise in the accumulation itself (the
    sum's one reduction loop is the max's)."""

    tensor: object
    max: object
    coefficient: float
    in_place: bool = False


def delta_name(m) -> str:
    """The C++ name of an online max's per-element growth in the last iteration."""
    return f"tp_delta_{m.name}"


@per_fusion
def rescaled_sums(fusion) -> dict[str, RescaledSum]:
    """name -> RescaledSum for every rescaled sum whose form holds (online_problems says why not)."""
    return {r.tensor.name: r for r in _derived(fusion)[0]}


def online_problems(fusion) -> list[Problem]:
    """Why an online max or a rescaled sum cannot run as its values mean (ONLINE-RESCALE)."""
    return list(_derived(fusion)[1])


@per_fusion
def _derived(fusion) -> tuple[tuple[RescaledSum, ...], tuple[Problem, ...]]:
    order = execution_order(fusion)
    computed = {t.name for t in order}
    maxes = [t for t in order if t.online is not None]
    if not maxes:
        return (), ()
    groups = loop_groups(fusion, order)
    sums, problems = [], []
    for m in maxes:
        loop, why = _online_loop(m)
        if loop is None:
            problems.append(Problem(f"online max {m.name} {why}", hint=f"split {m.name}'s reduced axis into tiles and "
                                    f"rfactor the tile's part: {m.name} then reduces the serial loop over tiles only",
                                    tensor=m.name, location=m.online_origin))
            continue
        group = groups.of[(m.name, loop)]
        for t in m.online:
            if t.name not in computed:
                continue
            k, why = _online_loop(t, inner=rescaled_in_place(t))
            if k is None:
                problems.append(Problem(f"rescaled sum {t.name} {why}", tensor=t.name, location=m.online_origin,
                                        hint=f"rfactor {t.name}'s tile part: it then sums the loop over tiles only"))
                continue
            if groups.of[(t.name, k)] is not group:
                problems.append(Problem(f"rescaled sum {t.name} sums over loop {k} ({t.loop[k].label()}), not the loop "
                                        f"of online max {m.name} ({m.loop[loop].label()}): its accumulator would be "
                                        f"rescaled by a max of other iterations", tensor=t.name,
                                        location=t.compute_at_origin or m.online_origin,
                                        hint=f"inline {t.name}'s terms into {m.name}'s loop over tiles"))
                continue
            terms = t.definition.inputs if rescaled_in_place(t) else t.definition.inputs[:1]  # an MmaOp's products
            parts = [coefficient(x, m) for x in terms]
            why = next((w for _, w in parts if w is not None), None)
            a = None if why is not None else sum(c for c, _ in parts)
            if why is not None or a is None or not a < 0:
                values = term_values(terms[0], m) if len(terms) == 1 else {}
                if why is None:
                    why = (f"its terms grow with {m.name} (exp2({a:g} {m.name}) times a value): the first rescale, "
                           f"exp2({a:g} (m - -inf)), would be inf times the accumulator's 0")
                    values = {"coefficient": a, **values}
                problems.append(Problem(f"rescaled sum {t.name}: {why}", tensor=t.name, values=values,
                                        location=t.definition.inputs[0].origin or m.online_origin,
                                        hint=f"rescale only sums of exp2((x - {m.name}) c) with c > 0 (or exp) times "
                                             f"values {m.name} does not change"))
                continue
            sums.append(RescaledSum(t, m, a, rescaled_in_place(t)))
        problems += _escapes(fusion, m, group, groups)
    return tuple(sums), tuple(problems)


def rescale_indices(tv, ex) -> dict:
    """The indices of every ID of the online max that rescales MmaOp tv, at the point `ex` of tv
    (its C fragment's element): the max's logical axes read through tv's root axes (rescale_map)."""
    op = tv.definition
    m = op.rescale_max
    logical = [None] * len(m.logical)
    for j, a in enumerate(op.rescale_map):
        if a is not None:
            logical[a] = ex.indices[tv.root[j].uid]
    logical = [e if e is not None else const(0) for e in logical]  # its reduction axis: no element's
    return indices_from_logical(m, logical)


def rescale_conds(tv, ex, conds) -> list:
    """Where MmaOp tv's rescale runs at the point `ex` of its C fragment, from `conds` (its store's):
    the rows (each root axis the max is read through) within their extents; rows past them are
    holes of the tile, which no store reads and for which the max stored nothing. Where the max is
    computed at its rows' holes too (clipped_holes.reduced_at_holes: a register max), it stored
    its growth there, and the rescale runs at every element of the fragment without a hole
    predicate: a row past M holds values no store reads (attention's last row tile, unbranched)."""
    m = rescaled_sums(tv.fusion)[tv.name].max
    if m.name in reduced_at_holes(tv.fusion):
        return [c for c in conds if c.kind is not CondKind.HOLE]
    op = tv.definition
    return list(conds) + [Cond(ex.indices[tv.root[j].uid], "<", tv.root[j].extent_expr,
                               f"{tv.root[j].label()} within its extent", CondKind.HOLE)
                          for j, a in enumerate(op.rescale_map) if a is not None]


def online_loop(tv) -> tuple[int | None, str]:
    """The position of online max tv's loop over tiles (its one serial reduction axis), or None and why."""
    return _online_loop(tv)


def _online_loop(tv, inner: bool = False) -> tuple[int | None, str]:
    """The position of tv's one reduction axis, a serial loop; else None and why. `inner`: an
    MmaOp rescaled in place, whose first reduction axis is the loop and whose others (its K
    steps, the instruction's K) lie inside it, none across threads or blocks."""
    reduced = [k for k, i in enumerate(tv.loop) if i.is_reduction]
    if inner and reduced:
        across = [tv.loop[k].label() for k in reduced[1:] if tv.loop[k].parallel_type not in SERIAL + (ParallelType.Mma,)]
        if across:
            return None, (f"reduces {', '.join(across)} across threads or blocks: each thread's accumulators must hold "
                          f"whole sums at the running max")
        reduced = reduced[:1]
    if len(reduced) != 1:
        return None, (f"reduces {len(reduced)} loop axes ({', '.join(tv.loop[k].label() for k in reduced)}); "
                      f"online it reduces one, the loop over tiles")
    k = reduced[0]
    if tv.loop[k].parallel_type not in SERIAL:
        return None, (f"reduces axis {k} ({tv.loop[k].label()}) on {tv.loop[k].parallel_type.value}; the running "
                      f"value needs one serial loop")
    return k, ""


def coefficient(tv, m) -> tuple[float | None, str | None]:
    """a where every element of tv is exp2(a m) times a value m does not change (0: tv does not
    read m), or None and why not."""
    if tv is m:
        return None, f"it reads {m.name} outside an exponent"
    if not _reads(tv, m):
        return 0.0, None
    op = tv.definition
    if op.name in ("exp2", "exp"):
        b, why = _slope(op.inputs[0], m)
        if why is not None:
            return None, why
        return (b if op.name == "exp2" else b * math.log2(math.e)), None
    terms = [coefficient(t, m) for t in op.inputs]
    bad = next((why for _, why in terms if why is not None), None)
    if bad is not None:
        return None, bad
    values = [a for a, _ in terms]
    if op.kind is OpKind.LOAD_STORE or op.kind is OpKind.CAST or op.name in LINEAR:
        return values[0], None
    if op.name in ("mul", "fms") or (op.kind is OpKind.REDUCTION and op.name == "sum"):
        return sum(values), None
    if op.name == "div" and op.scalar is None:
        return values[0] - values[1], None
    if op.name == "div" and op.scalar.position == 1:
        return values[0], None
    return None, f"{tv.name} = {op.name}(..) of {m.name}'s running value is not exp2(a {m.name}) times a value {m.name} does not change"


_UNARY = {"exp": math.exp, "exp2": lambda v: 2.0 ** v, "log": math.log, "log2": math.log2, "sqrt": math.sqrt,
          "tanh": math.tanh, "erf": math.erf, "neg": lambda v: -v, "abs": abs, "relu": lambda v: max(v, 0.0),
          "reciprocal": lambda v: 1.0 / v, "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v))}
_BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
           "maximum": max, "minimum": min, "pow": lambda a, b: a ** b, "fms": lambda a, b: a * b}


def term_values(tv, m) -> dict[str, float]:
    """A counterexample to one factor: a term of tv (every input element 1) at maxima 0, 1 and 2.
    Where exp2(a m) times a constant, each is the last times exp2(a); other ratios show no single
    factor rescales it. Empty where an op has no formula here."""
    out = {}
    for at in (0.0, 1.0, 2.0):
        try:
            value = _value(tv, m, at, {})
        except (KeyError, ValueError, ZeroDivisionError, OverflowError, TypeError):
            return {}
        out[f"term at max {at:g}"] = round(value, 6)
    return out


def _value(tv, m, at: float, memo: dict) -> float:
    """tv's element with m = at and every input element 1 (a reduction: one term)."""
    if tv is m:
        return at
    if tv.name in memo:
        return memo[tv.name]
    op = tv.definition
    if op is None:
        return 1.0
    args = [_value(t, m, at, memo) for t in op.inputs]
    if op.scalar is not None:
        args.insert(op.scalar.position, float(op.scalar.value))
    if op.kind in (OpKind.LOAD_STORE, OpKind.CAST, OpKind.BROADCAST, OpKind.TRANSPOSE) or op.kind is OpKind.REDUCTION \
            and op.name in ("sum", "max", "min"):
        value = args[0]
    elif len(args) == 1:
        value = _UNARY[op.name](args[0])
    else:
        value = _BINARY[op.name](*args[:2])
    memo[tv.name] = value
    return value


def _slope(tv, m) -> tuple[float, str | None]:
    """b where tv = b m + a value m does not change, or why tv is not affine in m."""
    if tv is m:
        return 1.0, None
    if not _reads(tv, m):
        return 0.0, None
    op = tv.definition
    if is_reduction_tensor(tv):
        return 0.0, f"the exponent reduces {tv.name} over {m.name}'s running value"
    parts = [_slope(t, m) for t in op.inputs]
    bad = next((why for _, why in parts if why is not None), None)
    if bad is not None:
        return 0.0, bad
    slopes = [b for b, _ in parts]
    number = op.scalar.value if op.scalar is not None and isinstance(op.scalar.value, (int, float)) else None
    if op.kind is OpKind.LOAD_STORE or op.kind is OpKind.CAST or op.name in ("set", "broadcast"):
        return slopes[0], None
    if op.name == "neg":
        return -slopes[0], None
    if op.name in ("add", "sub"):
        sign = -1.0 if op.name == "sub" else 1.0
        if op.scalar is not None:  # t - c, c - t, t + c
            return (sign if op.scalar.position == 0 else 1.0) * slopes[0], None
        return slopes[0] + sign * slopes[1], None
    if op.name == "mul" and number is not None:
        return number * slopes[0], None
    if op.name == "div" and number is not None and op.scalar.position == 1 and number != 0:
        return slopes[0] / number, None
    return 0.0, f"the exponent {tv.name} = {op.name}(..) is not {m.name} times a number plus a value {m.name} does not change"


def _reads(tv, m) -> bool:
    """Whether tv is computed from m (m's running value, not through a rescaled sum's total)."""
    stack, seen = [tv], set()
    while stack:
        t = stack.pop()
        if t is m:
            return True
        if t.name in seen or t.definition is None or (t is not tv and online_max(t) is m):
            continue
        seen.add(t.name)
        stack.extend(t.definition.inputs)
    return False


def _escapes(fusion, m, group, groups) -> list[Problem]:
    """Values computed inside m's loop from its running value that reach anything but m's rescaled
    sums (an output, or a statement after the loop): they belong to a max that is not the final one.
    A consumer of m itself after the loop reads the final max."""
    rescaled = {t.name for t in m.online}
    outputs = {t.name for t in fusion.outputs}

    def inside(t) -> bool:
        return (t.name, 0) in groups.of and any(groups.of[(t.name, k)] is group for k in range(len(t.loop)))

    out, seen = [], set()
    stack = [(c, m) for c in fusion.consumers(m) if c.name not in rescaled and inside(c)]
    while stack:
        t, source = stack.pop()
        if t.name in seen or (t.name, 0) not in groups.of:
            continue  # seen, or not computed
        seen.add(t.name)
        if not inside(t):
            out.append(Problem(f"{t.name} reads {source.name} after online max {m.name}'s loop, but {source.name} was "
                               f"computed inside it from the running max: its values are at each iteration's max",
                               tensor=t.name, location=t.origin, hint=f"read {source.name} only in rescaled sums of {m.name} "
                                                   f"(set_online's rescale) or inside the loop"))
            continue
        if t.name in outputs:
            out.append(Problem(f"{t.name}, computed inside online max {m.name}'s loop from its running value, is a "
                               f"fusion output: each iteration's value is at that iteration's max", tensor=t.name,
                               location=t.origin, hint=f"output what a rescaled sum of {m.name} computes, or compute {t.name} after "
                                    f"{m.name}'s loop"))
        stack += [(c, t) for c in fusion.consumers(t) if c.name not in rescaled]
    return out


__all__ = ["RescaledSum", "coefficient", "delta_name", "online_loop", "online_problems", "rescale_conds", "rescale_indices",
           "rescaled_sums",
           "term_values"]
