"""Codegen renders, never proves (issue 32): tp.verify records what the code generator needs
proved on its Report (`decisions`: hole predicates the assumptions make redundant, an
ldmatrix's registers, each tcgen05 pattern), and tp.compile of a verified fusion reads them
and asks z3 nothing. A decision the Report lacks keeps its predicate, or refuses the
warp-collective instruction that would need it: never a guess."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import z3

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.execution.predicates import Implied, claims
from tileproof.model.targets import get_target
from tileproof.reports import report_to_json
from tileproof.schedule_files import discover
from tileproof.testing import NotBuilt, compile_unverified
from tileproof.verifier.diagnostics import Decisions

ROOT = Path(__file__).resolve().parents[2]
CASES = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / f)
                                      for f in ("assumptions.py", "ldst_matrix.py", "tmem_access.py")])}
HOLE = "if (((i0 * 4U) + 3U) < s_T0_0)"  # consistent_bounds' hole: T0_0 % 4 == 0 rules it out

pytestmark = pytest.mark.usefixtures("private_cache")


def _verified(name: str):
    case = CASES[name]
    fusion = case.build()
    report = tp.verify(fusion, case.target)
    assert report.ok, report.codes
    return fusion, report, case.target


def _source(fusion, target: str, decisions: Decisions | None) -> str:
    return emit(lower(fusion.snapshot(), get_target(target), decisions).kernel, cuda_headers=False)


@pytest.mark.parametrize("name", ["consistent_bounds", "ldmatrix_x4", "warp_xyz"])
def test_compile_after_verify_asks_z3_nothing(name, monkeypatch):
    """A hole dropped under an assumption, an ldmatrix's consecutive registers, a tcgen05
    pattern (sm_100a): all read from the Report; z3.Solver.check raising proves no query ran."""
    fusion, report, target = _verified(name)
    assert report.decisions.claims or report.decisions.tcgen05

    def no_solver(self, *args, **kwargs):
        raise AssertionError("tp.compile asked z3 after tp.verify")

    monkeypatch.setattr(z3.Solver, "check", no_solver)
    kernel = tp.compile(fusion, target)
    assert kernel.report is report


def test_the_hole_verify_proved_redundant_is_the_one_left_out():
    fusion, report, target = _verified("consistent_bounds")
    (claim,) = claims(fusion.snapshot())
    assert isinstance(claim, Implied) and report.decisions.verdicts[claim] is True
    assert HOLE not in tp.compile(fusion, target).cuda_source


@pytest.mark.parametrize("decisions", [Decisions(), "refuted"], ids=["missing", "refuted"])
def test_a_report_without_the_decision_keeps_the_predicate(decisions):
    fusion, report, target = _verified("consistent_bounds")
    if decisions == "refuted":
        decisions = Decisions(tuple((c, False) for c, _ in report.decisions.claims), report.decisions.tcgen05)
    assert HOLE not in _source(fusion, target, report.decisions)
    assert HOLE in _source(fusion, target, decisions)


@pytest.mark.parametrize("name, says", [
    ("ldmatrix_x4", "no decision of tp.verify says whether the 8 elements a lane gives ldmatrix are consecutive"),
    ("warp_xyz", "no decision of tp.verify gives the tcgen05 pattern of the store into T2"),
])
def test_a_warp_collective_instruction_without_its_decision_is_refused(name, says):
    fusion, report, target = _verified(name)
    _source(fusion, target, report.decisions)  # with it: lowered
    with pytest.raises(tp.UnsupportedSchedule, match=says):
        _source(fusion, target, Decisions())


def test_verify_decides_only_when_every_rule_runs_without_bind():
    """A subset of rules or bound sizes prove less than tp.compile needs: no decisions."""
    case = CASES["consistent_bounds"]
    assert tp.verify(case.build(), case.target).decisions.claims
    assert tp.verify(case.build(), case.target, rules=["SPLIT-DIVISIBILITY"]).decisions == Decisions()
    assert tp.verify(case.build(), case.target, bind={"T0_0": 16}).decisions == Decisions()


def test_a_rejection_whose_rules_did_not_all_run_records_no_decision():
    case = next(c for c in discover([str(ROOT / "examples" / "invalid" / "lowering.py")])
                if c.name == "split_by_unknown_symbol")
    report = tp.verify(case.build(), case.target)
    assert report.codes == ["SYMBOLIC-FACTOR"] and report.rules_not_run
    assert report.decisions == Decisions()


def test_compile_unverified_refuses_an_ldmatrix_its_report_did_not_decide(monkeypatch):
    """A rejected report without the decision (made so here): the instruction is not built."""
    from tileproof import testing
    from tileproof.verifier.diagnostics import Diagnostic, Severity

    real = testing.verify
    made_up = Diagnostic("SPLIT-DIVISIBILITY", Severity.ERROR, "made up for the test")
    monkeypatch.setattr(testing, "verify", lambda fusion, target: dataclasses.replace(
        real(fusion, target), diagnostics=[made_up]))
    monkeypatch.setattr(testing, "rejected_decisions", lambda fusion, target, report: Decisions())
    case = CASES["ldmatrix_x4"]
    with pytest.raises(NotBuilt, match="no decision of tp.verify says whether the 8 elements"):
        compile_unverified(case.build(), case.target)


def test_the_json_report_leaves_the_decisions_out():
    _, report, _ = _verified("consistent_bounds")
    data = json.loads(report_to_json(report))
    assert "decisions" not in data and data["ok"] is True


def test_compile_unverified_decides_what_a_rejected_report_did_not(monkeypatch):
    """A rejecting verify spends no query on decisions; compile_unverified asks for them itself
    (verify.rejected_decisions), so a rejected ldmatrix schedule is still built."""
    from tileproof import testing
    from tileproof.verifier.diagnostics import Diagnostic, Severity

    real = testing.verify
    made_up = Diagnostic("SPLIT-DIVISIBILITY", Severity.ERROR, "made up for the test")
    monkeypatch.setattr(testing, "verify", lambda fusion, target: dataclasses.replace(
        real(fusion, target), decisions=Decisions(), diagnostics=[made_up]))
    case = CASES["ldmatrix_x4"]
    kernel = compile_unverified(case.build(), case.target)
    assert kernel.cuda_source.startswith(testing.UNVERIFIED_BANNER) and "ldmatrix" in kernel.cuda_source


def test_a_rejecting_verify_records_no_decision():
    case = next(c for c in discover([str(ROOT / "examples" / "invalid" / "ldst_matrix.py")]))
    report = tp.verify(case.build(), case.target)
    assert not report.ok and report.decisions == Decisions()


def test_compile_after_verify_of_a_schedule_whose_loops_give_their_types_asks_z3_nothing(monkeypatch):
    """A producer inlined into its consumer's BIDx and TIDx loops takes their types in the snapshot
    verify reads (model/loop_map.py); verify keys its accepted report by the schedule as written,
    which is what compile looks up, so compile does not verify again."""
    with tp.Fusion("types_from_the_loop") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.add(t0, 1.0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t2.split(0, 128)
    tp.propagate_transforms(t2)
    tp.inline_most(fusion)
    t2.axis(0).parallelize(tp.ParallelType.BIDx)
    t2.axis(1).parallelize(tp.ParallelType.TIDx)  # t1's axes stay Serial as written
    report = tp.verify(fusion)
    assert report.ok

    def no_solver(self, *args, **kwargs):
        raise AssertionError("tp.compile asked z3 after tp.verify")

    monkeypatch.setattr(z3.Solver, "check", no_solver)
    kernel = tp.compile(fusion)
    assert kernel.report is report
