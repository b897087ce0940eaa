"""benchmarks/fuzz.py draws a case from its seed and index alone: the same case in a fresh process
as in one that has drawn and verified others (Hypothesis draws some values from constants it
collects out of the modules a process has imported; fuzz.draw_case turns those draws off), so
that `fuzz.py --case I` and report_causes.py rebuild the case a run reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tileproof as tp
import fuzz  # benchmarks/fuzz.py (benchmarks/ is on pytest's pythonpath)

BENCHMARKS = Path(fuzz.__file__).resolve().parent
CASES = (6, 21, 29, 77)


def fresh_steps(seed: int, index: int) -> list[str]:
    code = (f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); from fuzz import draw_case; "
            f"print(repr(draw_case({seed}, {index}, ('mutated',))[2].steps))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 - a list of strings this test printed


def test_a_case_is_the_same_after_other_draws_and_verifies():
    for i in range(max(CASES)):  # what a survey does before those cases: draw, and verify some
        _, target, case = fuzz.draw_case(120, i, ("mutated",))
        if i % 3 == 0:
            tp.verify(case.fusion, target)
    for index in CASES:
        assert fuzz.draw_case(120, index, ("mutated",))[2].steps == fresh_steps(120, index), index
