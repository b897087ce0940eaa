"""emit/invariants.py: the invariant divisions of an unrolled nest's predicates are named once,
to the same values."""

from __future__ import annotations

import random

from tileproof.codegen.emit.invariants import Invariants
from tileproof.model.expr import evaluate, var

I0, BX, TX, I18, I22 = (var(n) for n in ("i0", "blockIdx.x", "threadIdx.x", "i18", "i22"))
OUTER = frozenset({"i0", "blockIdx.x", "threadIdx.x"})


def _row():  # a 192-wide partial tile's column predicate: its origin divides by 42
    return ((I0 * 8 + BX // 16) % 42) * 192 + I18 * 64 + ((I22 // 4) * 4 + TX % 4) * 2 + I22 % 2


def test_the_tile_origin_is_named_and_the_loop_indices_stay():
    inv = Invariants(OUTER, {}, 0)
    e = inv.rewrite(_row())  # the origin, and threadIdx.x % 4 inside the product by 2
    assert inv.count == 2 and any(n.has_op("mod") and "i0" in n.free_vars() for n in inv.named)
    assert all(not n.free_vars() & {"i18", "i22"} for n in inv.named)
    assert e.free_vars() == {"tp_inv0", "tp_inv1", "i18", "i22"}
    assert inv.declarations(str, "unsigned") == [f"const unsigned {name} = {n};" for n, name in inv.named.items()]


def test_the_rewritten_predicate_has_the_same_values():
    inv = Invariants(OUTER, {}, 0)
    e = inv.rewrite(_row())
    rng = random.Random(0)
    for _ in range(200):
        env = {"i0": rng.randrange(20), "blockIdx.x": rng.randrange(128), "threadIdx.x": rng.randrange(128),
               "i18": rng.randrange(3), "i22": rng.randrange(8)}
        names = {name: evaluate(n, env) for n, name in inv.named.items()}
        assert evaluate(e, {**env, **names}) == evaluate(_row(), env)


def test_a_term_without_division_or_of_an_inner_name_is_left_alone():
    inv = Invariants(OUTER, {}, 3)
    plain = TX * 2 + I18
    assert inv.rewrite(plain) == plain and inv.count == 0
    inner = I18 // 3 + I22 % 5  # each reads a loop index of the nest
    assert inv.rewrite(inner) == inner and inv.count == 0
    assert inv.rewrite(BX % 7 + I22).free_vars() == {"tp_inv3", "i22"}  # numbered from `first`


def test_names_are_compared_as_the_kernel_prints_them():
    inv = Invariants(frozenset({"s_N"}), {"N": "s_N"}, 0)  # an extent parameter
    assert inv.rewrite(var("N") // 8 + I22).free_vars() == {"tp_inv0", "i22"}
