"""codegen/lower/invariants.py: the invariant divisions of an unrolled nest's predicates are named
once, to the same values; the pass declares the names (IndexNames) before the nest that reads them."""

from __future__ import annotations

import random

import tileproof as tp
from tileproof.codegen.ir import IndexNames, WholeTile, walk
from tileproof.codegen.lower import lower
from tileproof.codegen.lower.invariants import Invariants, is_unrolled_nest
from tileproof.model.expr import evaluate, var
from tileproof.recipes import Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm

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
    assert inv.declarations().names == [(name, n) for n, name in inv.named.items()]


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


def _partial_tile_gemm():
    """A 128 x 192 tile at 8000 x 8000: its epilogue's predicates divide by 42 (a partial tile's
    origin), and its tiles at M's and N's ends make the epilogue a WholeTile."""
    ws = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=192),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=ws),
                              grid=GridOrder(group=16, persistent=128), cluster=Cluster(size=2),
                              epilogue=Epilogue(dtype=tp.bfloat16))
    return hopper_gemm(8000, 8000, 8192, params).snapshot()


def test_the_pass_names_to_the_same_values_before_each_nest():
    """Node for node, every predicate after the pass equals the one before it at random points,
    its names given the values declared; each name is declared right before the nest reading it,
    and the numbering runs on through the kernel."""
    fusion, target = _partial_tile_gemm(), tp.get_target("sm_90a")
    before = lower(fusion, target, until="whole-tile").kernel
    after = lower(fusion, target, until="invariants").kernel
    declared = [n for n in walk(after.body) if isinstance(n, IndexNames)]
    names = {name: value for d in declared for name, value in d.names}
    assert len(declared) >= 1 and list(names) == [f"tp_inv{k}" for k in range(len(names))]
    assert any(isinstance(n, WholeTile) for n in walk(after.body))
    old = list(walk(before.body))
    new = [n for n in walk(after.body) if not isinstance(n, IndexNames)]
    assert [type(n) for n in old] == [type(n) for n in new]
    pairs = [(a, b) for m, n in zip(old, new) for a, b in zip(getattr(m, "conds", []), getattr(n, "conds", []))]
    renamed = [(a, b) for a, b in pairs if a != b]
    assert renamed and all(set(b.lhs.free_vars() | b.rhs.free_vars()) & set(names) for _, b in renamed)
    rng = random.Random(1)
    for _ in range(30):
        env = {v: rng.randrange(1, 300) for a, _ in pairs for v in a.lhs.free_vars() | a.rhs.free_vars()}
        env.update({name: evaluate(value, env) for name, value in names.items()})
        for a, b in pairs:
            assert (evaluate(a.lhs, env), evaluate(a.rhs, env)) == (evaluate(b.lhs, env), evaluate(b.rhs, env))
    for scope in [after.body] + [n.body for n in walk(after.body) if hasattr(n, "body")]:
        for k, n in enumerate(scope):
            if isinstance(n, IndexNames):
                nest = scope[k + 1]
                assert is_unrolled_nest(nest)
                conds = getattr(nest, "guard", []) + [c for m in walk([nest]) for c in getattr(m, "conds", [])]
                assert {name for name, _ in n.names} <= {v for c in conds for v in c.lhs.free_vars() | c.rhs.free_vars()}
