"""A register circular buffer whose circular loop lies outside serial and unrolled loops of its
compute-at position (nvFuser's CircularBufferingTest.SingleDimUnroll): nvFuser's circular axis
(execution/circular.py), the registers allocated across those loops (execution/allocation.py, as
nvFuser's getAllocPosInfo), the copies split into a nest of their own ahead of the reads
(execution/pipeline.py isolate_circular_copies), and PIPELINE-RAW / PIPELINE-WAR on that nest."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution import nest as nest_module
from tileproof.execution.allocation import compute_allocation
from tileproof.execution.circular import allocation_position, circular_axis
from tileproof.execution.pipeline import Prefetched, Prologue
from tileproof.model.loop_map import propagate_parallel_types

P = tp.ParallelType


def unrolled_reads(stages=2, prefetch=-1, *, memory=tp.MemoryType.Local, source_at=1):
    """out = set(s) + 1 with s = in + 1 in shared memory; r = set(s) circular-buffered, inlined
    into out's [I/128, 2, 2 (Unroll), 2, 16 (TIDx)] (its circular loop: axis 1)."""
    with tp.Fusion("unrolled_reads") as fusion:
        a = tp.make_contig_tensor(1)
        fusion.add_input(a)
        s = tp.add(a, 1.0)
        r = tp.set(s)
        out = tp.add(r, 1.0)
        fusion.add_output(out)
    s.set_memory_type(tp.MemoryType.Shared)
    r.set_memory_type(memory)
    out.split(-1, 128).split(-1, 16).split(-2, 4).split(-2, 2)  # [I/128, 2, 2, 2, 16]
    tp.propagate_transforms(out)
    s.inline_at(source_at)
    r.inline_at(-1)
    out.axis(2).parallelize(P.Unroll)
    out.axis(4).parallelize(P.TIDx)
    r.circular_buffer(stages, prefetch)
    return fusion, r


def lowered(fusion):
    """The frozen snapshot verify and compile read, r's axes on the types of out's loops."""
    frozen = fusion.snapshot()
    propagate_parallel_types(frozen)
    return frozen


def _loops(nodes):
    for n in nodes:
        if hasattr(n, "body"):
            yield n
            yield from _loops(n.body)


def _leaves(node) -> list[str]:
    return [x for c in node.body for x in (_leaves(c) if hasattr(c, "body") else [c.name])]


def test_the_circular_loop_is_the_serial_one_outside_the_unrolled_loop():
    fusion, r = unrolled_reads()
    frozen = lowered(fusion)
    rf = next(t for t in frozen.tensors if t.name == r.name)
    assert (rf.compute_at, circular_axis(rf), allocation_position(rf)) == (5, 1, 2)
    alloc = compute_allocation(rf)
    assert [a.id.extent_expr.value for a in alloc.allocated()] == [2, 2]  # the Unroll and serial loops
    assert (alloc.tile_elements_expr.value, alloc.num_elements) == (4, 8)  # 2 x 2 per stage, 2 stages


def test_the_copies_get_a_nest_of_their_own_before_the_reads():
    fusion, r = unrolled_reads(3, 1)
    tree = nest_module.placed_nest(lowered(fusion)).tree
    circular = next(n for n in _loops(tree) if any(isinstance(c, Prefetched) for c in n.body))
    refill, reads = circular.body
    assert isinstance(refill, Prefetched) and (refill.stages, refill.prefetch) == (3, 1)
    (copies,) = refill.body  # the Unroll loop, then the serial one and TIDx, holding the copy only
    assert copies.key == reads.key and _leaves(copies) == [r.name] and _leaves(reads) == [fusion.outputs[0].name]
    prologue = next(n for n in _loops(tree) if isinstance(n, Prologue))
    assert _leaves(prologue) == [r.name]


@pytest.mark.parametrize("stages,prefetch", [(2, 0), (2, 1), (5, 2)])
def test_it_verifies_and_compiles(stages, prefetch):
    fusion, r = unrolled_reads(stages, prefetch)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    source = tp.compile(fusion).cuda_source
    assert f"float {r.name}[{4 * stages}U];" in source


def test_a_shared_tensor_keeps_the_axis_left_of_its_compute_at_position():
    """Shared memory: the axis left of the compute-at position (TIDx) stays its circular loop, which
    PIPELINE-STAGES refuses (tileproof splits register copies only)."""
    fusion, _ = unrolled_reads(memory=tp.MemoryType.Shared)
    report = tp.verify(fusion, rules=["PIPELINE-STAGES"])
    assert report.codes == ["PIPELINE-STAGES"] and "is parallelized on TIDx" in report.errors[0].message


def test_a_source_computed_inside_the_circular_loop_is_refused():
    fusion, _ = unrolled_reads(source_at=2)
    report = tp.verify(fusion, rules=["PIPELINE-STAGES"])
    assert report.codes == ["PIPELINE-STAGES"] and "is computed inside that loop" in report.errors[0].message


def test_reads_before_the_copies_are_refuted(monkeypatch):
    """The rules read the split nest: with the reads moved ahead of the copies (no prefetch), a
    read sees registers its iteration has not copied yet (PIPELINE-RAW, with the iteration)."""
    place = nest_module.place_syncs

    def broken(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        circular = next(n for n in _loops(tree) if any(isinstance(c, Prefetched) for c in n.body))
        circular.body.reverse()

    monkeypatch.setattr(nest_module, "place_syncs", broken)
    fusion, _ = unrolled_reads(2, 0)
    report = tp.verify(fusion, rules=["PIPELINE-RAW", "PIPELINE-WAR"])
    assert "PIPELINE-RAW" in report.codes
    assert report.errors[0].counterexample
