"""Unknown is never an accept; an internal failure is a rejection that says so."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.verifier import solver
from tileproof.verifier.registry import RULES


def vectorized_copy(n):
    with tp.Fusion("vec") as fusion:
        t0 = tp.make_tensor([n]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t1.split(0, 4)
    t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    return fusion


def test_unknown_is_a_rejection(monkeypatch):
    monkeypatch.setattr(solver.Query, "prove", lambda self, claim, **kw: solver.Outcome(solver.Verdict.UNKNOWN, reason="timeout"))
    report = tp.verify(vectorized_copy(8), rules=["SPLIT-DIVISIBILITY"])
    assert not report.ok
    assert "could not prove" in report.errors[0].message and "timeout" in report.errors[0].message


def test_a_verdict_is_never_a_string():
    with pytest.raises(TypeError, match="Verdict"):
        solver.Outcome("proved")


def test_internal_failure_is_reported_as_our_bug(monkeypatch):
    rule = RULES["SPLIT-DIVISIBILITY"]

    def broken(ctx):
        raise RuntimeError("boom")

    monkeypatch.setitem(RULES, "SPLIT-DIVISIBILITY", type(rule)(rule.code, rule.family, rule.severity, broken))
    report = tp.verify(vectorized_copy(8), rules=["SPLIT-DIVISIBILITY"])
    assert not report.ok and "tileproof bug, please report" in report.errors[0].message


def test_symbolic_proof_counterexample_assumption_and_binding():
    fusion = vectorized_copy("N")
    report = tp.verify(fusion)
    assert report.codes == ["SPLIT-DIVISIBILITY"]
    n = report.errors[0].counterexample["N"]
    assert n % 4 != 0  # a concrete size where the split leaves holes
    assert tp.verify(fusion, bind={"N": 4096}).ok
    assert not tp.verify(fusion, bind={"N": 4098}).ok
    fusion.assume("N % 8 == 0")
    assert tp.verify(fusion).ok


def test_a_product_of_two_symbolic_extents_is_decided_over_the_integers():
    """A tile allocated whole over symbolic M and K tiles: copy (m, k) of MT x KT tiles ends inside
    the allocation. z3 gives no verdict on it as bit-vectors in 20 s (fuzz seed 0, case 63);
    Query(integers=True) proves it, and finds the counterexample when the bound is off by one."""
    from tileproof.model import expr as E

    m, k, mt, kt = E.var("m"), E.var("k"), E.ceildiv(E.var("M"), E.const(128)), E.ceildiv(E.var("K"), E.const(64))
    end = E.add(E.mul(E.add(E.mul(m, kt), k), E.const(16384)), E.const(16384))
    size = E.mul(E.mul(mt, kt), E.const(16384))
    sizes = {"M": (1, solver.MAX_EXTENT), "K": (1, solver.MAX_EXTENT)}
    q = solver.Query([end, size], {"m": mt, "k": kt}, symbols=sizes, integers=True)
    assert q.prove(q.le(end, size)).proved
    q = solver.Query([end, size], {"m": mt, "k": kt}, symbols=sizes, integers=True)
    out = q.prove(q.lt(end, size))  # the last copy ends exactly at the allocation's end
    assert out.status is solver.Verdict.COUNTEREXAMPLE and out.model["m"] == out.model["M"] // 128 + (out.model["M"] % 128 > 0) - 1


def test_an_xor_has_no_integer_rendering():
    from tileproof.model import expr as E

    with pytest.raises(ValueError, match="XOR"):
        solver.Query([E.xor(E.var("i"), E.const(8))], {"i": E.const(64)}, integers=True)


def _stalling_claim(ctx):
    """x * y + z and z leave the same remainder by y: true, but 48-bit products stall z3."""
    import z3

    x, y, z = z3.BitVecs("x y z", 48, ctx=ctx)
    bounds = [z3.ULT(v, 1 << 20) for v in (x, y, z)] + [z3.UGT(y, 0)]
    return bounds, z3.URem(x * y + z, y) == z3.URem(z, y)


def test_a_proof_stops_at_a_resource_count_not_a_time(monkeypatch):
    """The limit is z3's resource units (UNITS_PER_MS a ms of limit), so a machine's speed or
    load cannot turn a verdict into an undecided one: with a wall clock far beyond reach, a
    stalling claim stops at its units, and the reason says so."""
    import z3

    monkeypatch.setattr(solver, "WALL_FACTOR", 10_000)
    ctx = z3.Context()
    bounds, claim = _stalling_claim(ctx)
    s = z3.Solver(ctx=ctx)
    s.add(*bounds, z3.Not(claim))
    units = 100 * solver.UNITS_PER_MS
    result, used = solver.check(s, solver.units(100))
    assert result == z3.unknown
    assert used <= units * 1.1 and int(s.statistics().get_key_value("rlimit count")) <= units * 1.1
    assert solver.why_unknown(s, 100) == f"no answer within its limit of {units:,} resource units (about 0.1 s of solving)"
