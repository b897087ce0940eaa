"""Reductions in the model: tp.sum / tp.max and their checks at the door, the logical domain
(reduction IterDomains) against the shape, ops on a reduction's output, rfactor and
cache_before, inlining, allocation, the execution model of the accumulation and the store, and
the reference's values. tests/codegen/test_codegen_reductions.py covers the generated code,
tests/differential/test_differential_reduction.py runs it.
"""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.runtime.reference import reference
from tileproof.execution.statements import CondKind, store_execution, tensor_execution
from tileproof.execution.indexing import block_dims
from tileproof.model.mapping import IdMap
from tileproof.model.reduction import element_axes, neutral
from tileproof.execution.reduction import reduction_loops

P = tp.ParallelType


def fusion_2d(op="sum", axes=1, shape=("M", "N"), dtype=tp.float32):
    with tp.Fusion("reduce") as fusion:
        t0 = tp.make_tensor(list(shape), dtype=dtype)
        fusion.add_input(t0)
        t1 = getattr(tp, op)(t0, axes)
        fusion.add_output(t1)
    return fusion, t0, t1


# -- the op -----------------------------------------------------------------------------------------

def test_the_reduced_axis_stays_in_the_logical_domain_as_a_reduction_iterdomain():
    _, t0, t1 = fusion_2d()
    kinds = [i.iter_type for i in t1.get_logical_domain()]
    assert kinds == [tp.IterType.Iteration, tp.IterType.Reduction]
    reduced = t1.axis(1)
    assert reduced.is_reduction and not t1.axis(0).is_reduction
    assert reduced.name.startswith("r") and reduced.label() == f"{reduced.name}{{N}}"
    assert reduced.extent == t0.axis(1).extent
    assert element_axes(t1) == [0]
    reduced.parallelize(P.TIDx)
    assert reduced.label() == "rTIDx{N}"


@pytest.mark.parametrize("axes, shape", [(0, ["N"]), (-1, ["M"]), ([0, 1], []), ([1, 0], []), ((1,), ["M"])])
def test_axes_as_int_or_list_negative_counts_from_the_end(axes, shape):
    _, _, t1 = fusion_2d(axes=axes)
    assert [str(t1.logical[k].extent) for k in element_axes(t1)] == shape


@pytest.mark.parametrize("axes, words", [
    (2, ("sum", "axis 2", "out of range", "2 dimensions")),
    (-3, ("sum", "axis -3", "out of range")),
    ([1, -1], ("sum", "axis 1", "twice")),
    ([], ("sum", "axes is empty")),
    ("1", ("sum", "axes", "'1'")),
    ([0.5], ("sum", "axes", "0.5")),
    (True, ("sum", "axes", "True")),
])
def test_bad_axes_raise_a_schedule_error_naming_them(axes, words):
    with pytest.raises(tp.ScheduleError) as e:
        fusion_2d(axes=axes)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_reducing_a_broadcast_axis_is_refused():
    with tp.Fusion() as fusion, pytest.raises(tp.ScheduleError, match="broadcast axis, which holds one value"):
        t0 = tp.make_tensor(["M", 1])
        fusion.add_input(t0)
        tp.max(t0, 1)


def test_a_reduction_of_a_reduction_reduces_its_shape():
    """As nvFuser's (TensorDomain::noReductions): the row maxima summed, axes counted in T1's shape."""
    with tp.Fusion() as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 64])
        fusion.add_input(t0)
        t1 = tp.max(t0, 1)
        t2 = tp.sum(t1, 0)
        fusion.add_output(t2)
        with pytest.raises(tp.ScheduleError, match="axis 1 is out of range for T1 with 1 dimensions"):
            tp.sum(t1, 1)
    assert element_axes(t2) == [] and len(t2.logical) == 1
    t1.axis(0).parallelize(tp.ParallelType.TIDy)
    t1.axis(1).parallelize(tp.ParallelType.TIDx)
    t2.axis(0).parallelize(tp.ParallelType.TIDy)
    assert tp.verify(fusion).ok
    x = np.random.default_rng(0).random((8, 64)).astype(np.float32)
    (got,) = reference(fusion, [x])
    np.testing.assert_allclose(got, x.max(axis=1).sum(), rtol=1e-6)


def test_not_a_tensor_and_unknown_reduction():
    with tp.Fusion(), pytest.raises(tp.ScheduleError, match="max: expected a TensorView for tv"):
        tp.max([1, 2], 0)
    from tileproof.model.reduction import reduction

    with tp.Fusion() as fusion, pytest.raises(tp.ScheduleError, match="unknown reduction 'median'"):
        t0 = tp.make_tensor([4])
        fusion.add_input(t0)
        reduction("median", t0, 0)


def test_ops_on_a_reduction_see_its_shape():
    with tp.Fusion() as fusion:
        t0 = tp.make_tensor(["M", "N", "K"])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)  # [M, rN, K]
        t2 = tp.transpose(t1, 0, 1)  # [K, M]
        t3 = tp.broadcast(t1, [False, True, False])  # [M, b, K]
        t4 = tp.add(t1, tp.make_tensor(["M", "K"]))
        t5 = tp.mul(t1, 2.0)
    assert [str(i.extent) for i in t2.logical] == ["K", "M"] and t2.definition.logical_map == [[2, 0]]
    assert t3.definition.logical_map == [[0, None, 2]]
    assert t4.definition.logical_map[0] == [0, 2] and len(t4.logical) == 2
    assert t5.definition.logical_map == [[0, 2]]
    with pytest.raises(tp.ScheduleError, match="T1 has 2 dimensions, T7 has 3"):
        with fusion:
            tp.add(t1, tp.make_tensor(["M", "N", "K"]))


def test_a_reduction_axis_merges_and_swizzles_only_with_reduction_axes():
    _, _, t1 = fusion_2d(axes=[0, 1], shape=("M", "N"))
    t1.merge(0)
    assert t1.axis(0).is_reduction
    _, _, t1 = fusion_2d()
    with pytest.raises(tp.ScheduleError, match=r"merge: axis 1 of T1 \(r\d+\{N\}\) is a reduction axis and axis 0"):
        t1.merge(0)
    _, _, t1 = fusion_2d(shape=(8, 8))
    with pytest.raises(tp.ScheduleError, match="swizzle: axis 1 .* reduction axis"):
        t1.swizzle(tp.SwizzleType.XOR, 0, 1)
    t1.split(1, 4)
    assert t1.axis(1).is_reduction and t1.axis(2).is_reduction  # a split keeps the kind


# -- rfactor ----------------------------------------------------------------------------------------

def test_rfactor_makes_a_partial_reduction_and_leaves_the_rest():
    fusion, t0, t1 = fusion_2d()
    t1.split(1, 128)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    t2 = t1.rfactor([1])
    assert [i.is_reduction for i in t2.get_logical_domain()] == [False, True, False]
    assert [i.is_reduction for i in t2.get_root_domain()] == [False, True]
    assert t2.get_root_domain() != t2.get_logical_domain()
    assert [i.is_reduction for i in t1.get_logical_domain()] == [False, True]
    assert str(t1.axis(1).extent) == "128" and t1.axis(1).parallel_type is P.TIDx
    assert t2.axis(2).parallel_type is P.TIDx and t2.axis(0).parallel_type is P.BIDx  # both keep the types
    assert [str(op) for op in fusion.exprs] == ["T2 = sum(T0)", "T1 = sum(T2)"]
    assert fusion.tensors.index(t2) < fusion.tensors.index(t1)
    assert t1.definition.logical_map == [[0, 2]]
    m = IdMap(fusion)
    assert m.same(t2.axis(2), t1.axis(1)) and m.same(t2.axis(0), t1.axis(0))  # inlining can share them
    assert tp.verify(fusion).ok


def test_rfactor_renumbers_the_consumers_axes():
    with tp.Fusion() as fusion:
        t0 = tp.make_tensor(["M", "N", "K"])
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0, 1])  # [rM, rN, K]
        t3 = tp.set(t1)
        fusion.add_output(t3)
    assert t3.definition.logical_map == [[2]]
    t1.rfactor([0])  # t1: [rN, K]
    assert t3.definition.logical_map == [[1]]
    assert element_axes(t1) == [1]


@pytest.mark.parametrize("call, words", [
    (lambda t1: t1.rfactor([0]), ("rfactor", "axis 0", "is not a reduction axis")),
    (lambda t1: t1.rfactor([1, 2]), ("rfactor", "all of T1's reduction axes")),
    (lambda t1: t1.rfactor([1, 1]), ("rfactor", "axis 1 appears twice")),
    (lambda t1: t1.rfactor([5]), ("rfactor", "5", "out of range")),
    (lambda t1: t1.rfactor([]), ("rfactor", "non-empty list")),
    (lambda t1: t1.rfactor("1"), ("rfactor", "'1'")),
])
def test_bad_rfactor_raises_a_schedule_error(call, words):
    _, _, t1 = fusion_2d()
    t1.split(1, 32)
    with pytest.raises(tp.ScheduleError) as e:
        call(t1)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_rfactor_of_an_rfactor_partial_names_the_reduction_to_rfactor():
    """A partial's axes are the loop axes of the first rfactor: it failed deep inside (KeyError)."""
    _, _, t1 = fusion_2d()
    t1.split(1, 32).split(2, 8)
    part = t1.rfactor([2, 3])  # part: [M, N / 32, r4, r8]
    with pytest.raises(tp.ScheduleError, match=f"rfactor: {part.name} is the partial reduction of an earlier rfactor"):
        part.rfactor([3])


def test_rfactor_of_a_tensor_that_is_no_reduction():
    with tp.Fusion() as fusion:
        t0 = tp.make_tensor([8, 8])
        fusion.add_input(t0)
        t1 = tp.set(t0)
    with pytest.raises(tp.ScheduleError, match="rfactor: T1 is not the output of a reduction"):
        t1.rfactor([0])


def test_cache_before_moves_the_reduction_into_registers():
    fusion, t0, t1 = fusion_2d()
    t2 = t1.cache_before()
    assert str(t2.definition) == "T2 = sum(T0)" and str(t1.definition) == "T1 = set(T2)"
    assert t2.axis(1).is_reduction and not any(i.is_reduction for i in t1.get_logical_domain())
    assert t2.memory_type is tp.MemoryType.Local and t1.memory_type is tp.MemoryType.Global
    assert t1.definition.logical_map == [[0]]


# -- inlining, allocation, execution -----------------------------------------------------------------

def test_no_tensor_is_inlined_past_its_reduction_axes():
    with tp.Fusion() as fusion:
        t0 = tp.make_tensor(["M", "N"])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.reorder({1: 0})  # [rN, M]: the reduction outermost
    tp.inline_most(fusion)
    assert t1.compute_at == 0
    with pytest.raises(tp.ScheduleError, match="axis 0 of T1 .* is a reduction axis"):
        t1.inline_at(1)


def test_a_producer_shares_the_reduction_loop():
    fusion, t0, t1 = fusion_2d()
    t2 = t0.cache_after()
    t1.split(1, 4)
    tp.propagate_transforms(t1)
    tp.inline_most(fusion)
    assert t2.compute_at == 3  # inside the reduction's loops: one register per step
    assert tp.allocation(t2).num_elements == 1


def test_reduction_iterdomains_are_not_allocated():
    fusion, _, t1 = fusion_2d(shape=(64, 32))
    t2 = t1.cache_before()
    rows = {a.id.name: (a.allocated, a.rule) for a in tp.allocation(t2).ids}
    assert rows[t2.axis(1).name] == (False, "reduction")
    assert tp.allocation(t2).num_elements == 64
    assert tp.allocation(t1).num_elements == 64  # the global output: its shape


def test_the_accumulation_runs_in_every_thread_and_the_store_in_thread_zero():
    fusion, _, t1 = fusion_2d()
    t1.split(1, 128)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    launch = block_dims(fusion)
    accumulate, store = tensor_execution(t1, launch), store_execution(t1, launch)
    assert not accumulate.conds_of(CondKind.SINGLE_WRITER)
    assert [c.lhs.value for c in store.conds_of(CondKind.SINGLE_WRITER)] == ["threadIdx.x"]
    assert accumulate.conds_of(CondKind.HOLE) and not store.conds_of(CondKind.HOLE)  # the row's tail
    assert all("T1.r" not in str(e) for e in store.indices.values())  # the store is outside the reduction loop


def test_the_store_of_a_partial_keeps_every_element():
    """A partial of an rfactor whose elements are all holes (N < 128) is still stored: the neutral
    value, which the final reduction adds."""
    fusion, _, t1 = fusion_2d(shape=(4, 100))
    t1.split(1, 128)
    t2 = t1.rfactor([1])
    store = store_execution(t2, block_dims(fusion))
    assert not store.conds_of(CondKind.HOLE)
    assert tensor_execution(t2, block_dims(fusion)).conds_of(CondKind.HOLE)


@pytest.mark.parametrize("op, dtype, value", [("sum", tp.float32, 0.0), ("sum", tp.int8, 0),
                                              ("max", tp.float16, float("-inf")), ("max", tp.int8, -128),
                                              ("max", tp.int32, -2 ** 31), ("max", tp.int64, -2 ** 63)])
def test_neutral_elements(op, dtype, value):
    assert neutral(op, dtype) == value


def test_the_accumulator_covers_the_iteration_loops_inside_the_reduction_loop():
    fusion, _, t1 = fusion_2d(axes=0, shape=(64, 512))
    t1.split(1, 4).split(1, 32)  # [r{64}, 4, 32, 4]
    t1.reorder({0: 2, 1: 0, 2: 1})  # [4, 32, r{64}, 4]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    r = reduction_loops(t1)
    assert r.start == 2 and [i.name for i in r.accumulator] == [t1.axis(3).name] and r.threads == ()


# -- the reference --------------------------------------------------------------------------------------

def test_reference_sums_and_maxima():
    x = np.arange(12, dtype=float).reshape(3, 4) - 5
    for op, axes, want in [("sum", 1, x.sum(1)), ("sum", 0, x.sum(0)), ("max", 1, x.max(1)),
                           ("sum", [0, 1], np.array(x.sum()))]:
        fusion, _, _ = fusion_2d(op, axes, shape=(3, 4))
        (got,) = reference(fusion, [x])
        assert got.shape == want.shape and np.array_equal(got, want), (op, axes)


def test_reference_of_an_rfactor_partial_fills_holes_with_the_neutral_value():
    fusion, _, t1 = fusion_2d("max", 1, shape=(2, 5))
    t1.split(1, 4)  # [2, r{2}, r{4}]: 3 holes
    t1.rfactor([1])  # the partial: [2, r{2}, i{4}]
    x = -np.arange(10, dtype=float).reshape(2, 5) - 1
    (got,) = reference(fusion, [x])
    assert np.array_equal(got, x.max(1))
    partial = fusion.exprs[0].output
    from tileproof.codegen.runtime import reference as ref

    sizes = ref._sizes(fusion, {"T0": x})
    values = ref._reduce(np, fusion.exprs[0], [x], sizes)
    assert partial.name == "T2" and values.shape == (2, 4)
    assert np.array_equal(values[0], [-1, -2, -3, -4]) and values[0].max() == x[0].max()  # 0 vs 4 -> -1; 1 vs 5: hole


def test_int8_sums_wrap_like_the_kernel():
    fusion, _, _ = fusion_2d("sum", 1, shape=(1, 4), dtype=tp.int8)
    (got,) = reference(fusion, [np.array([[100, 100, 100, 1]])])
    assert got[0] == ((301 + 128) % 256) - 128


def test_rfactor_of_an_mma_op_keeps_the_products_in_the_partial():
    """nvFuser's split-K matmul rfactors its MmaOp: the partial keeps the products and the macro,
    the output sums the partial's terms."""
    with tp.Fusion("mma_rfactor") as fusion:
        a = tp.make_contig_concrete_tensor([64, 1, 256], dtype=tp.bfloat16)
        b = tp.make_contig_concrete_tensor([1, 64, 256], dtype=tp.bfloat16)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        fusion.add_output(d)
    d.definition.set_macro(tp.MmaMacro.Hopper_64_64_16)
    d.split(2, 64)  # [M, N, r{K / 64}, r{64}]
    part = d.rfactor([3])
    assert part.definition.name == "fms" and part.definition.macro is tp.MmaMacro.Hopper_64_64_16
    assert part.definition.inputs == [a, b]
    assert d.definition.name == "sum" and d.definition.inputs == [part]
    assert [i.is_reduction for i in d.get_loop_domain()] == [False, False, True]
