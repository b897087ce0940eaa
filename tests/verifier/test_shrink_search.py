"""The search Query.prove shrinks a counterexample with (solver.py _minimize): given the time,
each term ends at the smallest value any counterexample has once the terms before it are
fixed, whatever z3's first model was; sizes that the assumptions make multiples of a step are
searched in steps. Checked by enumerating small ranges on random claims."""

from __future__ import annotations

import random
from pathlib import Path

import sympy

from tileproof.model import expr as E
from tileproof.model.expr import evaluate
from tileproof.verifier import solver
from tileproof.verifier.solver import Query, ShrinkAccount, Verdict

from support.expr_gen import random_expr

S = sympy.Symbol("S", integer=True, nonnegative=True)


def test_each_term_shrinks_to_its_smallest_failing_value(monkeypatch):
    """Claim f(S, i) <= cap over a size S (a multiple of k in [lo, 60]) and an index i < S + 3:
    the counterexample has the smallest failing S, then the smallest failing i for it."""
    monkeypatch.setattr(solver, "SHRINK_SECONDS", 60)
    monkeypatch.setattr(solver, "SHRINK_CHECKS", 10_000)
    rng = random.Random(11)
    found = 0
    for _ in range(120):
        f = E.substitute(random_expr(rng, 3, "ab"), {"a": E.var("S"), "b": E.var("i")})
        k = rng.choice([1, 1, 2, 4, 8])
        lo, hi = k * rng.randint(1, 3), 60 // k * k
        points = [(s, i) for s in range(lo, hi + 1, k) for i in range(s + 3)]
        values = {p: evaluate(f, {"S": p[0], "i": p[1]}) for p in points}
        cap = rng.choice(sorted(values.values()))
        q = Query([f, E.const(cap)], {"i": E.add(E.var("S"), 3)}, symbols={"S": (lo, hi)},
                  steps={"S": k} if k > 1 else {}, shrink=ShrinkAccount(60))
        q.assume_sympy(sympy.Eq(sympy.Mod(S, k), 0))
        out = q.prove(q.le(f, E.const(cap)))
        failing = sorted(p for p, v in values.items() if v > cap)
        assert (out.status is Verdict.COUNTEREXAMPLE) == bool(failing), str(f)
        if failing:
            found += 1
            assert (out.model["S"], out.model["i"]) == failing[0], (str(f), cap, lo, k)
    assert found > 60


def test_a_large_first_model_shrinks_within_the_default_budget():
    """z3's first model may sit anywhere below 2^31: the smallest failing size comes back
    within the default budget (SHRINK_SECONDS, SHRINK_CHECKS)."""
    size = E.var("S")
    q = Query([size], {}, symbols={"S": (1, 2**31 - 1)})
    assert q.prove(q.lt(size, E.const(1_000_000))).model == {"S": 1_000_000}  # fails from S = 10^6 on


def test_steps_are_the_assumed_multiples():
    """A size assumed a multiple of 16 is searched in steps of 16 and reaches the smallest one."""
    size = E.var("S")
    q = Query([size, E.mul(size, size)], {}, symbols={"S": (16, 2**31 - 16)}, steps={"S": 16})
    q.assume_sympy(sympy.Eq(sympy.Mod(S, 16), 0))
    out = q.prove(q.le(E.mul(size, size), E.const(10_000)))  # S * S > 10^4 from S = 101, a multiple of 16 from 112
    assert out.model == {"S": 112}


def test_sizes_are_first_tried_small_and_fixed(monkeypatch):
    """With no time to shrink (SHRINK_CHECKS 0), a counterexample over symbolic sizes is still
    given at small ones where the size probes find it (solver.py _small_sizes): M and N multiples
    of 128 with M * N >= 32768 fail first at one step above the smallest, M = 256, N = 128."""
    monkeypatch.setattr(solver, "SHRINK_CHECKS", 0)
    product = E.mul(E.var("M"), E.var("N"))

    def query():
        q = Query([product, E.const(32768)], {}, symbols={"M": (128, 2 ** 20), "N": (128, 2 ** 20)},
                  steps={"M": 128, "N": 128}, shrink=ShrinkAccount(1e-9))
        for name in ("M", "N"):
            q.assume_sympy(sympy.Eq(sympy.Mod(sympy.Symbol(name, integer=True, positive=True), 128), 0))
        return q

    q = query()
    out = q.prove(q.lt(product, E.const(32768)))
    assert (out.model["M"], out.model["N"]) in ((256, 128), (128, 256))
    q = query()
    out = q.prove(q.lt(product, E.const(32768)), shrink_units=0)  # a verdict only: no probes
    assert out.status is Verdict.COUNTEREXAMPLE


def test_a_size_the_violation_needs_large_leaves_the_others_at_their_smallest(monkeypatch):
    """Two rows of T1 share its shared-memory buffer once M > 4096 (the allocation leaves out the
    outer split of M): no probe with every size pinned small finds that, so with no time to shrink
    the report gave z3's first model, N = 2147483553 (fuzz 106/405, mutated: K = 2147483584 beside
    the M that mattered). Where the shrinking's budget ends, the sizes left are tried at their
    smallest, all, else all but one (solver.py _rest_smallest): N = 1."""
    import tileproof as tp

    monkeypatch.setattr(solver, "SHRINK_SECONDS", 1e-6)
    P = tp.ParallelType
    with tp.Fusion("one_size_large") as fusion:
        t0 = tp.make_tensor(["M", "N"], dtype=tp.float32); fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 4096).split(2, 32)  # [ceil(M / 4096), 4096 (BIDx), ceil(N / 32) (BIDy), 32 (TIDx)]
        t.axis(1).parallelize(P.BIDx)
        t.axis(2).parallelize(P.BIDy)
        t.axis(3).parallelize(P.TIDx)
    t1.set_allocation_domain([t1.axis(1), t1.axis(2), t1.axis(3)])
    (d,) = [d for d in tp.verify(fusion, "sm_90a").diagnostics if d.code == "ALLOCATION-DISTINCT"]
    assert d.counterexample["N"] == 1 and d.counterexample["M"] > 4096


def test_the_clock_does_not_shape_a_report(monkeypatch):
    """Shrinking and the bank rule's budget count z3's resource units, not seconds: with a clock
    that jumps a minute at every reading (a machine under heavy load), verify gives the same
    diagnostics, counterexamples and hints as before."""
    import itertools
    import time

    import tileproof as tp
    from tileproof.schedule_files import discover

    root = Path(__file__).resolve().parents[2] / "examples"
    cases = [c for c in discover([str(root / "invalid" / "ldst_matrix.py"), str(root / "invalid" / "tma_smem.py")])
             if c.name in ("ldst_matrix_set_any_size", "ldmatrix_rows_scrambled")][:2]
    cases += [c for c in discover([str(root / "valid" / "lowering.py")]) if c.name == "tma_load_from_one_thread"]
    assert len(cases) == 3

    def reports():
        return [[(d.code, d.message, d.counterexample, d.hint) for d in tp.verify(c.build(), c.target).diagnostics]
                for c in cases]

    before = reports()
    assert all(before) and any(d[2] for r in before for d in r)
    real, jumps = time.perf_counter, itertools.count()
    monkeypatch.setattr(time, "perf_counter", lambda: real() + 60.0 * next(jumps))
    monkeypatch.setattr(time, "monotonic", lambda: real() + 60.0 * next(jumps))
    assert reports() == before


def test_an_unanswered_size_probe_ends_the_probes_and_is_charged_its_allowance(monkeypatch):
    """A size probe that stops at its limit (z3 unknown) is charged its whole allowance, not the
    units it counted, and no other probe of that counterexample follows (fuzz seed 300 case 2242:
    a report of 27 s, its probes stalling at the clock one after another)."""
    import z3

    monkeypatch.setattr(solver, "SIZE_PROBE_MS", 37)  # a probe's allowance no other solve has
    size, other = E.var("S"), E.var("T")
    q = Query([size, other], {}, symbols={"S": (1, 2**31 - 1), "T": (1, 2**31 - 1)}, shrink=ShrinkAccount(60))
    real, probes = q._check, []

    def stalled_probes(s, allowed):
        if allowed == solver.units(37):
            probes.append(allowed)
            return z3.unknown, 1
        return real(s, allowed)

    before = q.shrink.probe_left
    monkeypatch.setattr(q, "_check", stalled_probes)
    out = q.prove(q.lt(E.add(size, other), E.const(1_000_000)))
    assert out.status is Verdict.COUNTEREXAMPLE
    assert probes == [solver.units(solver.SIZE_PROBE_MS)]  # one probe, not the series
    assert q.shrink.probe_left == before - probes[0]
