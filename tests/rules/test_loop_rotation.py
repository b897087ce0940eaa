"""LOOP-ROTATION and tp.rotate_loop (nvFuser's scheduler_utils::rotateLoop): what is refused, by the
API or the rule, and what an accepted rotation lowers to (compiled by NVRTC here; the values on the
GPU: tests/gpu/test_loop_rotation.py)."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.model.fingerprint import fingerprint
from tileproof.rule_examples import copy_chain
from support.rotated_schedules import rotated_flat, rotated_rows

P = tp.ParallelType


def _errors(fusion) -> list[str]:
    return sorted({d.code for d in tp.verify(fusion, "sm_90a").diagnostics if d.severity is tp.Severity.ERROR})


def test_the_rotated_statements_run_for_iteration_zero_before_the_loop_and_the_next_at_its_end():
    fusion, _ = rotated_rows("rotated_rows")
    assert _errors(fusion) == []
    src = tp.compile(fusion, "sm_90a").cuda_source
    body = src[src.index("__global__"):]
    first, loop = body.index("rotated: iteration 0"), body.index("for (")
    nxt, last = body.index("rotated: the next iteration"), body.index("the last iteration")
    assert first < loop < body.index("T4[") < nxt < last  # prologue, the loop, its unrotated store, i + 1's, the last
    assert body[first:loop].count("T1[0ULL] = T0[") == 1 and "expf" in body[first:loop]
    extent = "((s_N + 32ULL - 1) / 32ULL)"
    assert f"i1 + 1U < {extent}; ++i1)" in body[loop:nxt]  # every iteration but the last: there is a next one
    assert re.search(r"const unsigned long long tp_rotated = i1 \+ 1U;\s*\{\s*const unsigned long long i1 = tp_rotated;",
                     body[nxt:last])
    assert f"const unsigned long long i1 = {extent} - 1U;" in body[last:]
    assert "T0[" not in body[last:] and "T4[" in body[last:]  # the last iteration: the unrotated statements alone
    assert body.count("T0[") == 2 and body.count("expf") == 2  # each rotated statement twice, nothing else


def test_a_rotation_changes_the_fingerprint():
    plain, *_ = copy_chain("chain", [64, 8], copies=3)
    rotated, t0, t1, t2, t3 = copy_chain("chain", [64, 8], copies=3)
    for f in (plain, rotated):
        for t in f.tensors[1:]:
            t.axis(0).parallelize(P.TIDx)
        f.tensors[1].inline_at(2); f.tensors[2].inline_at(2)
    tp.rotate_loop(t3, 1, [t1])
    assert fingerprint(plain, "sm_90a") != fingerprint(rotated, "sm_90a")


def test_the_names_of_a_division_by_a_variable_are_declared_inside_the_rotated_scope():
    fusion, _ = rotated_flat("rotated_flat")
    assert _errors(fusion) == []
    src = tp.compile(fusion, "sm_90a").cuda_source
    body = src[src.index("__global__"):]
    for block in re.findall(r"tp_rotated = [^;]*;.*?\n  \}\n", body, flags=re.S):
        names = re.findall(r"(tp_inv\d+) =", block)
        for name in set(re.findall(r"tp_inv\d+", block)) - set(names):  # read there: declared outside, then i-free
            decl = re.search(rf"{name} = ([^;]*);", body).group(1)
            assert "i1" not in decl, (name, decl)


@pytest.mark.parametrize("rotated,unrotated,later", [((2,), "T1", "T2"), ((1, 3), "T2", "T3")])
def test_a_statement_left_out_before_a_rotated_one_is_rejected(rotated, unrotated, later):
    fusion, _ = rotated_rows("not_first", rotated)
    report = tp.verify(fusion, "sm_90a")
    (d,) = [d for d in report.diagnostics if d.code == "LOOP-ROTATION"]
    assert d.message.startswith(f"{unrotated} is not rotated but runs in the loop over") and f"before {later}" in d.message
    assert d.counterexample[f"{unrotated}'s place in the body"] < d.counterexample["the last rotated statement's place"]


def test_a_thread_axis_has_no_next_iteration():
    fusion, t0, t1, t2 = copy_chain("threads", [64, 8])
    for t in (t1, t2):
        t.axis(0).parallelize(P.TIDx)
    t1.inline_at(1)
    tp.rotate_loop(t2, 0, [t1])
    (d,) = [d for d in tp.verify(fusion, "sm_90a").diagnostics if d.code == "LOOP-ROTATION"]
    assert "is not a serial loop" in d.message


def test_a_selection_outside_the_loop_is_rejected():
    fusion, t0, t1, t2 = copy_chain("outside", [64, 8])
    for t in (t1, t2):
        t.axis(0).parallelize(P.TIDx)
    tp.rotate_loop(t2, 1, [t1])  # t1 not inlined: its own loop, not t2's
    (d,) = [d for d in tp.verify(fusion, "sm_90a").diagnostics if d.code == "LOOP-ROTATION"]
    assert d.message.startswith("none of the rotated statements runs in the loop over")


def test_a_rotated_statement_in_shared_memory_is_refused():
    fusion, t0, t1, t2, t3 = copy_chain("shared", [64, 8], copies=3)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2, t3):
        t.axis(0).parallelize(P.TIDx)
    t1.inline_at(2); t2.inline_at(2)
    tp.rotate_loop(t3, 1, [t1, t2])
    (d,) = [d for d in tp.verify(fusion, "sm_90a").diagnostics if d.code == "LOOP-ROTATION"]
    assert "T1" in d.message and "touches shared or tensor memory" in d.message


def test_bad_arguments_raise_schedule_errors():
    fusion, t0, t1, t2 = copy_chain("bad", [64, 8])
    other, o0, o1, o2 = copy_chain("other", [64, 8])
    for call, words in [(lambda: tp.rotate_loop("T2", 0, [t1]), "expected the TensorView"),
                        (lambda: tp.rotate_loop(t2, 2, [t1]), "axis must be an int in [-2, 2)"),
                        (lambda: tp.rotate_loop(t2, 1, []), "the selection is empty"),
                        (lambda: tp.rotate_loop(t2, 1, t1), "selection must be a list"),
                        (lambda: tp.rotate_loop(t2, 1, [t0]), "is a fusion input"),
                        (lambda: tp.rotate_loop(t2, 1, [o1]), "is not a tensor of fusion bad")]:
        with pytest.raises(tp.ScheduleError, match=re.escape(words)):
            call()
    tp.rotate_loop(t2, -1, [t1])
    with pytest.raises(tp.ScheduleError, match="rotated already"):
        tp.rotate_loop(t2, 1, [t1])


def test_the_code_generator_refuses_a_rotation_the_nest_could_not_take():
    from tileproof.testing import compile_unverified

    fusion, _ = rotated_rows("refused", (2,))
    with pytest.raises(tp.UnsupportedSchedule, match="LOOP-ROTATION"):
        compile_unverified(fusion, "sm_90a")
