"""Budget claims decided without z3 (verifier/monotone.py) and the symbol ranges assumptions
narrow (verifier/symbol_ranges.py): the ranges never drop a size the assumptions admit, and
are exactly the admitted sizes when they say so (by enumeration); `at_most` answers what a z3
query answers on random claims: the same verdict, and the counterexample Query.prove shrinks
to (each size in turn as small as the failure allows), checked against enumeration too."""

from __future__ import annotations

import itertools
import random

import pytest
import sympy

import tileproof as tp
from tileproof.model import expr as E
from tileproof.model.expr import evaluate
from tileproof.verifier import monotone, solver
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.monotone import at_most
from tileproof.verifier.solver import Query, ShrinkAccount, Verdict
from tileproof.model.symbol_ranges import admitted

M, N = (sympy.Symbol(s, integer=True, nonnegative=True) for s in "MN")
SMALL = {"M": (1, 40), "N": (1, 40)}  # every point enumerable


def random_assumption(rng: random.Random, exact: bool):
    s = rng.choice([M, N])
    c = rng.randint(0, 45)
    simple = [s <= c, s < c, s >= c, s > c, sympy.Eq(s, c), sympy.Ge(c, s),
              sympy.Eq(sympy.Mod(s, rng.choice([2, 3, 4, 8])), 0)]
    other = [M * N <= 4 * c, sympy.Or(s < 3, s > c), sympy.Eq(sympy.Mod(s, 4), 1), sympy.Ne(s, c)]
    cond = rng.choice(simple if exact or rng.random() < 0.6 else other)
    return cond if rng.random() < 0.8 else sympy.And(cond, rng.choice(simple))


def admitted_points(assumptions, bounds=SMALL):
    names = list(bounds)
    tests = [sympy.lambdify([M, N], a) for a in assumptions]
    for values in itertools.product(*(range(lo, hi + 1) for lo, hi in bounds.values())):
        if all(t(*values) for t in tests):
            yield dict(zip(names, values))


def test_narrowed_ranges_keep_every_admitted_size_and_are_exact_when_they_say_so():
    rng = random.Random(3)
    exact_seen = narrowed_seen = 0
    for _ in range(400):
        assumptions = [random_assumption(rng, exact=False) for _ in range(rng.randint(1, 3))]
        got = admitted(SMALL, assumptions)
        points = list(admitted_points(assumptions))
        in_ranges = [p for p in admitted_points([], SMALL)
                     if all(r.lo <= p[n] <= r.hi and (p[n] - r.lo) % r.step == 0 for n, r in got.ranges.items())]
        assert all(p in in_ranges for p in points), (assumptions, got)  # never drops an admitted size
        if got.exact:
            assert in_ranges == points, (assumptions, got)
            exact_seen += 1
        narrowed_seen += got.bounds() != SMALL
    assert exact_seen > 100 and narrowed_seen > 150


def test_contradicting_bounds_leave_the_ranges_as_given():
    got = admitted(SMALL, [M <= 4, sympy.Eq(sympy.Mod(M, 8), 0)])
    assert got.bounds() == SMALL and not got.exact


def random_growing(rng: random.Random, depth: int) -> E.Expr:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([E.var("M"), E.var("N"), E.const(rng.randint(0, 9))])
    op = rng.choice(["add", "mul", "mul", "max", "ceildiv", "floordiv", "self"])
    a = random_growing(rng, depth - 1)
    if op == "self":  # M split by M: its outer extent is 1
        v = E.var(rng.choice("MN"))
        return E.mul(a, E.ceildiv(v, v))
    if op in ("ceildiv", "floordiv"):
        return E.BUILDERS[op](a, E.const(rng.randint(1, 9)))
    return E.BUILDERS[op](a, random_growing(rng, depth - 1))


def z3_answer(f: E.Expr, cap: int, assumptions, bounds) -> tuple:
    sizes = admitted(bounds, assumptions)
    q = Query([f, E.const(cap)], {}, symbols=sizes.bounds(), steps=sizes.steps(), shrink=ShrinkAccount(60))
    for a in assumptions:
        q.assume_sympy(a)
    return q.prove(q.le(f, E.const(cap)), values={"f": f}), sizes


def test_at_most_agrees_with_z3_and_enumeration(monkeypatch):
    """Random non-decreasing f and cap under assumptions that are all ranges: the verdict is
    z3's, and a counterexample is the lexicographically smallest failing size (M, then N), the
    one z3's counterexample shrinks to when it has the time (given here)."""
    monkeypatch.setattr(solver, "SHRINK_SECONDS", 60)
    rng = random.Random(5)
    seen = {Verdict.PROVED: 0, Verdict.COUNTEREXAMPLE: 0}
    for _ in range(150):
        f = random_growing(rng, 3)
        if not f.free_vars():
            continue
        assumptions = [random_assumption(rng, exact=True) for _ in range(rng.randint(0, 2))]
        points = list(admitted_points(assumptions))
        if not points:
            continue
        values = [evaluate(f, p) for p in points]
        cap = rng.choice([max(values), rng.choice(values)]) + rng.choice([0, 0, 1, -1])
        z3_out, sizes = z3_answer(f, cap, assumptions, SMALL)
        out = at_most(sizes, f, cap, {"f": f})
        assert out is not None and out.status is z3_out.status, (str(f), cap, assumptions)
        seen[out.status] += 1
        if out.status is Verdict.COUNTEREXAMPLE:
            failing = [p for p in points if evaluate(f, p) > cap]
            smallest = min(failing, key=lambda p: (p["M"], p["N"]))
            assert out.model == smallest == z3_out.model, (str(f), cap, assumptions)
            assert out.values == z3_out.values == {"f": evaluate(f, smallest)}
    assert min(seen.values()) > 20


def test_at_most_at_full_range_sizes(monkeypatch):
    """Sizes up to 2^31 - 1, as verify admits them: the same verdict and counterexample as z3."""
    monkeypatch.setattr(solver, "SHRINK_SECONDS", 60)
    full = {"M": (1, 2**31 - 1), "N": (1, 2**31 - 1)}
    cases = [(E.mul(E.ceildiv(E.var("M"), 8), 32), 232448, []),  # 32 * ceil(M / 8): M = 58113
             (E.mul(E.var("M"), E.ceildiv(E.var("N"), 3), 12), 232448, [sympy.Eq(sympy.Mod(M, 16), 0)]),
             (E.mul(E.var("M"), E.var("N"), 4), 232448, [N <= 1024, sympy.Eq(sympy.Mod(N, 8), 0)]),
             (E.mul(E.var("M"), E.var("N"), 128), 2**40, [M <= 64, N <= 1024])]
    for f, cap, assumptions in cases:
        z3_out, sizes = z3_answer(f, cap, assumptions, full)
        out = at_most(sizes, f, cap, {"f": f})
        assert out.status is z3_out.status and out.model == z3_out.model and out.values == z3_out.values
    assert at_most(admitted(full, []), cases[0][0], 232448, {}).model == {"M": 58113, "N": 1}


@pytest.mark.parametrize("f, assumptions", [
    (E.mul(E.var("N"), E.ceildiv(E.const(128), E.var("N"))), []),  # shrinks as N grows
    (E.mod(E.var("M"), E.const(7)), []),
    (E.mul(E.var("M"), E.var("N")), [M * N <= 4096]),  # not a range: left to the query
])
def test_what_at_most_leaves_to_z3(f, assumptions):
    assert at_most(admitted(SMALL, assumptions), f, 100, {}) is None


def capacity_schedule(shape, assumptions=(), rows_on_threads=False):
    with tp.Fusion("capacity") as fusion:
        t0 = tp.make_tensor(shape); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    for a in assumptions:
        fusion.assume(a)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, 8)
        t.axis(2).parallelize(tp.ParallelType.TIDx)
        if rows_on_threads:
            t.axis(0).parallelize(tp.ParallelType.TIDy)
    return fusion


@pytest.mark.parametrize("shape, assumptions, rows_on_threads", [
    (["M", "N"], [], False), (["M", "N"], ["N <= 1024", "N % 8 == 0"], False), (["M", 64], ["M <= 64"], False),
    ([16, "N"], ["N >= 100"], False), (["M", 64], ["M % 4 == 0"], True), (["M", 64], ["M <= 128"], True)])
def test_verify_reports_what_the_query_would(monkeypatch, shape, assumptions, rows_on_threads):
    """SMEM-CAPACITY and LAUNCH-THREADS with the shortcut and with every claim left to z3 (and
    the time to shrink its counterexamples): the same findings, word for word."""
    fusion = capacity_schedule(shape, assumptions, rows_on_threads)
    monkeypatch.setattr(solver, "SHRINK_SECONDS", 60)
    monkeypatch.setitem(VerifyContext.__init__.__kwdefaults__, "shrink_seconds", 60)
    fast = tp.verify(fusion, rules=["SMEM-CAPACITY", "LAUNCH-THREADS"])
    monkeypatch.setattr(monotone, "at_most", lambda *a: None)
    slow = tp.verify(fusion, rules=["SMEM-CAPACITY", "LAUNCH-THREADS"])
    assert [d.message for d in fast.diagnostics] == [d.message for d in slow.diagnostics]
    assert fast.queries < slow.queries
