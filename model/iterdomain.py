"""IterDomain and the transforms between IterDomains, with their index semantics.

Transforms are frozen dataclasses. Each knows how to compute its outputs' indices
from its inputs' (forward, logical -> loop) and its inputs' from its outputs'
(backward, loop -> logical), as `Expr`s of the one index algebra.
"""

from __future__ import annotations

import abc
import enum
import itertools
import operator
from dataclasses import dataclass
from typing import Callable, Mapping

import sympy

from .errors import ScheduleError, user_location
from .expr import Expr, add, ceildiv, const, floordiv, from_sympy, mod, mul, to_sympy, try_int, var, xor
from .types import IterType, ParallelType
from .notation import user_str

_uids = itertools.count()
_PREFIX = {IterType.Iteration: "i", IterType.Broadcast: "b", IterType.Reduction: "r"}

Numbers = Callable[[], int]  # a fusion's IterDomain numbering: the next number on each call


class IterDomain:
    """One axis of iteration. Its parallel type is the only thing a schedule mutates.

    `uid` is the internal key, unique in the process; `number` names it (`i7`), counted per
    fusion in creation order as nvFuser names its IterDomains, so that a schedule prints the
    same names whatever else the process built."""

    __slots__ = ("uid", "number", "extent_expr", "iter_type", "parallel_type", "definition", "origin",
                 "parallel_origin")

    def __init__(self, extent: Expr, *, number: int, iter_type: IterType = IterType.Iteration,
                 origin: str | None = None):
        self.uid = next(_uids)
        self.number = number
        self.extent_expr = extent
        self.iter_type = iter_type
        self.parallel_type = ParallelType.Serial
        self.definition: Transform | None = None
        self.origin = origin  # user file:line where the transform creating it was written
        self.parallel_origin: str | None = None  # user file:line that set the parallel type

    @property
    def extent(self) -> sympy.Expr:
        """The extent as a sympy expression (an Integer when concrete)."""
        return to_sympy(self.extent_expr)

    @property
    def static_extent(self) -> int | None:
        """The extent as an int when it is a constant, else None (a symbolic extent)."""
        return try_int(self.extent_expr)

    @property
    def is_broadcast(self) -> bool:
        """Whether this is a broadcast axis (extent 1, IterType.Broadcast); nvFuser's isBroadcast()."""
        return self.iter_type is IterType.Broadcast

    @property
    def is_reduction(self) -> bool:
        """Whether this is a reduction axis (IterType.Reduction): tp.sum / tp.max combine the values
        along it, and it is not in the output's shape; nvFuser's isReduction()."""
        return self.iter_type is IterType.Reduction

    @property
    def name(self) -> str:
        """`i7` (`b3` for a broadcast axis, `r5` for a reduction axis): the name the schedule tree,
        diagnostics and pictures use for this IterDomain, numbered per fusion."""
        return f"{_PREFIX[self.iter_type]}{self.number}"

    def parallelize(self, parallel_type: ParallelType) -> "IterDomain":
        """Bind this loop axis to `parallel_type` (tp.ParallelType: BIDx.., TIDx.., Bulk for a
        TMA tile, Vectorize, Unroll, Serial to undo); returns self. The verifier checks that the
        binding is legal where it is used. nvFuser: IterDomain::parallelize(parallel_type).

            tv.axis(-1).parallelize(tp.ParallelType.TIDx)"""
        if not isinstance(parallel_type, ParallelType):
            raise wrong_enum("parallelize", "parallel_type", ParallelType, parallel_type)
        if parallel_type is ParallelType.Group and parallel_type is not self.parallel_type:
            _check_groupable(self)
        self.set_parallel_type(parallel_type, user_location())
        return self

    def set_parallel_type(self, parallel_type: ParallelType, origin: str | None) -> None:
        """Bind the parallel type, remembering the user's line that did (diagnostics point there)."""
        self.parallel_type = parallel_type
        self.parallel_origin = origin

    def label(self) -> str:
        """nvFuser-like: `TIDx{128}`, `i7{64}` (serial), `b3{1}` (broadcast), `r5{N}` (a serial
        reduction axis), `rTIDx{128}` (a parallel one)."""
        ext = user_str(self.extent)
        if self.parallel_type is not ParallelType.Serial:
            return f"{'r' if self.is_reduction else ''}{self.parallel_type.value}{{{ext}}}"
        return f"{self.name}{{{ext}}}"

    def __repr__(self) -> str:
        return self.label()


def _check_groupable(i: IterDomain) -> None:
    """nvFuser's IterDomain::parallelize: grouping takes an iteration axis of constant extent."""
    if i.iter_type is not IterType.Iteration:
        raise ScheduleError(f"parallelize: {i.label()} is a {i.iter_type.name.lower()} axis; ParallelType.Group "
                            f"groups the reductions of an iteration axis of a reduction's output")
    if i.static_extent is None:
        raise ScheduleError(f"parallelize: {i.label()} has the symbolic extent {user_str(i.extent)}; ParallelType.Group "
                            f"needs a constant extent (split it by a constant first)")


@dataclass(frozen=True, eq=False)
class Transform(abc.ABC):
    """Base class of Split, Merge and Swizzle (frozen): `inputs` and `outputs` are IterDomains,
    `forward` and `backward` carry indices across the transform."""

    @property
    @abc.abstractmethod
    def inputs(self) -> tuple[IterDomain, ...]:
        """The IterDomains the transform consumes (towards the logical domain)."""

    @property
    @abc.abstractmethod
    def outputs(self) -> tuple[IterDomain, ...]:
        """The IterDomains the transform produces (towards the loop domain)."""

    @abc.abstractmethod
    def forward(self, idx: Mapping[IterDomain, Expr]) -> dict[IterDomain, Expr]:
        """Output indices from input indices (logical towards loop)."""

    @abc.abstractmethod
    def backward(self, idx: Mapping[IterDomain, Expr]) -> dict[IterDomain, Expr]:
        """Input indices from output indices (loop towards logical)."""


@dataclass(frozen=True, eq=False)
class Split(Transform):
    """`in = outer * inner_extent + inner`. An inner split fixes the inner extent to
    `factor`, an outer split fixes the outer extent to `factor`. Recorded by TensorView.split
    (nvFuser's Split expression); `in_`, `outer`, `inner`, `factor`, `inner_split` are its fields."""

    in_: IterDomain
    outer: IterDomain
    inner: IterDomain
    factor: Expr
    inner_split: bool = True

    @property
    def inputs(self):
        return (self.in_,)

    @property
    def outputs(self):
        return (self.outer, self.inner)

    def forward(self, idx):
        i = idx[self.in_]
        e = self.inner.extent_expr
        return {self.outer: floordiv(i, e), self.inner: mod(i, e)}

    def backward(self, idx):
        return {self.in_: add(mul(idx[self.outer], self.inner.extent_expr), idx[self.inner])}

    def __str__(self) -> str:
        kind = "split" if self.inner_split else "outer split"
        return f"{kind} {self.in_.label()} by {self.factor} -> {self.outer.label()}, {self.inner.label()}"

    @staticmethod
    def make(in_: IterDomain, factor: Expr, inner_split: bool, origin: str | None, numbers: Numbers) -> "Split":
        """A split of `in_` by `factor` with fresh outputs (ceildiv(extent, factor) and factor, or
        the other way round for an outer split), numbered by `numbers` (the fusion's numbering);
        `origin` is the user's file:line. TensorView.split calls it; it does not touch any tensor."""
        n = in_.extent_expr
        if inner_split:
            outer_ext, inner_ext = ceildiv(n, factor), factor
        else:
            outer_ext, inner_ext = factor, ceildiv(n, factor)
        t = Split(
            in_,
            IterDomain(outer_ext, number=numbers(), iter_type=in_.iter_type, origin=origin),
            IterDomain(inner_ext, number=numbers(), iter_type=in_.iter_type, origin=origin),
            factor,
            inner_split,
        )
        t.outer.definition = t
        t.inner.definition = t
        return t

    @property
    def divided(self) -> Expr:
        """The extent that must be a multiple of the factor for the split to be divisible."""
        return self.in_.extent_expr


@dataclass(frozen=True, eq=False)
class Merge(Transform):
    """`out = outer * inner_extent + inner`. Recorded by TensorView.merge (nvFuser's Merge
    expression); `outer`, `inner`, `out` are its fields."""

    outer: IterDomain
    inner: IterDomain
    out: IterDomain

    @property
    def inputs(self):
        return (self.outer, self.inner)

    @property
    def outputs(self):
        return (self.out,)

    def forward(self, idx):
        return {self.out: add(mul(idx[self.outer], self.inner.extent_expr), idx[self.inner])}

    def backward(self, idx):
        o, e = idx[self.out], self.inner.extent_expr
        return {self.outer: floordiv(o, e), self.inner: mod(o, e)}

    def __str__(self) -> str:
        return f"merge {self.outer.label()}, {self.inner.label()} -> {self.out.label()}"

    @staticmethod
    def make(outer: IterDomain, inner: IterDomain, origin: str | None, numbers: Numbers) -> "Merge":
        """A merge of `outer` and `inner` into a fresh IterDomain of extent outer x inner, numbered
        by `numbers`; `origin` is the user's file:line. TensorView.merge calls it; it does not
        touch any tensor."""
        it = IterType.Broadcast if outer.is_broadcast and inner.is_broadcast else IterType.Iteration
        if outer.is_reduction and inner.is_reduction:
            it = IterType.Reduction  # TensorView.merge refuses a reduction merged with another kind
        out = IterDomain(mul(outer.extent_expr, inner.extent_expr), number=numbers(), iter_type=it, origin=origin)
        t = Merge(outer, inner, out)
        t.out.definition = t
        return t


@dataclass(frozen=True, eq=False)
class Swizzle(Transform):
    """XOR swizzle `(x, y) -> (x, x ^ y)`; its own inverse. Recorded by TensorView.swizzle
    (nvFuser's Swizzle expression); `x_in`, `y_in`, `x_out`, `y_out` are its fields."""

    x_in: IterDomain
    y_in: IterDomain
    x_out: IterDomain
    y_out: IterDomain
    # the tensor's loop domain when TensorView.swizzle was called: the user's axis numbers are
    # positions in it (diagnostics name a fix in them); empty for a swizzle made by propagation
    loop: tuple[IterDomain, ...] = ()

    @property
    def inputs(self):
        return (self.x_in, self.y_in)

    @property
    def outputs(self):
        return (self.x_out, self.y_out)

    def forward(self, idx):
        x, y = idx[self.x_in], idx[self.y_in]
        return {self.x_out: x, self.y_out: xor(x, y)}

    def backward(self, idx):
        x, y = idx[self.x_out], idx[self.y_out]
        return {self.x_in: x, self.y_in: xor(x, y)}

    def __str__(self) -> str:
        return f"xor swizzle ({self.x_in.label()}, {self.y_in.label()}) -> {self.x_out.label()}, {self.y_out.label()}"

    @staticmethod
    def make(x: IterDomain, y: IterDomain, origin: str | None, numbers: Numbers, *,
             loop: tuple[IterDomain, ...] = ()) -> "Swizzle":
        """An XOR swizzle of `x` and `y` with fresh outputs of the same extents, numbered by
        `numbers`; `origin` is the user's file:line, `loop` the loop domain it was called on.
        TensorView.swizzle calls it; it does not touch any tensor."""
        t = Swizzle(x, y, IterDomain(x.extent_expr, number=numbers(), origin=origin, iter_type=_swizzled(x)),
                    IterDomain(y.extent_expr, number=numbers(), origin=origin, iter_type=_swizzled(y)), tuple(loop))
        t.x_out.definition = t
        t.y_out.definition = t
        return t


def replay(t: "Split | Merge | Swizzle", ins: list[IterDomain], numbers: Numbers) -> "Split | Merge | Swizzle":
    """Transform t made again on `ins` (in the order of t.inputs), with fresh outputs numbered by
    `numbers` and t's origin: how propagation, rfactor and a group's rfactor replay a history."""
    if isinstance(t, Split):
        return Split.make(ins[0], t.factor, t.inner_split, t.outer.origin, numbers)
    if isinstance(t, Merge):
        return Merge.make(ins[0], ins[1], t.out.origin, numbers)
    if isinstance(t, Swizzle):
        return Swizzle.make(ins[0], ins[1], t.x_out.origin, numbers)
    raise TypeError(f"unknown transform {t!r}")  # pragma: no cover - every transform kind is listed above


def _swizzled(i: IterDomain) -> IterType:
    """A swizzle output keeps a reduction axis's kind (TensorView.swizzle refuses mixing kinds)."""
    return IterType.Reduction if i.is_reduction else IterType.Iteration


def wrong_enum(func: str, arg: str, kind: type[enum.Enum], value) -> ScheduleError:
    """The error for a value that should be a member of `kind`: names the function, the
    argument and the value, and the member a string such as "TIDx" meant."""
    spelled = value.lower() if isinstance(value, str) else None
    meant = next((m for m in kind if spelled in (m.name.lower(), str(m.value).lower())), None)
    fix = f"; use tp.{kind.__name__}.{meant.name}" if meant is not None else ""
    return ScheduleError(f"{func}: expected a tp.{kind.__name__} for {arg}, got {type(value).__name__} {value!r}{fix}")


def as_index(value) -> int | None:
    """value as a Python int when it is an integer (int, numpy integer; not a bool), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (float, str, sympy.Basic)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_factor(op: str, factor) -> Expr:
    """A split factor: a positive int, or a symbol name / sympy symbol or integer expression
    of symbols (a symbolic factor)."""
    def refuse(shown: str) -> ScheduleError:
        return ScheduleError(f"{op}: factor must be a positive int or symbol, got {shown}")

    if isinstance(factor, str):
        if factor.isidentifier():
            return var(factor)
        raise refuse(f"str {factor!r}")
    if isinstance(factor, sympy.Basic):
        if factor.is_Integer:
            if int(factor) <= 0:
                raise refuse(str(factor))
            return const(int(factor))
        if not factor.free_symbols or any(not n.is_Integer for n in factor.atoms(sympy.Number)):
            raise refuse(f"{factor}, not an integer expression of symbols")
        try:
            return from_sympy(factor)
        except ValueError as e:  # an expression the index algebra has no op for, e.g. sin(N)
            raise refuse(f"{factor} ({e})") from None
    n = as_index(factor)
    if n is None:
        raise refuse(f"{type(factor).__name__} {factor!r}")
    if n <= 0:
        raise refuse(str(n))
    return const(n)
