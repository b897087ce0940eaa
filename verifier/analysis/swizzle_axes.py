"""A user's XOR swizzle call, and the same call aimed at other loop axes.

`TensorView.swizzle(XOR, x, y)` records the loop domain it was called on (Swizzle.loop), so a
diagnostic can name a swizzle by the axis numbers the user wrote and propose another call in the
same numbers. `reaimed` builds a copy of the fusion in which the call XORs two other axes of
that loop domain, every later transform, the loop and the allocation domain taking the new IDs
at the same positions: what the schedule would be had the user written the other call. Rules
verify the copy to decide whether a proposed call fixes what they found (nothing is proved
about the user's schedule from it).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import linecache
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ...model.expr import try_int
from ...model.fusion import Fusion
from ...model.iterdomain import IterDomain, Swizzle, Transform
from ...model.tensor import TensorView
from ...model.types import ParallelType
from ..context import VerifyContext

CALL = re.compile(r"([A-Za-z_][\w.]*(?:\[[^\]]*\])?)\s*\.swizzle\(")


@dataclass(frozen=True)
class SwizzleCall:
    """One `tv.swizzle(tp.SwizzleType.XOR, x, y)` of the user: the tensor, the transform (its
    index in the tensor's history) and the loop positions it was given."""

    tensor: TensorView
    index: int
    x: int
    y: int

    @property
    def swizzle(self) -> Swizzle:
        return self.tensor.history[self.index]

    @property
    def loop(self) -> tuple[IterDomain, ...]:
        return self.swizzle.loop

    def extent(self, position: int) -> int | None:
        return try_int(self.loop[position].extent_expr)

    def receiver(self) -> str:
        """How the user's code names the tensor at the call (`t1`), else its name (`T1`)."""
        line = source_line(self.swizzle.x_out.origin)
        calls = CALL.findall(line or "")
        return calls[0] if len(set(calls)) == 1 else self.tensor.name

    def text(self, x: int | None = None, y: int | None = None) -> str:
        """The call in Python, on positions x and y (default: the user's)."""
        x, y = (self.x, self.y) if x is None else (x, y)
        return f"{self.receiver()}.swizzle(tp.SwizzleType.XOR, {x}, {y})"

    def written(self) -> str:
        """The user's call as written on its line when the line holds exactly this call with
        literal axes, else as text() spells it."""
        line = source_line(self.swizzle.x_out.origin) or ""
        found = [m for m in re.finditer(CALL, line)]
        if len(found) == 1:
            start, depth = found[0].start(), 0
            for k in range(found[0].end() - 1, len(line)):
                depth += (line[k] == "(") - (line[k] == ")")
                if depth == 0:
                    text = line[start:k + 1]
                    if _literal_axes(text) == (self.x, self.y):
                        return text
                    break
        return self.text()


def swizzle_calls(tv: TensorView) -> list[SwizzleCall]:
    """The XOR swizzles the user called on tv (not those propagated onto it), in order."""
    out = []
    for k, t in enumerate(tv.history):
        if isinstance(t, Swizzle) and t.loop and t.x_in in t.loop and t.y_in in t.loop:
            out.append(SwizzleCall(tv, k, t.loop.index(t.x_in), t.loop.index(t.y_in)))
    return out


def reaimed(fusion: Fusion, call: SwizzleCall, x: int, y: int) -> Fusion:
    """A copy of `fusion` in which `call` XORs loop positions x and y of its loop domain instead.

    The user's swizzle is undone (its outputs become its inputs again) and a swizzle of the IDs
    at x and y is recorded in its place; whatever took the IDs at those positions afterwards
    (later transforms, the loop and allocation domains, parallel types) takes the new IDs."""
    memo: dict[int, object] = {}
    copied = copy.deepcopy(fusion, memo)
    tv: TensorView = memo[id(call.tensor)]  # type: ignore[assignment]
    old: Swizzle = tv.history[call.index]  # type: ignore[assignment]
    later = tv.history[call.index + 1:]
    # undo: the user's outputs are its inputs again, with the outputs' parallel types
    undo = {old.x_out: old.x_in, old.y_out: old.y_in}
    for out, back in undo.items():
        back.set_parallel_type(out.parallel_type, out.parallel_origin)
    a, b = old.loop[x], old.loop[y]
    new = Swizzle.make(a, b, old.x_out.origin, copied.next_iterdomain_number, loop=old.loop)
    aim = {a: new.x_out, b: new.y_out}
    for source, target in aim.items():
        target.set_parallel_type(source.parallel_type, source.parallel_origin)
        source.set_parallel_type(ParallelType.Serial, None)
    rewired = [_rewire(t, undo) for t in later]
    rewired = [_rewire(t, aim) for t in rewired]
    tv.history[call.index:] = [new] + rewired

    def place(ids):
        return [aim.get(undo.get(i, i), undo.get(i, i)) for i in ids]

    tv.loop = place(tv.loop)
    if tv.allocation is not None:
        tv.allocation = place(tv.allocation)
    return copied


def _rewire(t: Transform, mapping: dict[IterDomain, IterDomain]) -> Transform:
    """t with each input found in `mapping` replaced (its outputs now defined by the copy)."""
    inputs = {id(i) for i in t.inputs}
    changes = {f.name: mapping[v] for f in dataclasses.fields(t)
               if isinstance(v := getattr(t, f.name), IterDomain) and id(v) in inputs and v in mapping}
    if not changes:
        return t
    new = dataclasses.replace(t, **changes)
    for o in new.outputs:
        o.definition = new
    return new


def source_line(location: str | None) -> str | None:
    if not location or ":" not in location:
        return None
    path, _, line = location.rpartition(":")
    if not line.isdigit():
        return None
    return linecache.getline(path, int(line)) or None


def _literal_axes(call: str) -> tuple[int, int] | None:
    """(x, y) of a swizzle call written with literal int axes, else None."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or len(node.args) != 3:
        return None
    axes = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, int) else None for a in node.args[1:]]
    return None if None in axes else (axes[0], axes[1])


@dataclass(frozen=True)
class Reaimed:
    """A swizzle call aimed at loop positions x and y, and the verify context of the fusion
    with that call in place of the user's (verified by the rule that proposed it)."""

    call: SwizzleCall
    x: int
    y: int
    fixed: VerifyContext

    def text(self) -> str:
        return self.call.text(self.x, self.y)


def first_fix(ctx: VerifyContext, call: SwizzleCall, positions: Iterable[tuple[int, int]],
              fixes: Callable[[VerifyContext], bool], *, tries: int = 6) -> Reaimed | None:
    """The first of `positions` (at most `tries` of them) whose re-aimed call `fixes` the fusion,
    judged on a copy; the copy's queries count towards ctx's."""
    for x, y in list(positions)[:tries]:
        # judged by its verdicts: the copy's counterexamples are never shown, so none is shrunk
        fixed = VerifyContext(reaimed(ctx.fusion, call, x, y), ctx.target, ctx.bind, shrink_seconds=0)
        try:
            ok = fixes(fixed)
        except Exception:  # noqa: BLE001 - a candidate the rules cannot judge is not proposed
            ok = False
        ctx.queries += fixed.queries
        if ok:
            return Reaimed(call, x, y, fixed)
    return None
