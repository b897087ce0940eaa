"""An unrolled nest's hole predicates, checked once where the block's tile is whole.

A partial tile's statements carry hole predicates (row < M, column < N) on every element: 256
comparisons a thread in a 128 x 256 tile's epilogue, though only the tiles at M's and N's ends
have holes. Each such predicate is a sum `tile + inner < bound`: `tile` the same for every thread
of the block (its tile's origin: block and outer loop indices), `inner` terms of the thread
indices and the nest's loop indices, each term bounded over their (constant) ranges
(model/simplify.py). With the sum of those bounds, `tile + bound(inner) < bound` implies the
predicate everywhere in the nest. The pass `split_whole_tiles` puts the nest twice into a
WholeTile node: under that guard without the predicates it implies, and as lowered otherwise.
The guard is uniform over the block, so warp-collective instructions (stmatrix) and barriers
inside the nest stay uniform.

A serial loop of constant extent whose body is register statements alone (a reduction's loops over a
fragment) is such a nest too: its predicates run on every element of every tile otherwise.

An Unswitch loop (nvFuser's ParallelType::Unswitch, device_lower/pass/unroll.cpp) is a serial loop
split the same way: its nest, the Unswitch loop itself included, is put twice under one guard
that every iteration's predicates imply. Every iteration runs in either version, so it is the
serial loop the verifier proved; only the predicates the guard implies are gone from the first.
As in nvFuser, the outermost Unroll or Unswitch loop is the one split; one that has no such
predicates (a loop of symbolic extent, or none of the form) is left as lowered and the unrolled
nests inside it are split on their own. Every value is unsigned and no sum exceeds one the kernel computes
at some point, within the index width proof, so the implication is plain arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from ...execution.statements import Cond, CondKind
from ...model.expr import Expr, add, const, try_int
from ...model.simplify import Simplifier
from ...model.types import ParallelType
from ..ir import Compute, KernelIR, Loop, LoopKind, MatrixCopy, WholeTile
from .invariants import THREAD_INDICES, Around, block_uniform, is_unrolled_nest, rewrite_unrolled, sum_terms

GUARD_REASON = "the block's tile is whole"


@dataclass(frozen=True)
class Guard:
    conds: list[Cond]  # where all hold, so do `implied`
    implied: frozenset[Cond]


def whole_tile_guard(nest: Loop, uniform: frozenset[str], ir: KernelIR,
                     threads: Mapping[str, int] | None = None) -> Guard | None:
    """The block-uniform guard under which the hole predicates of the elementwise statements of
    `nest` (an outermost unrolled or unswitched loop) hold, or None where none has the form tile + inner < bound.
    `uniform`: the C++ names the same for every thread (block indices, outer loops, parameters);
    `threads`: the extents of the thread loops around the nest, which its statements run below (a
    consumer warpgroup's epilogue: threadIdx.y < 2 of a block of 3), else the block's."""
    ranges = _nest_extents(nest)
    for name, extent in zip(THREAD_INDICES, ir.block):
        if (launched := try_int(extent)) is not None:
            ranges[name] = min(launched, (threads or {}).get(name, launched))
    bounds: dict[tuple[Expr, Expr], int] = {}
    implied = set()
    for c in _hole_conds(nest):
        split = _tile_inner(c, uniform, ranges, ir.names)
        if split is None:
            continue
        tile, inner = split
        analysis = Simplifier({v: const(ranges[ir.names.get(v, v)]) for t in inner for v in t.free_vars()})
        key = (tile, c.rhs)
        bounds[key] = max(bounds.get(key, 0), sum(analysis.bounds(t).hi for t in inner))
        implied.add(c)
    if not implied:
        return None
    guard = [Cond(add(tile, const(top)), "<", rhs, GUARD_REASON, CondKind.HOLE) for (tile, rhs), top in bounds.items()]
    return Guard(guard, frozenset(implied))


def split_whole_tiles(st) -> None:
    """Each outermost unrolled or unswitched nest with such hole predicates becomes a WholeTile."""
    ir: KernelIR = st.kernel
    unswitched = unswitched_loops(st.classes)

    def is_nest(n) -> bool:
        return is_unrolled_nest(n) or (isinstance(n, Loop) and n.key in unswitched) or _register_nest(n)

    def rewrite(nest: Loop, around: Around) -> list:
        guard = whole_tile_guard(nest, block_uniform(ir) | set(around.loops), ir, around.threads)
        if guard is not None:
            return [WholeTile(guard.conds, _without(nest, guard.implied), nest)]
        if nest.key in unswitched:  # a serial loop: the unrolled nests inside it are split on their own
            inner = Around(around.loops + ((nest.var,) if nest.extent != const(1) else ()), around.threads)
            rewrite_unrolled(nest.body, rewrite, inner, is_nest)
        return [nest]

    rewrite_unrolled(ir.body, rewrite, is_nest=is_nest)


def _register_nest(n) -> bool:
    """A serial loop of constant extent over register statements alone: a reduction's loops over a
    fragment (its axes Serial as scheduled; ptxas unrolls them), attention's max and sum over a key
    tile, whose hole predicates (row < M, key < N) would otherwise run on every element of every tile."""
    def computes_only(nodes) -> bool:
        return all(type(m) is Compute or (isinstance(m, Loop) and m.kind is not LoopKind.BLOCK
                                          and m.extent.op == "const" and computes_only(m.body)) for m in nodes)

    return isinstance(n, Loop) and n.kind is LoopKind.SERIAL and n.extent.op == "const" and n.extent != const(1) \
        and computes_only(n.body)


def unswitched_loops(classes) -> frozenset[int]:
    """The keys of the loop classes bound to Unswitch: serial loops (LoopKind.SERIAL) split here."""
    return frozenset(c.key for c in classes.classes.values() if c.parallel is ParallelType.Unswitch)


def _without(nest: Loop, implied: frozenset[Cond]) -> Loop:
    """A copy of the nest whose statements and ldmatrix / stmatrix test no predicate of `implied`
    (and whose zero-filled statements read their value where `implied` holds their conditions)."""
    def node(n):
        if type(n) is Compute:
            return replace(n, conds=[c for c in n.conds if c not in implied],
                           zero_unless=[c for c in n.zero_unless if c not in implied])
        if type(n) is MatrixCopy:
            return replace(n, conds=[c for c in n.conds if c not in implied])
        return replace(n, body=[node(m) for m in n.body]) if hasattr(n, "body") else n

    return node(nest)


def _hole_conds(nest: Loop) -> list[Cond]:
    out: list[Cond] = []
    for n in nest.body:
        if isinstance(n, Loop):
            out += [c for c in _hole_conds(n) if c not in out]
        elif type(n) in (Compute, MatrixCopy):
            zeros = n.zero_unless if type(n) is Compute else []  # P's keys past N zeroed: a hole's form too
            out += [c for c in n.conds + zeros if c.kind in (CondKind.HOLE, CondKind.PADDING) and c.op == "<"
                    and c not in out]
    return out


def _nest_extents(nest: Loop) -> dict[str, int]:
    """C++ index -> extent of the nest's counted loops (constant extents only)."""
    out = {}
    if nest.kind not in (LoopKind.THREAD, LoopKind.BLOCK) and nest.extent.op == "const":
        out[nest.var] = nest.extent.value
    for n in nest.body:
        if isinstance(n, Loop):
            out.update(_nest_extents(n))
    return out


def _tile_inner(c: Cond, uniform: frozenset[str], ranges: Mapping[str, int], names: Mapping[str, str]):
    """(the block-uniform part of c.lhs, its other terms), or None where a term mixes the two or
    reads a name of neither kind, or the bound is not block-uniform."""
    def kinds(e: Expr) -> set[str]:
        return {"tile" if names.get(v, v) in uniform else "inner" if names.get(v, v) in ranges else "other"
                for v in e.free_vars()}

    if not kinds(c.rhs) <= {"tile"}:
        return None
    tile, inner = [], []
    for t in sum_terms(c.lhs, distribute=True):
        k = kinds(t)
        if k <= {"tile"}:
            tile.append(t)
        elif k == {"inner"}:
            inner.append(t)
        else:
            return None
    return (add(*tile) if tile else const(0)), inner
