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


@pytest.mark.parametrize("stages,prefetch", [(2, 0), (2, 1), (3, 2)])
def test_a_plain_shared_copy_takes_nvfusers_circular_loop_too(stages, prefetch):
    """A plain copy into shared memory (tp.set): nvFuser's circular loop, the serial axis left of
    the first Unroll axis (axis 1), with the unrolled and serial loops between it and the
    compute-at position split off with the copies and allocated, as for registers (before: the
    TIDx axis left of the compute-at position, refused by PIPELINE-STAGES). Simulated on the CPU
    against the float64 reference at two sizes, one a partial tile."""
    import numpy as np

    from tileproof.codegen.lower import lower
    from tileproof.codegen.runtime.reference import reference
    from tileproof.model.targets import get_target

    from support.reduction_sim import run_kernel

    fusion, r = unrolled_reads(stages, prefetch, memory=tp.MemoryType.Shared)
    frozen = lowered(fusion)
    rf = next(t for t in frozen.tensors if t.name == r.name)
    assert (circular_axis(rf), allocation_position(rf)) == (1, 2)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    ir = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    for size in (512, 300):
        x = np.random.default_rng(size).standard_normal(size)
        (got,) = run_kernel(ir, fusion, [x], {fusion.inputs[0].logical[0].extent_expr.value: size})
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), reference(fusion, [x])[0], rtol=1e-6)


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


def test_the_reads_between_two_copies_stay_in_one_loop():
    """LayerNorm's last pass over a staged row (recipes/normalization.py: steps of 2 vectors a
    thread, each step's [2 (Unroll), TIDx, 4] reads weight and bias through their register caches),
    the caches circular-buffered over the steps: the unrolled loop's body is the row's read, the
    weight's copy, the centering, the bias's copy, the scaling. The copies go first into one loop;
    the rest stays one loop, so each vector's centered values (registers of one vector, allocated
    per iteration) are read in the iteration that wrote them. A loop per run of nodes wrote every
    vector's before the first was read: the kernel's first vector of each step came out wrong."""
    import numpy as np

    from tileproof.codegen.lower import lower
    from tileproof.model.targets import get_target
    from tileproof.recipes import normalization as N

    from support.reduction_sim import run_kernel

    fusion = N.layer_norm_fusion(N.RowClass("float32", 4, 2, 4, looped=True, staged=True), 1e-5)
    weights = [t for t in fusion.tensors if t.definition is not None and t.definition.name == "set"
               and t.definition.inputs[0] in fusion.inputs and len(t.definition.inputs[0].logical) == 1]
    for cache in weights:
        cache.circular_buffer(2, 1)
    assert len(weights) == 2 and tp.verify(fusion, "sm_90a").ok
    tree = nest_module.placed_nest(lowered(fusion)).tree
    circular = next(n for n in _loops(tree) if any(isinstance(c, Prefetched) for c in n.body))
    refill, *reads = circular.body
    assert sorted(_leaves(refill)) == sorted(w.name for w in weights) and len(reads) == 1
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((3, 96)) * 2, rng.standard_normal(96), rng.standard_normal(96)
    (got,) = run_kernel(lower(fusion.snapshot(), get_target("sm_90a")).kernel, fusion, [x, w, b], {"M": 3, "N": 96})
    mean = x.mean(1, keepdims=True)
    want = (x - mean) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-5, atol=1e-5)
