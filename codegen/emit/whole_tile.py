"""An unrolled nest's hole predicates, checked once where the block's tile is whole.

A partial tile's statements carry hole predicates (row < M, column < N) on every element: 256
comparisons a thread in a 128 x 256 tile's epilogue, though only the tiles at M's and N's ends
have holes. Each such predicate is a sum `tile + inner < bound`: `tile` the same for every thread
of the block (its tile's origin: block and outer loop indices), `inner` terms of the thread
indices and the nest's loop indices, each term bounded over their (constant) ranges. With the sum
of those bounds, `tile + bound(inner) < bound` implies the predicate everywhere in the nest: the
nest is printed twice, under that guard without the predicates it implies, and as before
otherwise. The guard is uniform over the block, so warp-collective instructions (stmatrix) and
barriers inside the nest stay uniform. Every value is unsigned and no sum exceeds one the kernel
computes at some point, within the index width proof, so the implication is plain arithmetic.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping

from ...execution.statements import Cond, CondKind
from ...model.expr import Expr, add, const, evaluate, try_int
from ..ir import Compute, KernelIR, Loop, LoopKind, MatrixCopy
from .invariants import sum_terms

MAX_POINTS = 1 << 12  # points enumerated for one term's largest value
THREADS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class WholeTile:
    guard: list[Cond]  # where all hold, so do `implied`
    implied: frozenset[Cond]


def whole_tile(nest: Loop, block_uniform: frozenset[str], ir: KernelIR,
               threads: Mapping[str, int] | None = None) -> WholeTile | None:
    """The block-uniform guard under which the hole predicates of the elementwise statements of
    `nest` (an outermost unrolled loop) hold, or None where none has the form tile + inner < bound.
    `block_uniform`: the C++ names the same for every thread (block indices, outer loops, parameters);
    `threads`: the extents of the thread loops around the nest, which its statements run below (a
    consumer warpgroup's epilogue: threadIdx.y < 2 of a block of 3), else the block's."""
    ranges = _nest_extents(nest)
    for name, extent in zip(THREADS, ir.block):
        if (launched := try_int(extent)) is not None:
            ranges[name] = min(launched, (threads or {}).get(name, launched))
    bounds: dict[tuple[Expr, Expr], int] = {}
    implied = set()
    for c in _hole_conds(nest):
        split = _tile_inner(c, block_uniform, ranges, ir.names)
        if split is None:
            continue
        tile, inner = split
        tops = [_largest(t, ranges, ir.names) for t in inner]
        if None in tops:
            continue
        key = (tile, c.rhs)
        bounds[key] = max(bounds.get(key, 0), sum(tops))
        implied.add(c)
    if not implied:
        return None
    guard = [Cond(add(tile, const(top)), "<", rhs, "the block's tile is whole", CondKind.HOLE)
             for (tile, rhs), top in bounds.items()]
    return WholeTile(guard, frozenset(implied))


def _hole_conds(nest: Loop) -> list[Cond]:
    out: list[Cond] = []
    for n in nest.body:
        if isinstance(n, Loop):
            out += [c for c in _hole_conds(n) if c not in out]
        elif type(n) in (Compute, MatrixCopy):
            out += [c for c in n.conds if c.kind is CondKind.HOLE and c.op == "<" and c not in out]
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


def _tile_inner(c: Cond, block_uniform: frozenset[str], ranges: Mapping[str, int], names: Mapping[str, str]):
    """(the block-uniform part of c.lhs, its other terms), or None where a term mixes the two or
    reads a name of neither kind, or the bound is not block-uniform."""
    def kinds(e: Expr) -> set[str]:
        return {"tile" if names.get(v, v) in block_uniform else "inner" if names.get(v, v) in ranges else "other"
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


def _largest(term: Expr, ranges: Mapping[str, int], names: Mapping[str, str]) -> int | None:
    vs = sorted(term.free_vars())
    sizes = [ranges[names.get(v, v)] for v in vs]
    if math.prod(sizes) > MAX_POINTS:
        return None
    return max(evaluate(term, dict(zip(vs, p))) for p in itertools.product(*(range(s) for s in sizes)))
