"""The loop-invariant divisions of an unrolled loop nest's predicates, named once before it.

A partial tile's predicates repeat its origin, e.g. ((i0 * 8 + blockIdx.x / 16) / 42 * 16 + ...) *
128, in every statement of the nest. Where the tile is not a power of two wide those are real
divisions, and NVVM then leaves an inner `#pragma unroll` loop rolled; a rolled loop indexes the
register arrays with a variable, which puts them in local memory (a 128 x 192 tile's epilogue:
400 bytes of stack a thread). Named, the predicates are small and the nest unrolls.

The pass `name_invariants` rewrites the predicates of each outermost unrolled nest (those the
kernel tests in an `if`: statements', ldmatrix / stmatrix, cp.async and its zero fill, mma issues,
tcgen05 accesses and their loaded elements) and puts an IndexNames node before the nest. The
names stand for the same Expr trees, printed by the same renderer, so every value is the one
proved; only the additions of an index regroup, which unsigned arithmetic leaves unchanged.

Also here: `rewrite_unrolled`, which finds the outermost unrolled nests (whole_tile.py's pass
uses it too), and `sum_terms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from ...execution.statements import Cond
from ...model.expr import Expr, const, var
from ...model.types import Direction
from ..ir import (Compute, CpAsyncCopy, IndexNames, KernelIR, Loop, LoopKind, MatrixCopy, MmaIssue, TmemAccess,
                  WholeTile)

BLOCK_INDICES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_INDICES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def sum_terms(e: Expr, distribute: bool = False) -> list[Expr]:
    """e as the terms of a sum, nested sums flattened; with `distribute`, constant factors
    distributed over sums too: c * (a + b) -> c * a, c * b."""
    if e.op == "add":
        return [t for a in e.args for t in sum_terms(a, distribute)]
    if distribute and e.op == "mul" and len(e.args) == 2:
        scale, inner = sorted(e.args, key=lambda a: a.op != "const")
        if scale.op == "const" and inner.op == "add":
            return [t * scale.value for t in sum_terms(inner, distribute)]
    return [e]


def _divides(e: Expr) -> bool:
    return e.has_op("floordiv") or e.has_op("mod")


class Invariants:
    """Rewrites expressions of one nest: each term that reads only `outer` names (the loops
    around the nest, thread and block indices, parameters) and divides becomes a variable,
    numbered from `first`; `named` maps each named term to its variable."""

    def __init__(self, outer: frozenset[str], names: Mapping[str, str], first: int):
        self.outer, self.names, self.first = outer, names, first
        self.named: dict[Expr, str] = {}

    def rewrite(self, e: Expr) -> Expr:
        if e.op in ("const", "var"):
            return e
        if self._invariant(e):
            return self._name(e) if _divides(e) else e
        if e.op == "add":  # the invariant terms of an index (nested sums too) summed into one name
            terms = sum_terms(e)
            fixed = [a for a in terms if self._invariant(a)]
            rest = [self.rewrite(a) for a in terms if not self._invariant(a)]
            if any(map(_divides, fixed)):
                fixed = [self._name(fixed[0] if len(fixed) == 1 else Expr("add", tuple(fixed)))]
            return Expr("add", tuple(fixed + rest))
        return Expr(e.op, tuple(self.rewrite(a) for a in e.args), e.value)

    def conds(self, conds: list[Cond]) -> list[Cond]:
        """conds with their sides rewritten, in order (each left side before its right)."""
        out = []
        for c in conds:
            lhs = self.rewrite(c.lhs)
            out.append(replace(c, lhs=lhs, rhs=self.rewrite(c.rhs)))
        return out

    def nodes(self, nodes: list) -> list:
        """Copies of nodes with the predicates the kernel tests in an `if` rewritten, in the order
        they are printed."""
        return [self._node(n) for n in nodes]

    def declarations(self) -> IndexNames:
        return IndexNames([(name, e) for e, name in self.named.items()])

    @property
    def count(self) -> int:
        return len(self.named)

    def _node(self, n):
        if isinstance(n, TmemAccess):  # a load writes its elements back each under its own predicate
            elements = [replace(el, data=replace(el.data, conds=self.conds(el.data.conds)))
                        if n.direction is Direction.LOAD else el for el in n.elements]
            return replace(n, elements=elements, conds=self.conds(n.conds))
        if isinstance(n, CpAsyncCopy):  # the zero fill's test is printed first
            zero_fill = self.conds(n.zero_fill)
            return replace(n, zero_fill=zero_fill, conds=self.conds(n.conds))
        if type(n) in (Compute, MatrixCopy, MmaIssue):
            return replace(n, conds=self.conds(n.conds))
        if isinstance(n, Loop) or (hasattr(n, "body") and not isinstance(n, WholeTile)):
            return replace(n, body=self.nodes(n.body))  # loops, a circular buffer's prologue and prefetch
        return n  # a TMA copy tests its issuer and box bounds itself, unnamed

    def _invariant(self, e: Expr) -> bool:
        return all(self.names.get(v, v) in self.outer for v in e.free_vars())

    def _name(self, e: Expr) -> Expr:
        if e not in self.named:
            self.named[e] = f"tp_inv{self.first + len(self.named)}"
        return var(self.named[e])


# -- the outermost unrolled nests ------------------------------------------------------------


@dataclass(frozen=True)
class Around:
    """What surrounds a node: the C++ indices of the counted loops around it (extent 1 excepted: no
    loop is printed), and the extents of the thread loops around it (its statements run below them)."""

    loops: tuple[str, ...] = ()
    threads: Mapping[str, int] = field(default_factory=dict)


def is_unrolled_nest(n) -> bool:
    return isinstance(n, WholeTile) or (isinstance(n, Loop) and n.kind is LoopKind.UNROLL and n.extent != const(1))


def rewrite_unrolled(nodes: list, rewrite: Callable[[Loop | WholeTile, Around], list], around: Around = Around(),
                     is_nest: Callable[[object], bool] = is_unrolled_nest) -> None:
    """Replaces each outermost unrolled nest among `nodes` and the bodies nested in them (an
    unrolled Loop of extent > 1, or a WholeTile; whatever `is_nest` accepts) by the nodes
    rewrite(nest, around) returns."""
    out = []
    for n in nodes:
        if is_nest(n):
            out += rewrite(n, around)
            continue
        inner = around
        if isinstance(n, Loop) and n.kind is LoopKind.THREAD:
            if n.extent.op == "const":
                inner = Around(around.loops, {**around.threads, n.var: n.extent.value})
        elif isinstance(n, Loop) and n.kind is LoopKind.SERIAL and n.extent != const(1):
            inner = Around(around.loops + (n.var,), around.threads)
        if hasattr(n, "body"):  # loops, warp roles and their Roles, a prologue, prefetched copies
            rewrite_unrolled(n.body, rewrite, inner, is_nest)
        out.append(n)
    nodes[:] = out


def block_uniform(ir: KernelIR) -> frozenset[str]:
    """The C++ names that are the same in every thread of a block: block indices, parameters."""
    return frozenset(BLOCK_INDICES) | {p.name for p in ir.params}


# -- the pass --------------------------------------------------------------------------------


def name_invariants(st) -> None:
    """Names the invariant divisions of every outermost unrolled nest's predicates, numbering on
    through the kernel. A WholeTile's are numbered through its lowered nest, its whole tile's,
    then its guard (the order the printer gave them when it named them, so the C++ is unchanged)."""
    ir: KernelIR = st.kernel
    count = 0

    def rewrite(nest, around: Around) -> list:
        nonlocal count
        outer = block_uniform(ir) | set(THREAD_INDICES) | set(around.loops)
        names = Invariants(frozenset(outer), ir.names, count)
        if isinstance(nest, WholeTile):
            (lowered,), (whole,) = names.nodes([nest.lowered]), names.nodes([nest.whole])
            nest = WholeTile(names.conds(nest.guard), whole, lowered)
        else:
            (nest,) = names.nodes([nest])
        count += names.count
        return ([names.declarations()] if names.count else []) + [nest]

    rewrite_unrolled(ir.body, rewrite)
