"""Differential soundness test: z3 verdicts against brute-force enumeration.

Hypothesis builds small schedules with concrete extents (tests/support/schedule_gen.py); for each
one the oracle (tests/support/brute_force.py) decides every rule by enumerating all threads, loop
indices and register indices, and `tp.verify(fusion, "sm_100a", rules=[...])` decides it with
z3. Per rule code: brute force says violated <=> the code is in the report's codes.

Knobs (environment): TILEPROOF_DIFF_SCALE multiplies the number of examples (default 1);
TILEPROOF_DIFF_SEED runs a different, still reproducible, population instead of the
derandomized one.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, seed, settings

import tileproof as tp
from tileproof.verifier.registry import all_rules

from support.brute_force import describe, oracle
from support.schedule_gen import split_cases, swizzle_cases, tmem_cases

TARGET = "sm_100a"
ACCESS = ("TMEM-WARP-COLLECTIVE", "TMEM-ACCESS-PATTERN", "TMEM-SUBPARTITION")  # each violated by >= 10%
ACCESS_OK = (*ACCESS, "TMEM-PACKING")  # a case passing all of these reaches the sub-partition proof
FAMILIES = {
    "swizzle": (swizzle_cases, ("SWIZZLE-BIJECTIVITY", "SPLIT-DIVISIBILITY", "LAUNCH-THREADS"), 200),
    "split": (split_cases, ("SPLIT-DIVISIBILITY", "LAUNCH-THREADS"), 150),
    "tmem": (tmem_cases, ("TMEM-LANES", "TMEM-COLUMNS", *ACCESS, "TMEM-PACKING", "TMEM-VECTORIZE",
                          "SPLIT-DIVISIBILITY", "LAUNCH-THREADS"), 200),
}
SCALE = float(os.environ.get("TILEPROOF_DIFF_SCALE", "1"))
SEED = os.environ.get("TILEPROOF_DIFF_SEED")

# module-level tallies, printed by the summary fixture
CASES: Counter = Counter()  # family -> cases compared
DISAGREEMENTS: list[str] = []
VERDICTS: dict[str, Counter] = {f: Counter() for f in FAMILIES}  # family -> code -> violated count
SECONDS: Counter = Counter()
SKIPPED: dict[str, list[str]] = {}


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    yield
    lines = [f"differential soundness ({TARGET}): {sum(CASES.values())} cases compared, "
             f"{len(DISAGREEMENTS)} disagreeing (counting hypothesis' replays and shrinks of a failure)"]
    for fam, n in CASES.items():
        v = VERDICTS[fam]
        per = ", ".join(f"{c} {v[c]}/{n}" for c in FAMILIES[fam][1] if c not in SKIPPED.get(fam, ()))
        lines.append(f"  {fam}: {n} cases in {SECONDS[fam]:.1f}s; violated per rule: {per}")
        if fam == "tmem":
            lines.append(f"  tmem: all of {', '.join(ACCESS_OK)} hold in {v['access-ok']}/{n}")
    for fam, codes in SKIPPED.items():
        lines.append(f"  {fam}: rule(s) not registered, not compared: {', '.join(codes)}")
    text = "\n".join(lines)
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is not None:
        with capture.global_and_fixture_disabled():
            print("\n" + text)
    else:  # pragma: no cover
        print(text)


def _report_text(report) -> str:
    out = []
    for d in report.diagnostics:
        out.append(f"    [{d.code}] {d.message}")
        if d.counterexample:
            out.append(f"        counterexample: {d.counterexample}")
        for n in d.notes[:3]:
            out.append(f"        note: {str(n)[:400]}")
    return "\n".join(out) or "    (no diagnostics)"


def _run_family(family: str) -> None:
    strategy, codes, n = FAMILIES[family]
    registered = {r.code for r in all_rules()}
    live = [c for c in codes if c in registered]
    missing = [c for c in codes if c not in registered]
    if missing:
        SKIPPED[family] = missing
    if not live:
        pytest.skip(f"{family}: none of the rules {', '.join(codes)} is registered yet")
    start = time.perf_counter()

    config = settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=SEED is None,
                      database=None, suppress_health_check=list(HealthCheck), print_blob=False)

    def check(case):
        fusion = case.fusion
        want = oracle(fusion, live)
        report = tp.verify(fusion, TARGET, rules=live)
        got = set(report.codes)
        CASES[family] += 1
        for c in live:
            VERDICTS[family][c] += want[c].violated
        if family == "tmem" and not any(want[c].violated for c in ACCESS_OK if c in want):
            VERDICTS[family]["access-ok"] += 1
        bad = [c for c in live if want[c].violated != (c in got)]
        if not bad:
            return
        # confirm each disagreement with the rule run alone
        lines = [f"{family}: z3 and brute force disagree on {', '.join(bad)}", repr(case), describe(fusion)]
        for c in bad:
            alone = tp.verify(fusion, TARGET, rules=[c])
            lines.append(f"  {c}: brute force says {'VIOLATED' if want[c].violated else 'holds'}"
                         f"; z3 says {'VIOLATED' if c in alone.codes else 'holds'} (alone), "
                         f"{'VIOLATED' if c in got else 'holds'} (with the family's rules)")
            for w in want[c].witness:
                lines.append(f"    witness: {w}")
            lines.append(_report_text(alone))
        msg = "\n".join(lines)
        DISAGREEMENTS.append(msg)
        raise AssertionError(msg)

    test = given(strategy())(check)
    if SEED is not None:
        test = seed(int(SEED))(test)
    try:
        config(test)()
    finally:
        SECONDS[family] += time.perf_counter() - start


def test_swizzle_differential():
    _run_family("swizzle")
    v, n = VERDICTS["swizzle"], CASES["swizzle"]
    if "SWIZZLE-BIJECTIVITY" not in SKIPPED.get("swizzle", ()):
        assert 0.2 * n <= v["SWIZZLE-BIJECTIVITY"] <= 0.8 * n, f"unbalanced swizzle population: {v} of {n}"


def test_split_differential():
    _run_family("split")
    v, n = VERDICTS["split"], CASES["split"]
    if "SPLIT-DIVISIBILITY" not in SKIPPED.get("split", ()):
        assert v["SPLIT-DIVISIBILITY"] >= 0.05 * n, f"too few indivisible splits: {v} of {n}"


def test_tmem_differential():
    _run_family("tmem")
    v, n = VERDICTS["tmem"], CASES["tmem"]
    # the population must exercise both verdicts of every access rule
    if not any(c in SKIPPED.get("tmem", ()) for c in ACCESS):
        assert v["access-ok"] >= 0.15 * n, f"too few tmem cases pass every access rule: {v} of {n}"
        for c in ACCESS:  # sub-partition failures over 128 lanes count as TMEM-LANES, hence 10%
            assert v[c] >= 0.10 * n, f"too few tmem cases violate {c}: {v} of {n}"


def test_zz_totals():
    """Runs last in this module: the whole population was compared without a disagreement."""
    total = sum(CASES.values())
    if not total:
        pytest.skip("no family ran (rules not registered)")
    assert not DISAGREEMENTS, f"{len(DISAGREEMENTS)} disagreeing example(s); last (minimal) one:\n{DISAGREEMENTS[-1]}"
    if SCALE >= 1 and not SKIPPED:
        assert total >= 500, f"only {total} cases compared"
