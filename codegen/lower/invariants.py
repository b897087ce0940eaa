"""Loop-invariant divisions, named once at the outermost point where they can be computed.

A partial tile's predicates repeat its origin, e.g. ((i0 * 8 + blockIdx.x / 16) / 42 * 16 + ...) *
128, in every statement of the nest. Where the tile is not a power of two wide those are real
divisions, and NVVM then leaves an inner `#pragma unroll` loop rolled; a rolled loop indexes the
register arrays with a variable, which puts them in local memory (a 128 x 192 tile's epilogue:
400 bytes of stack a thread). Named, the predicates are small and the nest unrolls.

Divisions by symbolic extents cost more: a 64-bit division by ((s_N + 255) / 256), the count of N
tiles, is a call of about a hundred instructions, and NVVM does not move it out of a loop (the
divisor could be 0 as far as it knows, so the division may not run where the loop did not), so a
persistent GEMM's K loop computed its tile's origin afresh every iteration.

The pass `name_invariants` rewrites the expressions of each outermost unrolled nest (the
predicates the kernel tests in an `if`: statements', ldmatrix / stmatrix, cp.async and its zero
fill, mma issues, tcgen05 accesses and their loaded elements; a TMA copy's issuer, bounds and
coordinates), of each circular-buffer prologue and of each statement in a serial loop. A nest's
invariant terms that divide are named; elsewhere only those dividing by a variable (NVVM moves a
division by a constant out of a loop itself), and an expression with none keeps its form. Each name is declared (an IndexNames node)
where all it reads is defined: at kernel entry for the terms of extents, launch dimensions,
thread and block indices, else first in the body of the innermost serial loop whose counter it
reads. A term named twice in one place has one name. The names stand for the same Expr trees,
printed by the same renderer, so every value is the one proved; only the additions of an index
regroup, which unsigned arithmetic leaves unchanged.

Also here: `rewrite_unrolled`, which finds the outermost unrolled nests (whole_tile.py's pass
uses it too), and `sum_terms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from ...execution.statements import Cond
from ...model.errors import InternalError
from ...model.expr import Expr, const, var
from ...execution.rotation import Rotated
from ..ir import (BLOCK_DIMS, GRID_DIMS, Compute, CpAsyncCopy, IndexNames, KernelIR, Loop, LoopKind, MatrixCopy, MmaIssue,
                  Prologue, TmaCopy, TmemAccess, WholeTile)

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


DIVISIONS = ("floordiv", "ceildiv", "mod")


def divides(e: Expr) -> bool:
    """Whether e divides anywhere (a floordiv, ceildiv or mod)."""
    return any(e.has_op(op) for op in DIVISIONS)


def divides_by_variable(e: Expr) -> bool:
    """Whether e divides by a term that is not a constant somewhere (by a count of tiles)."""
    if e.op in DIVISIONS and e.args[1].op != "const":
        return True
    return any(divides_by_variable(a) for a in e.args)


class Invariants:
    """Rewrites expressions of one nest: each term that reads only `outer` names (the loops
    around the nest, thread and block indices, launch dimensions, parameters) and is `worth`
    naming (default: it divides) becomes a variable; `namer` gives it its name (default: numbered
    from `first`, kept in `named`, which maps each named term to its variable)."""

    def __init__(self, outer: frozenset[str], names: Mapping[str, str], first: int = 0,
                 namer: Callable[[Expr], str] | None = None, worth: Callable[[Expr], bool] = divides,
                 keep_unnamed: bool = False):
        self.outer, self.names, self.first = outer, names, first
        self.named: dict[Expr, str] = {}
        self.namer, self.worth, self.keep_unnamed = namer, worth, keep_unnamed

    def rewrite(self, e: Expr, worth: Callable[[Expr], bool] | None = None, keep_unnamed: bool | None = None) -> Expr:
        """e with its invariant terms named; with `keep_unnamed`, e as it was where nothing in it is
        named (a nest's sums are regrouped, invariant terms first, named or not)."""
        out = self._rewrite(e, worth or self.worth)
        keep = self.keep_unnamed if keep_unnamed is None else keep_unnamed
        return e if keep and out.free_vars() <= e.free_vars() else out

    def _rewrite(self, e: Expr, worth: Callable[[Expr], bool]) -> Expr:
        if e.op in ("const", "var"):
            return e
        if self._invariant(e):
            return self._name(e) if worth(e) else e
        if e.op == "add":  # the invariant terms of an index (nested sums too) summed into one name
            terms = sum_terms(e)
            fixed = [a for a in terms if self._invariant(a)]
            rest = [self._rewrite(a, worth) for a in terms if not self._invariant(a)]
            if any(map(worth, fixed)):
                fixed = [self._name(fixed[0] if len(fixed) == 1 else Expr("add", tuple(fixed)))]
            return Expr("add", tuple(fixed + rest))
        return Expr(e.op, tuple(self._rewrite(a, worth) for a in e.args), e.value)

    def conds(self, conds: list[Cond], worth: Callable[[Expr], bool] | None = None,
              keep_unnamed: bool | None = None) -> list[Cond]:
        """conds with their sides rewritten, in order (each left side before its right)."""
        out = []
        for c in conds:
            lhs = self.rewrite(c.lhs, worth, keep_unnamed)
            out.append(replace(c, lhs=lhs, rhs=self.rewrite(c.rhs, worth, keep_unnamed)))
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
        if isinstance(n, TmemAccess):  # a load writes its elements back, a store reads them, each under its predicate
            elements = [replace(el, data=replace(el.data, conds=self.conds(el.data.conds))) for el in n.elements]
            return replace(n, elements=elements, conds=self.conds(n.conds))
        if isinstance(n, CpAsyncCopy):  # the zero fill's test is printed first
            zero_fill = self.conds(n.zero_fill)
            return replace(n, zero_fill=zero_fill, conds=self.conds(n.conds))
        if type(n) in (Compute, MatrixCopy, MmaIssue):
            return replace(n, conds=self.conds(n.conds))
        if isinstance(n, TmaCopy):  # one thread issues it: only the divisions NVVM would not move
            return self._tma_copy(n)
        if isinstance(n, WholeTile):  # one inside another's versions (codegen/lower/peel.py)
            return replace(n, guard=self.conds(n.guard), whole=self._node(n.whole), lowered=self._node(n.lowered))
        if isinstance(n, Loop) or hasattr(n, "body"):
            return replace(n, body=self.nodes(n.body))  # loops, a circular buffer's prologue and prefetch
        return n

    def _tma_copy(self, n: TmaCopy) -> TmaCopy:
        worth = divides_by_variable
        issuer, bounds = self.conds(n.issuer, worth, True), self.conds(n.bounds, worth, True)
        coords = tuple(self.rewrite(c, worth, True) for c in n.coords)
        arrive_when = None if n.arrive_when is None else self.conds(n.arrive_when, worth, True)
        offset = None if n.gmem_offset is None else self.rewrite(n.gmem_offset, worth, True)
        return replace(n, issuer=issuer, bounds=bounds, coords=coords, arrive_when=arrive_when, gmem_offset=offset)

    def _invariant(self, e: Expr) -> bool:
        return all(self.names.get(v, v) in self.outer for v in e.free_vars())

    def _name(self, e: Expr) -> Expr:
        if self.namer is not None:
            return var(self.namer(e))
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
    serial: tuple[Loop | Rotated, ...] = ()  # the loops of `loops`, outermost first (a rotated scope redeclares one)


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
                inner = replace(around, threads={**around.threads, n.var: n.extent.value})
        elif isinstance(n, Loop) and n.kind is LoopKind.SERIAL and n.extent != const(1):
            inner = Around(around.loops + (n.var,), around.threads, around.serial + (n,))
        elif isinstance(n, Rotated):  # declares its loop's counter again: the names that read it are its own
            inner = Around(around.loops + (n.var,) * (n.var not in around.loops), around.threads, around.serial + (n,))
        if hasattr(n, "body"):  # loops, warp roles and their Roles, a prologue, prefetched copies
            rewrite_unrolled(n.body, rewrite, inner, is_nest)
        out.append(n)
    nodes[:] = out


def block_uniform(ir: KernelIR) -> frozenset[str]:
    """The C++ names that are the same in every thread of a block: block indices, launch
    dimensions, parameters."""
    return frozenset(BLOCK_INDICES + BLOCK_DIMS + GRID_DIMS) | {p.name for p in ir.params}


# -- the pass --------------------------------------------------------------------------------


class Placement:
    """Where each named term is declared: at kernel entry, or first in the body of the innermost
    serial loop whose counter it reads (of `around.serial`); a term has one name in one place.
    Names are numbered on through the kernel, in the order they are first asked for."""

    def __init__(self, names: Mapping[str, str], entry: frozenset[str]):
        self.names, self.entry = names, entry
        self.places: dict[int, tuple[Loop | None, dict[Expr, str]]] = {}  # id(loop), id(None): entry

    def namer(self, around: Around) -> Callable[[Expr], str]:
        def name(e: Expr) -> str:
            reads = {self.names.get(v, v) for v in e.free_vars()}
            if not reads <= self.entry | {loop.var for loop in around.serial}:
                raise InternalError(f"invariants: {e} reads {sorted(reads - self.entry)}, not all loops around it")
            home = next((loop for loop in reversed(around.serial) if loop.var in reads), None)
            _, named = self.places.setdefault(id(home), (home, {}))
            if e not in named:
                named[e] = f"tp_inv{sum(len(n) for _, n in self.places.values())}"
            return named[e]
        return name

    def declare(self, body: list) -> None:
        """Puts each place's IndexNames first in its loop's body (entry: first in `body`)."""
        for home, named in self.places.values():
            (body if home is None else home.body).insert(0, IndexNames([(name, e) for e, name in named.items()]))


def is_statement(n) -> bool:
    """A leaf whose expressions the pass rewrites outside an unrolled nest."""
    return type(n) in (Compute, MatrixCopy, MmaIssue, CpAsyncCopy, TmemAccess, TmaCopy)


def name_invariants(st) -> None:
    """Names the invariant divisions of every outermost unrolled nest, circular-buffer prologue
    and statement in a serial loop, each declared at its Placement. A WholeTile's are named
    through its lowered nest, its whole tile's, then its guard."""
    ir: KernelIR = st.kernel
    entry = block_uniform(ir) | set(THREAD_INDICES)
    placement = Placement(ir.names, entry)

    def is_nest(n) -> bool:
        return is_unrolled_nest(n) or isinstance(n, Prologue) or is_statement(n)

    def rewrite(nest, around: Around) -> list:
        if isinstance(nest, Prologue):  # an unrolled loop of its own, over its circular loop's first indices
            names = Invariants(frozenset(entry | set(around.loops)), ir.names, namer=placement.namer(around),
                               worth=divides_by_variable, keep_unnamed=True)
            return names.nodes([nest])
        if is_statement(nest):  # its own loop's counter changes with each run: the terms of the others
            if not around.serial:
                return [nest]
            inner = Around(around.loops[:-1], around.threads, around.serial[:-1])
            names = Invariants(frozenset(entry | set(inner.loops)), ir.names, namer=placement.namer(inner),
                               worth=divides_by_variable, keep_unnamed=True)
            return names.nodes([nest])
        names = Invariants(frozenset(entry | set(around.loops)), ir.names, namer=placement.namer(around))
        if isinstance(nest, WholeTile):
            (lowered,), (whole,) = names.nodes([nest.lowered]), names.nodes([nest.whole])
            return [replace(nest, guard=names.conds(nest.guard), whole=whole, lowered=lowered)]
        return names.nodes([nest])

    rewrite_unrolled(ir.body, rewrite, is_nest=is_nest)
    placement.declare(ir.body)
