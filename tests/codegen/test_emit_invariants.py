"""codegen/lower/invariants.py and launch_dims.py: the invariant divisions of unrolled nests and of
statements in serial loops are named once, to the same values, and declared (IndexNames) where all
they read is defined; a symbolic launch dimension is read as blockDim / gridDim. A symbolic GEMM's K
loop divides by no symbolic extent; a symbolic softmax, simulated, computes the op."""

from __future__ import annotations

import importlib
import random

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.ir import IndexNames, Loop, LoopKind, WholeTile, walk
from tileproof.codegen.lower import lower
from tileproof.codegen.lower.index_width import _ranges
from tileproof.codegen.lower.invariants import Invariants, block_uniform, divides_by_variable
from tileproof.codegen.lower.launch_dims import map_exprs
from tileproof.codegen.runtime.reference import reference, tolerance
from tileproof.execution.statements import Cond, CondKind
from tileproof.model.expr import evaluate, var
from tileproof.model.simplify import bounds
from tileproof.recipes import normalization as N

from support.reduction_sim import run_kernel
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


def _symbolic_gemm():
    """The Hopper GEMM of a shape class: M, N, K symbolic, a persistent grid over tiles."""
    matmul = importlib.import_module("tileproof.recipes.matmul")
    return matmul.shape_class_fusion("K", "K", "bfloat16").snapshot()


def _exprs(nodes) -> list:
    found: list = []
    map_exprs(nodes, lambda e: found.append(e) or e)
    return found


@pytest.mark.parametrize("build", [_partial_tile_gemm, _symbolic_gemm], ids=["partial_tile", "symbolic"])
def test_the_pass_names_to_the_same_values_where_they_are_defined(build):
    """Node for node, every predicate after the pass equals the one before it at random points,
    its names given the values declared; names are unique, and each IndexNames is first in the
    kernel (names of thread and block indices and parameters only) or first in the body of the
    serial loop whose counter each of its names reads."""
    fusion, target = build(), tp.get_target("sm_90a")
    decisions = tp.verify(fusion, target).decisions if build is _symbolic_gemm else None  # its stmatrix needs them
    before = lower(fusion, target, decisions, until="launch-dims").kernel
    after = lower(fusion, target, decisions, until="invariants").kernel
    declared = [n for n in walk(after.body) if isinstance(n, IndexNames)]
    names = {name: value for d in declared for name, value in d.names}
    assert len(declared) >= 1 and sorted(names) == sorted(f"tp_inv{k}" for k in range(len(names)))
    assert sum(len(d.names) for d in declared) == len(names)
    assert build is _symbolic_gemm or any(isinstance(n, WholeTile) for n in walk(after.body))
    old = list(walk(before.body))
    new = [n for n in walk(after.body) if not isinstance(n, IndexNames)]
    assert [type(n) for n in old] == [type(n) for n in new]
    pairs = [(a, b) for m, n in zip(old, new) for field in ("conds", "issuer", "bounds")
             for a, b in zip(getattr(m, field, []), getattr(n, field, []))]
    pairs += [(Cond(a, "<", a, "", CondKind.HOLE), Cond(b, "<", b, "", CondKind.HOLE))  # a TMA copy's box origin
              for m, n in zip(old, new) for a, b in zip(getattr(m, "coords", ()), getattr(n, "coords", ()))]
    renamed = [(a, b) for a, b in pairs if a != b]
    assert renamed and all(set(b.lhs.free_vars() | b.rhs.free_vars()) & set(names) for _, b in renamed)
    rng = random.Random(1)
    for _ in range(30):
        env = {v: rng.randrange(1, 300) for a, _ in pairs for v in a.lhs.free_vars() | a.rhs.free_vars()}
        env.update({name: evaluate(value, env) for name, value in names.items()})
        for a, b in pairs:
            assert (evaluate(a.lhs, env), evaluate(a.rhs, env)) == (evaluate(b.lhs, env), evaluate(b.rhs, env))
    entry = block_uniform(after) | {"threadIdx.x", "threadIdx.y", "threadIdx.z"}
    for n in after.body[1:]:
        assert not isinstance(n, IndexNames)
    assert isinstance(after.body[0], IndexNames)
    assert all({after.names.get(v, v) for v in e.free_vars()} <= entry for _, e in after.body[0].names)
    for loop in (n for n in walk(after.body) if isinstance(n, Loop)):
        for k, n in enumerate(loop.body):
            if isinstance(n, IndexNames):
                assert k == 0 and loop.kind is LoopKind.SERIAL
                assert all(loop.var in {after.names.get(v, v) for v in e.free_vars()} for _, e in n.names)


def test_the_symbolic_gemms_k_loops_divide_by_no_symbolic_extent():
    """The 64-bit divisions by the tile counts (tile / ceil(N / 256)) are named once per tile, at the
    top of the tile loop, not in the K loop of the producer or the consumers."""
    fusion = _symbolic_gemm()
    ir = lower(fusion, tp.get_target("sm_90a"), tp.verify(fusion, "sm_90a").decisions).kernel
    k_loops = [n for n in walk(ir.body) if isinstance(n, Loop) and n.kind is LoopKind.SERIAL
               and "K" in n.extent.free_vars()]
    assert len(k_loops) == 2  # the producer's and the consumers'
    for loop in k_loops:
        assert not [e for e in _exprs(loop.body) if divides_by_variable(e)]
    tile_loops = [n for n in walk(ir.body) if isinstance(n, Loop) and n.kind is LoopKind.SERIAL
                  and any(k in walk(n.body) for k in k_loops)]
    for loop in tile_loops:  # what the K loop read is declared at the tile loop's top
        assert isinstance(loop.body[0], IndexNames)
        assert any(divides_by_variable(e) for _, e in loop.body[0].names)


def _softmax_kernel(rows):
    fusion = N.softmax_fusion(rows)
    return fusion, lower(fusion.snapshot(), tp.get_target("sm_90a"), tp.verify(fusion, "sm_90a").decisions).kernel


def test_the_softmax_predicates_read_blockdim():
    """A row softmax of symbolic length launches ceil(ceil(N / 8) / 2) threads: its predicates read
    that as blockDim.x, in the range of the expression, and compute it nowhere."""
    fusion, ir = _softmax_kernel(N.RowClass("bfloat16", 8, 2, 512, whole=False))  # bounds checked per element
    block = ir.block[0]
    assert block.free_vars() == {"N"}
    conds = [c for n in walk(ir.body) for c in getattr(n, "conds", [])]
    assert conds and all("blockDim.x" in c.lhs.free_vars() for c in conds if "threadIdx.x" in c.lhs.free_vars())
    assert not [e for e in _exprs(ir.body) if e == block or e.has_op("ceildiv")]
    ranges = _ranges(ir)
    whole = bounds(block, {"N": ranges["N"]})
    assert ranges["blockDim.x"] == (whole.lo, whole.hi)
    src = tp.compile(fusion).cuda_source
    code = [line.split("//")[0] for line in src.splitlines()]  # a thread loop's comment names its extent
    assert any("blockDim.x" in line for line in code) and not any("/ 8ULL) + 2ULL - 1) / 2ULL)" in line for line in code)


@pytest.mark.parametrize("n, whole", [(40, True), (1000, True), (1024, True), (1004, False), (36, False)])
def test_the_simulated_symbolic_softmax_computes_the_op(n, whole):
    """The kernel of a row class, blockDim.x and the hoisted names included, simulated at row
    lengths of its class against the fusion's float64 reference (whole: no bounds checked; not
    whole: the last thread's second vector past N predicated off)."""
    fusion, ir = _softmax_kernel(N.RowClass("float32", 4, 2, whole=whole))
    x = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32).astype(np.float64)
    (got,) = run_kernel(ir, fusion, [x], {"M": 2, "N": n})
    (want,) = reference(fusion, [x])
    rtol, atol = tolerance(fusion.outputs[0].dtype)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol)
