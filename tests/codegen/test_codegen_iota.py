"""tp.iota (model/tensor.py, nvFuser's IotaOp): an op that reads no tensor, whose element i is
start + i step. Its arguments are checked at the call; it verifies like any pointwise tensor (in
registers, in global memory as an intermediate, as an output, vectorized, broadcast and compared
into a mask); the kernel computes each value from the element's logical index in the compute type,
compiles with NVRTC for sm_90a, and the CPU simulator (support/reduction_sim.py) running the
lowered kernel gives the float64 reference (codegen/runtime/reference.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.runtime.reference import reference
from tileproof.model.targets import get_target

from support.reduction_sim import run_kernel

P = tp.ParallelType
TARGET = get_target("sm_90a")


def _pointwise(build, threads: int = 128):
    """A fusion of [N] tensors built by `build(x)` (x the float32 input), each [BIDx, TIDx{threads}], inlined."""
    with tp.Fusion("iota") as fusion:
        x = tp.make_tensor(["N"], dtype=tp.float32, name="x")
        fusion.add_input(x)
        fusion.assume("N <= 1048576")
        for out in build(x):
            fusion.add_output(out)
    for tv in fusion.tensors:
        if tv.definition is not None:
            tv.split(0, threads)
            tv.axis(0).parallelize(P.BIDx)
            tv.axis(1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


def _kernel(fusion):
    report = tp.verify(fusion, target="sm_90a")
    assert report.ok, report.codes
    kernel = lower(fusion.snapshot(), TARGET, report.decisions).kernel
    source = emit(kernel, cuda_headers=True)
    assert nvrtc.compile_to_cubin(source, "sm_90a", nvrtc.cuda_include_dir())[:4] == b"\x7fELF"
    return kernel, source


def _simulated(fusion, kernel, n: int) -> list:
    x = np.arange(n, dtype=np.float64) * 0.25 - 3.0
    got = run_kernel(kernel, fusion, [x], {"N": n})
    want = reference(fusion, [x])
    for g, w in zip(got, want):
        assert np.array_equal(np.asarray(g, dtype=np.float64), w), (g, w)
    return want


@pytest.mark.parametrize("dtype, start, step", [(tp.int32, 3, 2), (tp.int64, -7, 5), (tp.float32, 0.5, 0.25),
                                                (tp.float64, -1.0, 3.0), (tp.bfloat16, 1.0, 0.5)])
@pytest.mark.parametrize("n", [1, 200, 300])
def test_iota_values_in_the_simulated_kernel_are_the_reference(dtype, start, step, n):
    fusion = _pointwise(lambda x: [tp.set(tp.iota("N", start, step, dtype))])
    kernel, source = _kernel(fusion)
    (values,) = _simulated(fusion, kernel, n)
    assert list(values[:3]) == [start + k * step for k in range(min(n, 3))]
    assert "= iota(N, " in source


def test_an_iota_compared_into_a_mask_selects_as_where_does():
    """where(i < 11, x, -1) from iota("N", 3, 2): the first four elements kept, in int32 compare."""
    fusion = _pointwise(lambda x: [tp.where(tp.lt(tp.iota("N", 3, 2, tp.int32), 11), x, -1.0)])
    kernel, source = _kernel(fusion)
    (out,) = _simulated(fusion, kernel, 300)
    assert list(out[:6]) == [-3.0, -2.75, -2.5, -2.25, -1.0, -1.0]
    assert "(int)(" in source and " * 2)" in source


def test_an_iota_output_is_stored_and_a_global_intermediate_iota_follows_global_intermediate():
    """An iota that is a fusion output is stored where it is computed; one set to global memory
    as an intermediate is refused as any computed tensor is (GLOBAL-INTERMEDIATE: no TMA store)."""
    fusion = _pointwise(lambda x: [tp.iota(tp.extent(x, 0), 0, 1, tp.float32)])
    kernel, _ = _kernel(fusion)
    (out,) = _simulated(fusion, kernel, 257)
    assert out[256] == 256.0

    def build(x):
        i = tp.iota(tp.extent(x, 0), 0, 1, tp.float32)
        i.set_memory_type(tp.MemoryType.Global)
        return [tp.add(x, i)]
    assert tp.verify(_pointwise(build), target="sm_90a").codes == ["GLOBAL-INTERMEDIATE"]


def test_a_vectorized_iota_computes_each_element_of_the_vector():
    with tp.Fusion("iota_vector") as fusion:
        x = tp.make_tensor(["N"], dtype=tp.float32, name="x")
        fusion.add_input(x)
        fusion.assume("N % 4 == 0")
        fusion.assume("N <= 1048576")
        out = tp.iota("N", 1, 3, tp.int32)
        fusion.add_output(out)
    out.split(0, 4).split(0, 32)
    out.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.TIDx)
    out.axis(2).parallelize(P.Vectorize)
    kernel, source = _kernel(fusion)
    (values,) = _simulated(fusion, kernel, 256)
    assert list(values[:5]) == [1, 4, 7, 10, 13]
    assert "tp_v" in source  # each element from its own index


def test_a_causal_mask_from_two_broadcast_iotas():
    """keep[i, j] = j <= i + (N - M): two iotas broadcast to [M, N] and compared (the mask of
    recipes/attention.py's causal tiles), every tensor [BIDx{M}, TIDx{N}] inlined."""
    rows, keys = 5, 9
    with tp.Fusion("causal_mask") as fusion:
        x = tp.make_contig_concrete_tensor([rows, keys], dtype=tp.float32, name="x")
        fusion.add_input(x)
        query_index = tp.iota(rows, keys - rows, 1, tp.int32)
        key_index = tp.iota(keys, 0, 1, tp.int32)
        query = tp.broadcast(query_index, [False, True])
        key = tp.broadcast(key_index, [True, False])
        out = tp.where(tp.le(key, query), x, float("-inf"))
        fusion.add_output(out)
    for tv in fusion.tensors:
        if tv.definition is not None and tv.ndim == 2:
            tv.axis(0).parallelize(P.BIDx)
            tv.axis(1).parallelize(P.TIDx)
    query_index.axis(0).parallelize(P.BIDx)  # the 1-D iotas, each thread its own
    key_index.axis(0).parallelize(P.TIDx)
    tp.inline_most(fusion)
    kernel, _ = _kernel(fusion)
    a = np.arange(rows * keys, dtype=np.float64).reshape(rows, keys)
    (got,) = run_kernel(kernel, fusion, [a])
    keep = np.tri(rows, keys, keys - rows, dtype=bool)
    want = np.where(keep, a, -np.inf)
    assert np.array_equal(np.asarray(got, dtype=np.float64), want)
    assert np.array_equal(reference(fusion, [a])[0], want)


@pytest.mark.parametrize("call, match", [
    (lambda: tp.iota(0), "length must be a positive int"),
    (lambda: tp.iota(True), "length must be a positive int"),
    (lambda: tp.iota("L"), "no extent symbol of this fusion"),
    (lambda: tp.iota(2.5), "length must be a positive int or an extent"),
    (lambda: tp.iota(8, step=0), "step must not be 0"),
    (lambda: tp.iota(8, 0.5, 1, tp.int32), "start is the float 0.5"),
    (lambda: tp.iota(8, dtype=tp.bool), "dtype must be an integer or float type"),
    (lambda: tp.iota(8, dtype="int16"), "unknown dtype"),
    (lambda: tp.iota(8, float("inf"), 1.0, tp.float32), "start and step must be finite"),
    (lambda: tp.iota("N", 0, 2, tp.int32), "leaves int32"),
    (lambda: tp.iota(8, 2**31 - 4, 1, tp.int32), "leaves int32"),
    (lambda: tp.iota(8, "x", 1), "expected a TensorView or a number"),
])
def test_bad_iota_arguments_are_schedule_errors_at_the_call(call, match):
    with tp.Fusion("bad_iota") as fusion:
        fusion.add_input(tp.make_tensor(["N"], name="x"))
        with pytest.raises(tp.ScheduleError, match=match):
            call()


def test_an_iota_is_printed_and_fingerprinted_by_its_start_and_step():
    from tileproof.model.fingerprint import fingerprint

    def build(start):
        with tp.Fusion("iota_fp") as fusion:
            x = tp.make_tensor(["N"], name="x")
            fusion.add_input(x)
            i = tp.iota("N", start, 1, tp.float32)
            fusion.add_output(tp.add(x, i))
        return fusion, i
    (a, i), (b, _) = build(0.0), build(1.0)
    assert str(i.definition) == f"{i.name} = iota(N, 0.0, 1.0)" and not i.definition.inputs
    assert fingerprint(a, "sm_90a") != fingerprint(b, "sm_90a")
