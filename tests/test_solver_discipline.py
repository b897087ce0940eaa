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
