"""A broadcast or a plain copy (tp.set) of a fusion input into global memory is a view of the input
(nvFuser's tensor producer aliases, csrc/device_lower/analysis/tensor_producer_aliases.cpp;
model/producer_aliases.py): no statement writes it, nothing is allocated for it, and its readers
read the input's memory. So GLOBAL-INTERMEDIATE and GLOBAL-VISIBILITY have nothing to say of it. One
that would move data (of a register or computed tensor, or laid out otherwise than its input) stays
a global intermediate and is rejected, saying why it is no view."""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.ir import ParamKind
from tileproof.codegen.runtime.reference import reference

from nvfuser.test_nvfuser_matmul import hsh_nt_128b_swizzle
from support.broadcast_views import bias_add, global_copy, global_transpose, permuted_broadcast
from support.fake_driver import FakeDriver
from support.reduction_sim import run_kernel


def test_a_broadcast_of_an_input_is_a_view():
    fusion, b = bias_add()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    assert list(kernel.fusion.views) == [b.name]
    assert not any(buf.tensor == b.name for buf in kernel.ir.buffers)  # nothing allocated
    assert [v.view_of for v in kernel.ir.views] == ["T1"]
    assert f"{b.name} = broadcast" not in kernel.cuda_source  # no statement writes it
    for m, n in ((3, 200), (2, 129)):
        x = np.arange(m * n, dtype=np.float32).reshape(m, n)
        bias = np.array([10.0 * (i + 1) for i in range(m)], dtype=np.float32)
        (out,) = run_kernel(kernel.ir, kernel.fusion, [x, bias], {"T0_0": m, "T0_1": n})
        np.testing.assert_array_equal(out.astype(np.float64), x + bias[:, None])
        (want,) = reference(kernel.fusion, [x, bias])  # the snapshot's reference computes the view's broadcast
        np.testing.assert_array_equal(want, x + bias[:, None])


class Array:
    """A __cuda_array_interface__ array at a chosen (fake) address."""

    def __init__(self, shape, address, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (address, False),
                                         "version": 3, "strides": None}


@pytest.mark.usefixtures("private_cache")
def test_the_launch_gives_a_view_its_inputs_memory(monkeypatch):
    fusion, b = bias_add()
    kernel = tp.compile(fusion)
    fake = FakeDriver(monkeypatch, kernel.ir.params)
    kernel.run(Array((4, 300), 1 << 40), Array((4,), 1 << 41))  # the user passes the fusion's two inputs
    (launch,) = fake.launches
    assert launch.args[b.name] == launch.args["T1"] == 1 << 41


def test_a_broadcast_of_a_register_tensor_stays_a_global_intermediate():
    fusion, b = bias_add(computed=True)
    report = tp.verify(fusion)
    # the one root cause: a global intermediate the kernel has no buffer for has no reads to prove visible
    assert report.codes == ["GLOBAL-INTERMEDIATE"], report.codes
    (d,) = [d for d in report.errors if d.code == "GLOBAL-INTERMEDIATE"]
    assert f"`{b.name} = broadcast(T2)` is no view of T2" in d.message
    assert "in Local memory, not a global tensor the kernel is given" in d.message
    fusion.add_output(b)  # a buffer the caller passes: then its reads are GLOBAL-VISIBILITY's
    report = tp.verify(fusion)
    assert report.codes == ["GLOBAL-VISIBILITY"], report.codes
    (vis,) = report.errors
    assert vis.counterexample, vis.message  # another thread reads what one thread writes to global memory
    assert "but only the thread with" in vis.message


def test_a_broadcast_laid_out_otherwise_than_its_input_stays_a_global_intermediate():
    fusion, b = permuted_broadcast()
    report = tp.verify(fusion)
    assert "GLOBAL-INTERMEDIATE" in report.codes, report.codes
    (d,) = [d for d in report.errors if d.code == "GLOBAL-INTERMEDIATE"]
    assert f"`{b.name} = broadcast(T0)` is no view of T0: axis 0 of {b.name} has stride" in d.message and "another allocation order or contiguity" in d.message


@pytest.mark.usefixtures("private_cache")
def test_hsh_nt_broadcast_op_reads_the_operands_through_their_views(monkeypatch):
    """HopperMatmulTest.HSH_NT_128BSwizzle_BroadcastOp: its A and B broadcast to global memory are
    views, the kernel allocates no global intermediate (the test's summary.global_allocations is
    empty) and each TMA load's tensor map lies over the operand the user passes."""
    fusion = hsh_nt_128b_swizzle(True, False)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    assert sorted(kernel.fusion.views) == ["T2", "T3"]
    assert not [p for p in kernel.ir.params if p.kind in (ParamKind.WORKSPACE, ParamKind.SEMAPHORES)]
    maps = {m.param: m.tensor for m in kernel.ir.tensor_maps}
    assert sorted(maps.values()) == ["T2", "T3"]
    fake = FakeDriver(monkeypatch, kernel.ir.params)
    monkeypatch.setattr(type(kernel), "_warn_if_clusters_wait", lambda *args: None)  # asks the occupancy API
    m, n, k = 128, 512, 64
    kernel.run(Array((k, m), 1 << 40, "<f2"), Array((k, n), 1 << 41, "<f2"))
    (launch,) = fake.launches
    by_tensor = {t: launch.args[p] for p, t in maps.items()}
    assert by_tensor == {"T2": 1 << 40, "T3": 1 << 41}


@pytest.mark.parametrize("kw", [{}, {"copies": 2}, {"cache_op": tp.CacheOp.Streaming}],
                         ids=["set", "set_of_a_set", "streaming_set"])
def test_a_plain_copy_of_an_input_is_a_view(kw):
    """nvFuser's isTrivialExpr takes any LoadStoreOp, reading neither its op type nor its cache op:
    a copy of a copy views the input too (aliasTensorProducer chases the chain)."""
    fusion, c = global_copy(**kw)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    copies = [t.name for t in fusion.tensors if t.definition is not None and t.definition.name == "set"]
    assert sorted(kernel.fusion.views) == sorted(copies) and c.name in copies
    assert not kernel.ir.buffers  # nothing allocated for the copies
    assert [v.view_of for v in kernel.ir.views] == ["T1"] * len(copies)  # y's memory, not x's
    assert not any(f"{t} = set" in kernel.cuda_source for t in copies)  # no statement writes them
    for m, n in ((3, 200), (2, 129), (1, 1)):
        x = np.arange(m * n, dtype=np.float32).reshape(m, n)
        y = 1000.0 + 3.0 * np.arange(m * n, dtype=np.float32).reshape(m, n)[::-1].copy()
        (out,) = run_kernel(kernel.ir, kernel.fusion, [x, y], {"T0_0": m, "T0_1": n})
        np.testing.assert_array_equal(out.astype(np.float64), x + y)
        (want,) = reference(kernel.fusion, [x, y])
        np.testing.assert_array_equal(want, x + y)


def test_a_copy_laid_out_otherwise_than_its_input_stays_a_global_intermediate():
    fusion, c = global_copy(permuted=True)
    report = tp.verify(fusion)
    assert report.codes == ["GLOBAL-INTERMEDIATE"], report.codes
    (d,) = report.errors
    assert d.message == (f"{c.name} is an intermediate in global memory, read by T3; `{c.name} = set(T1)` is no "
                         f"view of T1: axis 0 of {c.name} has stride 1 where axis 0 of T1 has T0_1 (another "
                         f"allocation order or contiguity), so the copy would move data")
    assert tp.compile(global_copy()[0]).fusion.views  # laid out as y, the same copy is a view


def test_a_copy_of_a_computed_tensor_stays_a_global_intermediate():
    fusion, c = global_copy(computed=True)
    report = tp.verify(fusion)
    assert report.codes == ["GLOBAL-INTERMEDIATE"], report.codes
    by_tensor = {d.tensor: d.message for d in report.errors}
    assert by_tensor["T2"] == "T2 is an intermediate in global memory, read by T3"  # exp(y): no view of anything
    assert by_tensor[c.name] == (f"{c.name} is an intermediate in global memory, read by T4; `{c.name} = set(T2)` "
                                 f"is no view of T2: its input T2 is a global tensor the kernel computes, not a "
                                 f"fusion input: a view reads the memory of a tensor the kernel is given")


def test_a_transpose_allocated_in_its_inputs_order_is_a_view():
    """nvFuser's transpose is a LoadStoreOp (permute): allocated [M, N] as y is, each element of the
    transpose lies at y's offset, and the reader indexes y's memory transposed."""
    fusion, t = global_transpose()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    assert list(kernel.fusion.views) == [t.name] and not kernel.ir.buffers
    assert [v.view_of for v in kernel.ir.views] == ["T1"]
    for m, n in ((3, 200), (2, 129), (1, 1)):
        x = np.arange(m * n, dtype=np.float32).reshape(m, n)
        y = (1000.0 + 3.0 * np.arange(m * n, dtype=np.float32)).reshape(n, m)
        (out,) = run_kernel(kernel.ir, kernel.fusion, [x, y], {"T0_0": m, "T0_1": n})
        np.testing.assert_array_equal(out.astype(np.float64), x + y.T)


def test_a_transpose_in_its_own_order_stays_a_global_intermediate():
    fusion, t = global_transpose(keep_order=False)
    report = tp.verify(fusion)
    assert report.codes == ["GLOBAL-INTERMEDIATE"], report.codes
    (d,) = report.errors
    assert (f"`{t.name} = transpose(T1)` is no view of T1: axis 0 of {t.name} has stride T0_1 where axis 1 of T1 "
            f"has 1 (another allocation order or contiguity), so the transpose would move data") in d.message
