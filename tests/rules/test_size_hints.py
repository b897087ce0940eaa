"""Help that can be acted on for symbolic sizes (issue 11 item 2): SPLIT-DIVISIBILITY names the
extent it splits, with the assumption written as the Python a user pastes back."""

from __future__ import annotations

import re

import tileproof as tp

P = tp.ParallelType
ASSUME = re.compile(r'fusion\.assume\("([^"]+)"\)')


def vectorized_rows():
    """T1[M, N] copied with the rows split by 4 and vectorized: only N is split."""
    with tp.Fusion("vec_rows") as fusion:
        t0 = tp.make_tensor(["M", "N"])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.split(1, 4)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion


def only(report, code):
    (d,) = [d for d in report.diagnostics if d.code == code]
    return d


def test_split_divisibility_names_the_extent_it_splits():
    d = only(tp.verify(vectorized_rows()), "SPLIT-DIVISIBILITY")
    assert "M = " in d.message  # the counterexample has both sizes ...
    assert "M * N" not in d.hint and "split M" not in d.hint  # ... but only N is split
    assert "by a factor that always divides N" in d.hint and d.ids[0] in d.hint
    (claim,) = ASSUME.findall(d.hint)
    assert claim == "N % 4 == 0"
    fusion = vectorized_rows()
    fusion.assume(claim)
    assert not [x for x in tp.verify(fusion).diagnostics if x.code == "SPLIT-DIVISIBILITY"]
