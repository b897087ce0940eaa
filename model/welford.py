"""Welford reductions: tp.welford (nvFuser's Welford, a WelfordOp) and what its outputs are.

    avg, var_sum, n = tp.welford(x, [1])   # [M, N] -> three [M] tensors, one reduction

A Welford reduction keeps, per output element, the state (avg, M2, N) of the elements it has
seen: their mean, the sum of their squared deviations from it, and their count. One element x
updates it as nvFuser's welfordCombine does with a count of one (N += 1; delta = x - avg;
avg += delta / N; M2 += delta * (x - avg)); two partial states combine by Chan's parallel
formula (N = Na + Nb; delta = avg_b - avg_a; avg = avg_a + delta Nb / N;
M2 = M2a + M2b + delta^2 Na Nb / N), an empty partial (N = 0) leaving the other unchanged. The
variance is M2 / (N - correction): x is read once, and no E[x^2] - E[x]^2 cancels.

The three outputs are siblings as nvFuser's WelfordOp outputs are: three reduction tensors of the
same input over the same axes (ops "welford_avg", "welford_var_sum", "welford_n"), made one
group of model/grouped_reduction.py, so they are scheduled alike (a parallel type on one is its
siblings', model/loop_map.py), rfactored together (`avg.rfactor(axes)` rfactors all three; the
partial outputs are a Welford of their own, and each final output then reads all three partials,
which it combines by Chan's formula), inlined at one position (model/inlining.py) and run in one
loop nest. The kernel keeps one state per
accumulator register (codegen/lower/reduction.py: the group's first computed member does the
update and the block combine for all three; each member stores its field). avg and var_sum have
x's dtype; n is int64, nvFuser's index type (the kernel counts in int32 where the count fits,
execution/reduction.py welford_count_dtype: a float count would stop at 2^24 in float32).

Imports model/ only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from .errors import ScheduleError
from .expr import Expr, product
from .reduction import _axes, reduce_axes
from .tensor_base import check_tensor
from .types import int64

if TYPE_CHECKING:
    from .tensor import TensorView

# the ops of a Welford's three outputs, in WelfordResult's order
WELFORD_OPS = ("welford_avg", "welford_var_sum", "welford_n")
# the field of the kernel's Welford state (tp_welford_state<T>, codegen/emit/reduction.py) each output stores
STATE_FIELDS = {"welford_avg": "avg", "welford_var_sum": "m2", "welford_n": "n"}


@dataclass(frozen=True)
class WelfordResult:
    """The outputs of tp.welford (nvFuser's WelfordResult): the mean, the sum of squared
    deviations from it (M2, nvFuser's var_sum) and the count of each output element. Unpacks as
    (avg, var_sum, n)."""

    avg: "TensorView"
    var_sum: "TensorView"
    n: "TensorView"

    def __iter__(self) -> Iterator["TensorView"]:
        return iter((self.avg, self.var_sum, self.n))


def is_welford(tv) -> bool:
    """Whether tv is an output of a Welford reduction (tp.welford, or its rfactor's partial)."""
    op = getattr(tv, "definition", None)
    return op is not None and op.name in WELFORD_OPS


def welford_siblings(tv) -> tuple:
    """tv's Welford group: (avg, var_sum, n), tv among them."""
    group = next((g for g in tv.fusion.reduction_groups if any(t is tv for t in g)), None)
    if group is None or not is_welford(tv):
        raise ScheduleError(f"{tv.name} is not an output of tp.welford")
    return group


def welford(x: "TensorView", axes) -> WelfordResult:
    """(avg, var_sum, n) of x over `axes` (an int or a list of ints of x's shape): one Welford
    reduction, nvFuser's Welford(x, axes). x is float32 or float64 (cast 16-bit types first, as
    nvFuser's variance_mean asks); avg and var_sum have its dtype, n is int64 (nvFuser's index
    type).

        avg, var_sum, n = tp.welford(t0, [1])   # [M, N] -> three [M] tensors
        var = tp.div(var_sum, "N")              # the biased variance (or tp.cast(n, tp.float32))"""
    check_tensor("welford", x, "x")
    if not x.dtype.is_float or x.dtype.bytes < 4:
        raise ScheduleError(f"welford: {x.name} is {x.dtype}; a Welford reduction is computed on float32 or "
                            f"float64: cast it first (tp.cast({x.name}, tp.float32))")
    reduced = _axes("welford", x, axes)
    outs = tuple(reduce_axes(name, x, reduced, int64 if name == "welford_n" else None) for name in WELFORD_OPS)
    x.fusion.reduction_groups.append(outs)
    return WelfordResult(*outs)


def welford_count(tv) -> Expr:
    """The most elements one state of Welford output tv counts: those one output element of the
    Welford the user wrote combines, the product of the extents of its reduced axes (an rfactor's
    partials and outputs count parts of them)."""
    while len(tv.definition.inputs) == 3:  # an rfactor's output: combines the partial states
        tv = tv.definition.inputs[0]
    return product([i.extent_expr for i in tv.root if i.is_reduction])


def combine_partials(finals, partials) -> None:
    """After an rfactor of a Welford group (model/grouped_reduction.py rfactor_group): each final
    output reads all three partial outputs, whose states it combines (nvFuser's WelfordOp with
    its var and N inputs set)."""
    for tv in finals:
        op = tv.definition
        op.inputs = list(partials)
        op.logical_map = [list(op.logical_map[0]) for _ in partials]


__all__ = ["STATE_FIELDS", "WELFORD_OPS", "WelfordResult", "combine_partials", "is_welford", "welford",
           "welford_count", "welford_siblings"]
