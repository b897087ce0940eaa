"""Counterexamples a person reads (issue 11 item 4): the smallest sizes, indices and threads
that break the schedule (a size the verdict does not depend on is 1, not 2147483555); and
IterDomains named per fusion in creation order, as the printed schedule tree names them, so
that a schedule prints the same report whatever else the process built."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.cli import main
from tileproof.model import expr as E
from tileproof.reports import report_to_text
from tileproof.schedule_files import build_fusion, discover
from tileproof.verifier.solver import MAX_EXTENT, Query

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
P = tp.ParallelType
TIMING = re.compile(r"\(\d+\.\d+ s, \d+ z3 quer(?:y|ies)\)")


# -- smallest counterexamples ----------------------------------------------------------------

def vectorized_rows(shape):
    """Rows of N floats read four at a time, one row per block: misaligned when N % 4 != 0."""
    with tp.Fusion("vectorized_rows") as fusion:
        t0 = tp.make_tensor(shape); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
        t.split(1, 4)
        t.axis(2).parallelize(P.Vectorize)
    return fusion


def test_a_size_is_as_small_as_the_failure_allows():
    """Before: N = 1073741817 (z3's first model); the second row is misaligned from N = 1 on."""
    report = tp.verify(vectorized_rows(["M", "N"]))
    d = next(d for d in report.errors if d.code == "VECTORIZE-CONTIGUOUS")
    assert d.counterexample["N"] == 1  # any N % 4 != 0 would do: the smallest is shown
    assert d.counterexample["M"] == 2  # a second row, in block 1, is needed
    assert d.counterexample["blockIdx.x"] == 1
    assert "1073741817" not in report_to_text(report)


def test_a_size_the_failure_does_not_depend_on_is_one():
    report = tp.verify(vectorized_rows(["M", 6]))
    for d in report.errors:
        if d.code == "SPLIT-DIVISIBILITY":  # 6 % 4 != 0 whatever M is
            assert d.counterexample["M"] == 1 and "when M = 1" in d.message


def test_the_symbolic_ldmatrix_example_prints_small_sizes():
    """Before: M = 2147482953, K = 273 in LDSM-THREAD-ROWS of ldst_matrix_set_any_size."""
    (case,) = discover([f"{EXAMPLES / 'invalid' / 'ldst_matrix.py'}::ldst_matrix_set_any_size"])
    report = tp.verify(build_fusion(case), case.target)
    sizes = [v for d in report.errors for k, v in d.counterexample.items() if k in ("M", "K")]
    assert sizes and max(sizes) <= 256, sizes


@pytest.fixture
def unhurried_shrink(monkeypatch):
    """The shrink's 0.1 s budget is for reports; these tests check where it ends, not how fast
    (a loaded machine once stopped it at x = 4)."""
    from tileproof.verifier import solver

    monkeypatch.setattr(solver, "SHRINK_SECONDS", 10.0)


def test_the_solver_shrinks_a_symbol_to_the_smallest_failing_value(unhurried_shrink):
    n, x = E.var("N"), E.var("x")
    q = Query([n, E.const(1000)], {"x": E.const(8)}, symbols={"N": (1, MAX_EXTENT), "M": (1, MAX_EXTENT)})
    q.add(q.eq(E.mod(n, E.const(7)), E.const(3)))
    out = q.prove(q.lt(E.add(n, x), E.const(1000)))
    # sizes first: the smallest N with N % 7 == 3 that some x < 8 takes to 1000 is 997 (x = 3);
    # M is in no fact but its range
    assert out.model == {"N": 997, "M": 1, "x": 3}


def test_the_rules_smallest_witness_is_kept_after_the_sizes(unhurried_shrink):
    n, t = E.var("N"), E.var("t")
    q = Query([E.mul(t, n)], {"t": E.const(32)}, symbols={"N": (1, MAX_EXTENT)})
    out = q.prove(q.lt(E.mod(E.mul(t, n), E.const(64)), E.const(7)), smallest=t)
    assert out.model == {"N": 1, "t": 7}


# -- IterDomain names ------------------------------------------------------------------------

def copy_split():
    with tp.Fusion("copy_split") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 32]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t1.split(0, 8)
    return fusion, t0, t1


def test_iterdomains_are_numbered_per_fusion_in_creation_order():
    copy_split()
    fusion, t0, t1 = copy_split()  # the second fusion of the process starts at i0 again
    assert [i.name for i in t0.logical] == ["i0", "i1"]
    assert [i.name for i in t1.logical] == ["i2", "i3"]
    assert [i.name for i in t1.loop] == ["i4", "i5", "i3"]
    assert len({i.uid for i in t0.logical + t1.loop}) == 5  # uid stays the unique internal key


def test_a_broadcast_iterdomain_is_named_like_its_label():
    with tp.Fusion("bcast") as fusion:
        t0 = tp.make_contig_concrete_tensor([8]); fusion.add_input(t0)
        t1 = tp.broadcast(t0, [True, False]); fusion.add_output(t1)
    b = t1.logical[0]
    assert b.name == "b1" and b.label() == "b1{1}"  # t0 has i0; t1 is [b1, i2]


def test_verifying_a_file_prints_the_same_report_whatever_ran_before(capsys):
    """Before: IterDomain names came from a process-wide counter, so the second run printed
    i-numbers shifted by every IterDomain built in between."""
    path = f"{EXAMPLES / 'invalid' / 'allocation_distinct.py'}::figure14d_block_axis_made_a_vector"
    main(["verify", path])
    first = TIMING.sub("", capsys.readouterr().out)
    copy_split()
    main(["verify", path])
    second = TIMING.sub("", capsys.readouterr().out)
    assert first == second and "ALLOCATION-DISTINCT" in first


ID_TOKEN = re.compile(r"(?:(?<=[^\w.{])|^)(?:T\d+\.)?([ib]\d+)\b(?!\{)")  # not .b16 (a PTX type)


@pytest.mark.parametrize("case", [c for c in discover([str(EXAMPLES)]) if not c.expect.ok], ids=lambda c: c.name)
def test_diagnostics_name_iterdomains_as_the_schedule_tree_prints_them(case):
    """An IterDomain named in a diagnostic's text or counterexample (`i7`, `T1.i7`) is a serial
    one the tree prints as `i7{..}`; a loop index of a Vectorize, Bulk or Unroll axis is named
    by its label (`T1.Vectorize{4}`), as the tree shows it."""
    report = tp.verify(build_fusion(case), case.target)
    labels = {name: label for t in report.tensors for name, label in t.id_labels.items()}
    for d in report.diagnostics:
        texts = [d.message, d.hint or "", *d.notes, *d.labels, *map(str, d.counterexample)]
        for text in texts:
            for name in ID_TOKEN.findall(text):
                assert labels.get(name, "").startswith(name + "{"), (
                    f"{d.code} names {name} in {text!r}, but the schedule tree shows {labels.get(name)}")


def test_a_vectorized_loop_index_is_named_by_its_label():
    report = tp.verify(vectorized_rows(["M", "N"]))
    d = next(d for d in report.errors if d.code == "VECTORIZE-CONTIGUOUS" and d.tensor == "T1")
    assert "T1.Vectorize{4}" in d.counterexample and "with the vector index T1.Vectorize{4}" in d.notes[0]
    assert "Vectorize{4}" in report_to_text(report)
