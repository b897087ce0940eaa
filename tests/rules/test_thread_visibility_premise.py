"""THREAD-VISIBILITY's claim assumes the writer's block is the reader's (SMEM-BLOCK-VISIBILITY's
claim); it stays silent for a read only where that block claim has a counterexample its own rule
reports. An undecided block claim, or a block rule not among those run (tp.verify(..., rules=...)),
leaves the thread claim's own counterexample in the report."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import tileproof as tp
from tileproof.model.targets import get_target
from tileproof.verifier.analysis import visibility
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.solver import Outcome, Verdict

P = tp.ParallelType
THREAD, BLOCK = "THREAD-VISIBILITY", "SMEM-BLOCK-VISIBILITY"


def registers_across_thread_axes() -> tp.Fusion:
    """T1 in registers on [BIDx, TIDx{32}], read by T2 on [BIDx, TIDy{32}]: each block's own
    rows (the block claim holds), the thread (x = 0, y = 5) reading what (x = 5, y = 0) holds."""
    with tp.Fusion("registers_across_thread_axes") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    for t, threads in ((t1, P.TIDx), (t2, P.TIDy)):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(threads)
    return fusion


def thread_findings(fusion, running, block_verdict=None, monkeypatch=None):
    if block_verdict is not None:
        real = visibility._proof

        def block_claim_answers(ctx, op, k, claim):
            if claim.code == BLOCK:
                return SimpleNamespace(outcome=Outcome(block_verdict))
            return real(ctx, op, k, claim)
        monkeypatch.setattr(visibility, "_proof", block_claim_answers)
    ctx = VerifyContext(fusion.snapshot(), get_target("sm_90a"), {})
    ctx.running = frozenset(running)
    return list(visibility.check_claims(ctx, THREAD))


def test_the_schedule_is_rejected_by_the_thread_claim_alone():
    report = tp.verify(registers_across_thread_axes())
    assert [d.code for d in report.errors] == [THREAD]
    assert thread_findings(registers_across_thread_axes(), {THREAD, BLOCK})


@pytest.mark.parametrize("verdict, running, silent", [
    (Verdict.COUNTEREXAMPLE, {THREAD, BLOCK}, True),  # the block rule reports the cause
    (Verdict.COUNTEREXAMPLE, {THREAD}, False),  # the block rule is not run: nothing would report it
    (Verdict.UNKNOWN, {THREAD, BLOCK}, False),  # undecided: the thread counterexample is the concrete one
    (Verdict.PROVED, {THREAD, BLOCK}, False),
])
def test_the_thread_claim_defers_only_to_a_block_counterexample_its_rule_reports(monkeypatch, verdict, running,
                                                                                  silent):
    found = thread_findings(registers_across_thread_axes(), running, verdict, monkeypatch)
    assert (found == []) is silent, [d.message for d in found]
    assert all(d.code == THREAD and d.counterexample for d in found)
