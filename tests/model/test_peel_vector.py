"""peel_vector (model/vectorize.py) takes a vector index out of the divisions and modulos that
split it off a multiple of the vector width, and never changes an offset's value: checked by
evaluation over every vector element and a grid of the other indices."""

from __future__ import annotations

import itertools

import pytest

from tileproof.model.expr import const, evaluate, var
from tileproof.model.vectorize import peel_vector, unit_stride

V, X, Y, K = var("v"), var("x"), var("y"), var("K")


def same_values(original, peeled, n):
    for v, x, y, k in itertools.product(range(n), range(9), range(5), (1, 3, 8)):
        env = {"v": v, "x": x, "y": y, "K": k}
        assert evaluate(original, env) == evaluate(peeled, env), env


@pytest.mark.parametrize("n, d", [(4, 8), (4, 4), (2, 16), (8, 64), (1, 3)])
def test_a_split_off_vector_is_peeled_and_keeps_its_value(n, d):
    inner = X * n + V
    offset = K * (Y * 16 + inner // d) + inner % d  # a merged tile split into n-element vectors
    peeled = peel_vector(offset, "v", n)
    same_values(offset, peeled, n)
    assert unit_stride(peeled, "v")


@pytest.mark.parametrize("offset, n", [
    ((X * 2 + V) // 8, 4),  # 2 x is not a multiple of the vector
    ((X * 4 + V) % 6, 4),  # the divisor is not a multiple of the vector
    ((X * 4 + V * 2) % 8, 4),  # the vector index is scaled
    ((X * 4 + V + 1) // 8, 4),  # an offset that is not a multiple
])
def test_other_divisions_are_left_alone(offset, n):
    peeled = peel_vector(offset, "v", n)
    assert peeled == offset
    same_values(offset, peeled, n)


def test_nested_splits():
    offset = ((((X * 8 + V) // 4) * 4 + (X * 8 + V) % 4) // 16) * 100 + (X * 8 + V) % 16
    peeled = peel_vector(offset, "v", 4)
    same_values(offset, peeled, 4)
    assert const(0) != peeled


def test_a_divisor_assumed_a_multiple_of_the_vector_peels():
    """(4 x + v) % K = (4 x) % K + v and (4 x + v) // K = (4 x) // K where K % 4 == 0 is assumed
    (steps): a promoted vector's index into its row; not without the assumption."""
    for offset in ((X * 4 + V) % K, (X * 4 + V) // K):
        peeled = peel_vector(offset, "v", 4, {"K": 4})
        assert peeled != offset and peel_vector(offset, "v", 4) == offset
        for v, x, k in itertools.product(range(4), range(40), (4, 8, 12)):
            env = {"v": v, "x": x, "K": k}
            assert evaluate(offset, env) == evaluate(peeled, env), env
    assert unit_stride(peel_vector((X * 4 + V) % K, "v", 4, {"K": 8}), "v")
