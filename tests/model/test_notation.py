"""Sizes and assumptions in user output are Python a user writes (model/notation.py): index
expressions evaluate, with Python's // % ^, to the value the index algebra computes, and an
assumption a report prints can be pasted back into fusion.assume."""

from __future__ import annotations

import math
import random

import pytest
import sympy

import tileproof as tp
from tileproof.model.expr import evaluate
from tileproof.model.expr import expr_str
from tileproof.model.notation import user_str

from support.expr_gen import random_expr


@pytest.mark.parametrize("expr,text", [
    ("Eq(Mod(M*N, 4), 0)", "M*N % 4 == 0"),
    ("ceiling(ceiling(M*N/4)/128)", "ceil(ceil(M*N / 4) / 128)"),
    ("2*floor((M + 1)/4)", "2*((M + 1) // 4)"),
    ("Mod(4*M + N, 6)", "(4*M + N) % 6"),
    ("Ne(M, 3)", "M != 3"),
])
def test_printed_as_written(expr, text):
    names = {"M": sympy.Symbol("M", integer=True, positive=True), "N": sympy.Symbol("N", integer=True, positive=True)}
    assert user_str(sympy.sympify(expr, locals=names)) == text


def test_printed_sizes_evaluate_to_the_algebra_value():
    rng = random.Random(0)
    for _ in range(1000):
        e = random_expr(rng, 4)
        env = {v: rng.randrange(1, 50) for v in e.free_vars()}
        try:
            want = evaluate(e, env)
        except ZeroDivisionError:
            continue
        got = eval(expr_str(e), {"ceil": math.ceil, "max": max}, dict(env))  # noqa: S307
        assert got == want, expr_str(e)


def test_a_printed_assumption_pastes_back_into_assume():
    """SPLIT-DIVISIBILITY's hint for a split of ceil(T0_0 / 4) by 128 is the assumption to paste."""
    from support.examples import example_module

    fusion = example_module("valid", "tmem_performant_copy").performant_vectorized_copy_schedule()  # without the example's assumption
    report = tp.verify(fusion, "sm_100a")
    hints = [d.hint for d in report.diagnostics if d.code == "SPLIT-DIVISIBILITY" and "ceil(" in (d.hint or "")]
    assert hints
    for hint in hints:
        text = hint.split('fusion.assume("')[1].split('")')[0]
        fusion.assume(text)
        assert user_str(fusion.assumptions[-1]) == text
