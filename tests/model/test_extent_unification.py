"""A binary op maps its inputs' axes onto one another and unifies their extents, as nvFuser's
exact map (model/extent_unification.py): a symbol gives way to a constant, or to the symbol
made first; two different constants stay a ScheduleError; broadcast axes take the other's."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.model.expr import const, var

from support.extent_schedules import add_symbolic

P = tp.ParallelType


def extents(tv) -> list:
    return [i.extent_expr for i in tv.logical]


@pytest.mark.parametrize("ndims", [1, 2, 3])
def test_add_of_two_contig_tensors_gives_every_mapped_axis_the_first_inputs_extent(ndims):
    with tp.Fusion("add") as fusion:
        t0, t1 = tp.make_contig_tensor(ndims), tp.make_contig_tensor(ndims)
        t2 = tp.add(t0, t1)
    first = [var(f"T0_{d}") for d in range(ndims)]
    assert extents(t0) == extents(t1) == extents(t2) == first
    assert list(fusion.symbols) == [f"T0_{d}" for d in range(ndims)]
    assert fusion.extent_aliases == {f"T1_{d}": var(f"T0_{d}") for d in range(ndims)}


def test_the_symbol_made_first_stays_whatever_the_operand_order():
    with tp.Fusion("add") as fusion:
        t0, t1 = tp.make_contig_tensor(1), tp.make_contig_tensor(1)
        t2 = tp.sub(t1, t0)
    assert extents(t2) == extents(t1) == [var("T0_0")] and list(fusion.symbols) == ["T0_0"]


def test_a_symbol_gives_way_to_a_constant():
    with tp.Fusion("add") as fusion:
        t0 = tp.make_contig_tensor(2)
        t1 = tp.make_contig_concrete_tensor([8, 512])
        t2 = tp.mul(t0, t1)
    assert extents(t0) == extents(t2) == [const(8), const(512)] and fusion.symbols == {}


def test_different_constants_stay_an_error_naming_both_axes():
    with tp.Fusion("add"):
        t0, t1 = tp.make_contig_concrete_tensor([4]), tp.make_contig_concrete_tensor([5])
        with pytest.raises(tp.ScheduleError, match=r"add: extents 4 and 5 differ \(T0 axis 0 has 4, T1 axis 0 has 5\)"):
            tp.add(t0, t1)


def test_a_broadcast_axis_takes_the_other_extent_and_unifies_nothing():
    with tp.Fusion("add") as fusion:
        t0 = tp.make_contig_tensor(1)  # [T0_0]
        t1 = tp.make_contig_tensor(2)  # [T1_0, T1_1]
        t2 = tp.add(tp.broadcast(t0, [True, False]), t1)
    assert extents(t2) == [var("T1_0"), var("T0_0")]
    assert extents(t1) == [var("T1_0"), var("T0_0")] and list(fusion.symbols) == ["T0_0", "T1_0"]
    with tp.Fusion("add"):
        t0 = tp.make_contig_concrete_tensor([1, 4])  # an extent-1 axis is a broadcast axis
        t2 = tp.add(t0, tp.make_contig_concrete_tensor([3, 4]))
    assert extents(t2) == [const(3), const(4)]


def test_a_transform_made_before_the_op_reads_the_unified_extent():
    with tp.Fusion("add"):
        t0, t1 = tp.make_contig_tensor(1), tp.make_contig_tensor(1)
        t1.split(0, 4)
        tp.add(t0, t1)
    assert [str(i.extent) for i in t1.loop] == ["ceiling(T0_0/4)", "4"]


def test_assumptions_before_and_after_the_op_are_about_the_unified_extent():
    with tp.Fusion("add") as fusion:
        t0, t1 = tp.make_contig_tensor(1), tp.make_contig_tensor(1)
        fusion.assume("T1_0 % 4 == 0")
        fusion.assume("T1_0 == T0_0")  # true once unified: dropped
        tp.add(t0, t1)
        fusion.assume("T1_0 >= 8")
    assert [str(a) for a in fusion.assumptions] == ["Eq(Mod(T0_0, 4), 0)", "T0_0 >= 8"]
    assert len(fusion.assumption_origins) == 2
    with tp.Fusion("add"):
        t0, t1 = tp.make_contig_tensor(1), tp.make_contig_tensor(1)
        tp.add(t0, t1)
        t3 = tp.make_tensor(["T1_0"])  # a shape naming the symbol that went: the extent that stayed
    assert extents(t3) == [var("T0_0")]
    with pytest.raises(tp.ScheduleError, match="T1_0 is no symbol of this fusion any more: an op unified it with T0_0"):
        t3.fusion.symbol("T1_0")  # a split factor declared by that name would be a new, unrelated symbol


def test_an_assumption_the_unification_makes_false_is_an_error_at_the_op():
    with tp.Fusion("add") as fusion:
        t0, t1 = tp.make_contig_tensor(1), tp.make_contig_tensor(1)
        fusion.assume("T1_0 < T0_0")
        with pytest.raises(tp.ScheduleError, match=r"add: the op makes T1_0 and T0_0 one extent .* makes the "
                                                   r"assumption T1_0 < T0_0 false"):
            tp.add(t0, t1)


def test_the_verifier_proves_for_the_unified_size():
    report = tp.verify(add_symbolic(1, vector=4))  # T1_0 % 4 == 0 assumed, T1_0 unified with T0_0
    assert report.ok, report.codes
    fusion = add_symbolic(1, vector=4)
    fusion.assumptions.clear()
    fusion.assumption_origins.clear()
    report = tp.verify(fusion)
    assert report.codes == ["SPLIT-DIVISIBILITY"]  # the vector split, of the one extent T0_0
    (error,) = report.errors
    assert error.counterexample["T0_0"] % 4 and "T1_0" not in error.counterexample


def test_an_mma_op_unifies_its_operands_k_extents():
    with tp.Fusion("matmul") as fusion:
        a, b = tp.make_contig_tensor(2), tp.make_contig_tensor(2)  # [T0_0, T0_1] @ [T1_0, T1_1]
        d = tp.matmul(a, b)
    assert extents(d) == [var("T0_0"), var("T0_1"), var("T1_1")] and extents(b)[0] == var("T0_1")
    assert list(fusion.symbols) == ["T0_0", "T0_1", "T1_1"]
    with tp.Fusion("matmul"):
        a, b = tp.make_contig_concrete_tensor([4, 8]), tp.make_contig_concrete_tensor([9, 4])
        with pytest.raises(tp.ScheduleError, match=r"fused_multiply_sum: extents 8 and 9 differ"):
            tp.matmul(a, b)
