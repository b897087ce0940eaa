"""A size-1 axis's stride says nothing about addressing (it is only indexed at 0; PyTorch gives such
an axis any stride), so binding (codegen/runtime/binding.py bind_strides) ignores it: a
discontiguous size-1 axis's stride variable is bound from the next outer axis, whose stride the
kernel builds from it. Before, that variable stayed unbound and the outer axis was refused with
"expected None". A discontiguous size-1 axis with no outer axis built from it gets the stride a
dense array would have (a tensor map checks it). No GPU: the arrays point nowhere, the driver is
faked."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.runtime import tensor_maps
from tileproof.codegen.runtime.binding import bind

from support.fake_driver import FakeDriver

pytestmark = pytest.mark.usefixtures("private_cache")
P = tp.ParallelType


class Array:
    """A __cuda_array_interface__ array at a fake address; strides in elements of 4 bytes."""

    def __init__(self, shape, strides=None, address=1 << 40):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": "<f4", "data": (address, False),
                                         "version": 3,
                                         "strides": None if strides is None else tuple(4 * s for s in strides)}


def inner_strided_copy():
    """T0 [M, N] with N discontiguous (its stride a kernel argument) and M contiguous over it:
    M's stride is N's stride times N."""
    with tp.Fusion("inner_strided_copy") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=[True, False])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    fusion.assume("N <= 1024")
    return fusion


def tma_rows():
    """T0 [M, K] with rows at a launch-time stride (contiguity [False, True]), loaded by TMA in
    boxes of 8 x 32: the tensor map's row stride is that variable."""
    with tp.Fusion("tma_rows") as fusion:
        t0 = tp.make_tensor(["M", "K"], contiguity=[False, True])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    fusion.assume("K % 4 == 0")
    fusion.assume("M <= 65535 * 8")
    for t in (t1, t2):
        t.split(1, 32).split(0, 8)  # [Mo, Mi{8}, Ko, Ki{32}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(2).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


def bound_env(kernel, array) -> dict[str, int]:
    return bind(kernel.ir.globals, [array], None, {}, list(kernel.fusion.symbols), None).env


@pytest.mark.parametrize("strides,row", [((1, 5), 1),  # a [1, M] tensor's .t(): the size-1 axis strides over M
                                         ((8, 1), 8),  # column 0 of a [M, 8] tensor, x[:, :1]
                                         ((8, 3), 8)])  # any stride at all on the size-1 axis
def test_a_size_one_discontiguous_axis_takes_its_stride_from_the_next_outer_axis(strides, row):
    kernel = tp.compile(inner_strided_copy())
    assert bound_env(kernel, Array((5, 1), strides)) == {"M": 5, "N": 1, "stride.T0.1": row}


def test_axes_of_other_sizes_bind_as_before():
    kernel = tp.compile(inner_strided_copy())
    assert bound_env(kernel, Array((5, 3), (12, 4))) == {"M": 5, "N": 3, "stride.T0.1": 4}
    with pytest.raises(tp.InputError, match=r"axis 0 has stride 13, expected 12: the fusion declares it contiguous"):
        bound_env(kernel, Array((5, 3), (13, 4)))
    with pytest.raises(tp.InputError, match=r"axis 0 has stride 0; tileproof needs positive strides"):
        bound_env(kernel, Array((5, 1), (0, 1)))  # the outer axis's stride binds the variable, and is checked


def test_the_launch_passes_the_row_stride_the_outer_axis_has(monkeypatch):
    """The kernel addresses row m at m * stride * N = m * stride: the array's row stride."""
    kernel = tp.compile(inner_strided_copy())
    fake = FakeDriver(monkeypatch, kernel.ir.params)
    stride = next(p.name for p in kernel.ir.params if p.kind.value == "stride")
    kernel.run(Array((5, 1), (8, 1)), out=[Array((5, 1), address=2 << 40)])
    assert fake.launches[-1].args[stride] == 8


@pytest.mark.parametrize("row_stride", [1, 64, 100])
def test_an_outermost_size_one_axis_gets_a_dense_stride_the_tensor_map_accepts(row_stride):
    """One row ([1, 64], its row stride anything: 1 for a [64, 1] tensor's .t()): the row stride
    variable has no outer axis to bind it and is never used to address; it is bound to a dense
    row's 64 elements, so the tensor map (whose encoder wants a positive multiple of 16 bytes)
    is made. Before, the map asked for T0.stride(0) as a keyword, which run() cannot take."""
    kernel = tp.compile(tma_rows())
    env = bound_env(kernel, Array((1, 64), (row_stride, 1)))
    assert env == {"M": 1, "K": 64, "stride.T0.0": 64}
    (tmap,) = kernel.ir.tensor_maps
    values = tensor_maps.values(tmap, env)
    assert values["sizes"] == [64, 1] and values["strides"] == [64 * 4]
    tensor_maps.check(tmap, 1 << 40, values)
    assert bound_env(kernel, Array((3, 64), (100, 1)))["stride.T0.0"] == 100  # more rows: the array's stride
