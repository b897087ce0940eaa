"""A row softmax scheduled the nvFuser way (propagate_transforms, parallelize_all_like,
inline_most) verifies at a symbolic row length (issue 35 item 2): inline_most keeps a tensor
that one consumer reduces and another reads after that total at the row loop
(model/unmappable.py, nvFuser's unmappable dims), inline_at refuses to go past it, and the nest
inline_most made before (exp inlined into the sum and the division alike) is LOOP-NEST-ORDER's,
whose help now names the position inline_most takes, not an inline_at the API refuses."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.model.targets import get_target
from tileproof.model.unmappable import unmappable_axes

P = tp.ParallelType


def softmax(n="N", batch=8, threads=128):
    """exp(x - max) / sum: a row per block; symbolic rows as nvFuser's persistent scheduler splits
    them (a constant `batch` per thread, the threads ceil(N / batch)), a number of rows over
    `threads` threads."""
    with tp.Fusion("softmax") as fusion:
        x = tp.make_tensor(["M", n], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        m = tp.max(x, 1)
        e = tp.exp(tp.sub(x, tp.broadcast(m, [False, True])))
        s = tp.sum(e, 1)
        y = tp.div(e, tp.broadcast(s, [False, True]))
        fusion.add_output(y)
    if isinstance(n, str):
        fusion.assume(f"N <= {batch * 1024}")
        y.split(1, batch, inner_split=False)  # [M, batch, ceil(N / batch)]
    else:
        y.split(1, threads)  # [M, N / threads, threads]
    tp.propagate_transforms(y)
    y.axis(0).parallelize(P.BIDx)
    y.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(y)
    return fusion, e, s, y


@pytest.mark.parametrize("n", ["N", 1024])
def test_inline_most_keeps_the_persistent_tensor_at_the_row_loop_and_verifies(n):
    fusion, e, s, y = softmax(n)
    tp.inline_most(fusion)
    assert e.compute_at == 1  # read by the sum and, after its total, by the division
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [(d.code, d.message) for d in report.errors]


def test_the_persistent_registers_are_indexed_by_the_loop_at_a_symbolic_row_length():
    """e's registers hold batch elements per thread; the sum and the division read e[i] with the
    loop's own index, not (i * ceil(N / 8) + threadIdx.x) / ceil(N / 8) (a division by a runtime
    value would put the registers in local memory)."""
    fusion, e, s, y = softmax("N")
    tp.inline_most(fusion)
    assert tp.verify(fusion, "sm_90a").ok
    source = emit(lower(fusion.snapshot(), get_target("sm_90a")).kernel, cuda_headers=False)
    reads = [line for line in source.splitlines() if f"(float)({e.name}[" in line]
    assert len(reads) == 2
    assert all("/ ((s_N" not in line for line in reads), reads


def test_unmappable_axes_name_the_reduction_and_the_reader_after_it():
    fusion, e, s, y = softmax("N")
    found = unmappable_axes(fusion)
    x = fusion.inputs[0]  # read by the max and, after it, by x - max: persistent too (never inlined)
    assert set(found) == {x.logical[1].uid, e.logical[1].uid}
    assert found[e.logical[1].uid] == f"{s.name} reduces it and {y.name}, computed after {s.name}'s total, reads it too"


def test_a_deviation_squared_and_summed_is_persistent_through_its_square():
    """LayerNorm's x - mean is read by (x - mean)^2, whose sum is the variance, and by the output
    after it: the reduction is a consumer's consumer, not a direct one (nvFuser builds the map
    from the outputs back, so the square's axis already shares the variance's class)."""
    with tp.Fusion("centered") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        xc = tp.sub(x, tp.broadcast(tp.mean(x, [1]), [False, True]))
        var = tp.div(tp.sum(tp.mul(xc, xc), 1), "N")
        y = tp.mul(xc, tp.broadcast(tp.rsqrt(var), [False, True]))
        fusion.add_output(y)
    found = unmappable_axes(fusion)
    assert xc.logical[1].uid in found
    square = fusion.consumers(xc)[0]
    assert square.logical[1].uid not in found  # read by the variance's sum only


def test_a_reduction_read_back_only_through_its_broadcast_has_no_persistent_axis():
    with tp.Fusion("row_sum_then_scale") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        y = tp.mul(tp.broadcast(tp.sum(tp.exp(x), 1), [False, True]), 2.0)
        fusion.add_output(y)
    assert unmappable_axes(fusion) == {}


def test_inline_at_refuses_the_persistent_axis_and_says_why():
    fusion, e, s, y = softmax(1024)
    with pytest.raises(tp.ScheduleError) as info:
        e.inline_at(3)
    assert str(info.value) == (
        f"inline_at: {e.name} can be inlined at most at position 1: axis 1 of {e.name} ({e.axis(1).label()}) is "
        f"persistent: {s.name} reduces it and {y.name}, computed after {s.name}'s total, reads it too "
        f"(nvFuser's unmappable dims)")
    assert e.inline_at(1) is e


def test_the_nest_inline_most_made_before_is_loop_nest_order_with_the_position_to_take():
    """Failing: exp inlined along the row into both of its consumers (what inline_most did before
    nvFuser's unmappable dims; set directly, since inline_at now refuses it)."""
    fusion, e, s, y = softmax(1024)
    tp.inline_most(fusion)
    e.compute_at = 3
    report = tp.verify(fusion, "sm_90a")
    assert report.codes == ["LOOP-NEST-ORDER"]
    (d,) = report.errors
    assert d.hint.startswith(f"{e.name}.inline_at(1) (verified: with it, LOOP-NEST-ORDER holds); or inline "
                             f"{e.name} at most at position 1 (axis 1 of {e.name}")
    assert "inline_most stops there" in d.hint


def _copy_read_before_and_after_a_sum(sum_of_the_copy: bool):
    """x's copy a, inlined along the row into an output z = copy(a) and into y = a + sum, the sum of
    x (independent of the loop) or of z (which the loop writes)."""
    with tp.Fusion("split_by_a_reduction") as fusion:
        x = tp.make_contig_concrete_tensor([8, 32])
        fusion.add_input(x)
        a = tp.set(x)
        z = tp.set(a)
        fusion.add_output(z)
        s = tp.sum(z if sum_of_the_copy else x, 1)
        b = tp.broadcast(s, [False, True])
        y = tp.add(a, b)
        fusion.add_output(y)
    for t in fusion.tensors[1:]:
        t.axis(0).parallelize(P.BIDx)
    tp.inline_most(fusion)
    return fusion, a, z, s, b


def test_a_sum_that_reads_nothing_of_the_loop_moves_out_of_it():
    """Passing: the sum of x lands between the two parts of the row loop a, z and b, y share; it
    reads nothing of that loop, so it runs before it (nvFuser's expression sort)."""
    fusion, a, z, s, b = _copy_read_before_and_after_a_sum(False)
    assert (a.compute_at, s.compute_at) == (2, 1)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [(d.code, d.message) for d in report.errors]


def test_a_copy_read_by_a_sum_through_an_output_and_after_it_is_persistent():
    """The sum of z, which the row loop writes, read by y in the loop: a's row is read by z (whose
    sum is taken) and by y after that total, so inline_most keeps a at the row (passing); inlined
    along it by hand (set directly, inline_at refuses), the loop would reopen around the sum, and
    LOOP-NEST-ORDER's help names the position to take (failing)."""
    fusion, a, z, s, b = _copy_read_before_and_after_a_sum(True)
    assert a.compute_at == 1
    assert tp.verify(fusion, "sm_90a").ok
    a.compute_at = 2
    report = tp.verify(fusion, "sm_90a")
    assert report.codes == ["LOOP-NEST-ORDER"]
    (d,) = report.errors
    assert d.hint.startswith(f"{a.name}.inline_at(1) (verified: with it, LOOP-NEST-ORDER holds); or inline "
                             f"{a.name} at most at position 1 (axis 1 of {a.name}")
