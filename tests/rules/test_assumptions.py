"""ASSUMPTIONS-SATISFIABLE, the admitted size range at launch, and rule-code arguments."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.runtime.binding import check_assumptions

CODE = "ASSUMPTIONS-SATISFIABLE"


def copy(*assumptions):
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.split(0, 2)
    t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    for a in assumptions:
        fusion.assume(a)
    return fusion


def test_contradictory_assumptions_are_rejected_with_the_conflict_and_a_witness():
    report = tp.verify(copy("T0_0 > 10", "T0_0 % 2 == 0", "T0_0 < 5"))
    assert report.codes == [CODE]
    d = report.errors[0]
    assert "T0_0 > 10" in d.message and "T0_0 < 5" in d.message and "% 2" not in d.message  # a minimal conflict
    assert d.counterexample["T0_0"] > 10 and d.counterexample["violates"] == "T0_0 < 5"


def test_a_binding_that_contradicts_an_assumption_is_rejected():
    report = tp.verify(copy("T0_0 % 2 == 0"), bind={"T0_0": 7})
    assert CODE in report.codes and "T0_0 = 7" in report.errors[0].message


def test_an_assumption_outside_the_admitted_range_is_rejected():
    report = tp.verify(copy("T0_0 >= 2**32", "T0_0 % 2 == 0"))
    assert report.codes == [CODE]


def test_a_negative_operand_of_mod_has_python_semantics():
    # (2 - N) % 3 == 0 and N < 7 admit N = 2 and N = 5 in Python (floor) semantics: 5 is odd, so
    # the vectorized split by 2 is not proved (an unsigned remainder would admit N = 2 alone)
    report = tp.verify(copy("(2 - T0_0) % 3 == 0", "T0_0 < 7"))
    assert "SPLIT-DIVISIBILITY" in report.codes, report.codes
    assert report.errors[0].counterexample["T0_0"] == 5


def test_satisfiable_assumptions_pass_and_the_report_shows_the_admitted_range():
    report = tp.verify(copy("T0_0 > 10", "T0_0 % 2 == 0"))
    assert report.ok
    assert report.assumptions[0] == "1 <= T0_0 <= 2147483647"


def test_launch_refuses_sizes_the_proof_does_not_cover():
    with pytest.raises(tp.InputError, match="outside 1 .. 2147483647"):
        check_assumptions([], {"N": 2**31 + 256}, ["N"])
    check_assumptions([], {"N": 2**31 - 1}, ["N"])


@pytest.mark.parametrize("rules, match", [(["SPLIT-DIVISIBLTY"], "did you mean 'SPLIT-DIVISIBILITY'"),
                                          ("SPLIT-DIVISIBILITY", "got the string"),
                                          ([3], "rule codes are strings")])
def test_unknown_or_malformed_rule_codes_are_an_error(rules, match):
    with pytest.raises(tp.ScheduleError, match=match):
        tp.verify(copy(), rules=rules)


def test_a_factor_that_is_no_extent_symbol_is_ranged_like_a_size():
    """SYMBOLIC-FACTOR rejects a split by an unknown symbol; the other rules still decide (they
    treat it as a size) instead of crashing on a variable without a range."""
    import sympy

    with tp.Fusion("unknown_factor") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.split(0, sympy.Symbol("F"))
    t1.axis(1).parallelize(tp.ParallelType.TIDx)
    report = tp.verify(fusion)
    assert "SYMBOLIC-FACTOR" in report.codes
    assert not any(d.internal for d in report.diagnostics), [d.message for d in report.diagnostics]
