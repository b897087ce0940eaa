"""The loop-invariant divisions of an unrolled loop nest's predicates, named once before it.

A partial tile's predicates repeat its origin, e.g. ((i0 * 8 + blockIdx.x / 16) / 42 * 16 + ...) *
128, in every statement of the nest. Where the tile is not a power of two wide those are real
divisions, and NVVM then leaves an inner `#pragma unroll` loop rolled; a rolled loop indexes the
register arrays with a variable, which puts them in local memory (a 128 x 192 tile's epilogue:
400 bytes of stack a thread). Named, the predicates are small and the nest unrolls.

The names stand for the same Expr trees, printed by the same renderer, so every value is the one
proved; only the additions of an index regroup, which unsigned arithmetic leaves unchanged.
"""

from __future__ import annotations

from typing import Mapping

from ...model.expr import Expr, var


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
    declared by `declarations`."""

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

    def declarations(self, render, ctype: str) -> list[str]:
        """`const <ctype> name = <value>;` for each name, `render` printing the values."""
        return [f"const {ctype} {name} = {render(e)};" for e, name in self.named.items()]

    @property
    def count(self) -> int:
        return len(self.named)

    def _invariant(self, e: Expr) -> bool:
        return all(self.names.get(v, v) in self.outer for v in e.free_vars())

    def _name(self, e: Expr) -> Expr:
        if e not in self.named:
            self.named[e] = f"tp_inv{self.first + len(self.named)}"
        return var(self.named[e])
