"""The order of a shared or register tensor's allocated IDs without an allocation domain: its logical
domain's, as nvFuser's reorderAllocationDomains gives it, not its loop's; a set allocation domain
is kept as written."""
from __future__ import annotations

import tileproof as tp
from tileproof.model.types import ParallelType as P


def _copy(memory: tp.MemoryType):
    """T0 [K{64}, N{128}] -> T1 (memory) -> T2, both scheduled [No (BIDx), K, Ni{32}] then reordered
    so T1's loop is [No, Ni, K]."""
    with tp.Fusion("allocation_order") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 128])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(memory)
    for t in (t1, t2):
        t.split(1, 32).reorder({1: 0})  # [No, K, Ni]
        t.axis(0).parallelize(P.BIDx)
    t1.reorder({1: 2})  # [No, Ni, K]
    return fusion, t1


def _order(tv) -> list[str]:
    return [a.id.label() for a in tp.allocation(tv).allocated()]


def test_a_shared_tensor_is_allocated_in_its_logical_order_not_its_loop_order():
    _, t1 = _copy(tp.MemoryType.Shared)
    k, ni = t1.loop[2], t1.loop[1]
    assert _order(t1) == [k.label(), ni.label()]
    strides = tp.allocation(t1).strides()
    assert (strides[k.uid].value, strides[ni.uid].value) == (32, 1)


def test_a_register_tensor_is_allocated_in_its_logical_order_too():
    _, t1 = _copy(tp.MemoryType.Local)
    assert _order(t1) == [t1.loop[2].label(), t1.loop[1].label()]


def test_a_set_allocation_domain_keeps_its_order():
    _, t1 = _copy(tp.MemoryType.Shared)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    assert _order(t1) == [t1.loop[1].label(), t1.loop[2].label()]


def test_the_unallocated_rows_keep_their_places():
    _, t1 = _copy(tp.MemoryType.Shared)
    rows = tp.allocation(t1).ids  # the IterDomains of the snapshot verify sees: t1's, by uid
    assert rows[0].id.uid == t1.loop[0].uid and not rows[0].allocated  # BIDx: one block's tile
    assert [r.id.uid for r in rows[1:]] == [t1.loop[2].uid, t1.loop[1].uid]


def test_a_swizzle_s_outputs_take_the_place_after_its_later_input():
    """[R{8}, C{8}] split to [R, Co{2}, Ci{4}], swizzled on (R, Ci): the outputs follow Ci, so R's
    image moves inside Co (the layout a loop-order allocation would not have)."""
    with tp.Fusion("allocation_order_swizzle") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 8])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, 4)  # [R, Co, Ci]
    t1.split(0, 4)  # [Ro, Ri{4}, Co, Ci]: Ri and Ci of one extent for the XOR
    t1.swizzle(tp.SwizzleType.XOR, 1, 3)
    ro, x, co, y = t1.loop
    assert _order(t1) == [ro.label(), co.label(), x.label(), y.label()]


def test_a_split_broadcast_axis_is_not_allocated_wherever_it_lies():
    """[M{64}, b, K{64}] loaded to shared memory with the broadcast split between M and K: the
    allocated IDs are M's and K's, in logical order."""
    with tp.Fusion("allocation_order_broadcast") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 1, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, 2).reorder({0: 2})  # [b, b2, M, K]
    assert _order(t1) == [t1.loop[2].label(), t1.loop[3].label()]
