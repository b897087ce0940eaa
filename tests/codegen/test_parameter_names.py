"""Kernel parameters and launch errors take the user's tensor names (issue 35 item 4): an input
made with make_tensor(name="x") or an output given set_name("y") is the kernel parameter `x` /
`y` (codegen/emit pointer_names: with underscores appended where the name is a C++ keyword or a
word the kernel already uses), and run()'s InputErrors say `input x`. Unnamed tensors keep
T<n>. The kernels compile (NVRTC), so a clash would fail here; no GPU is touched (the arrays
point nowhere)."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.codegen.emit import pointer_names

P = tp.ParallelType

pytestmark = pytest.mark.usefixtures("private_cache")


class FakeDeviceArray:
    """A CUDA-array-interface object that points nowhere (for argument checks only)."""

    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": "<f4", "data": (1 << 40, False),
                                         "version": 3, "strides": None}


def _add(a: str | None, b: str | None, out: str | None, *, staged: bool = False):
    """out = a + b over N, 128 threads a block; `staged`: b copied through shared memory."""
    with tp.Fusion("add") as fusion:
        ta = tp.make_tensor(["N"], name=a); fusion.add_input(ta)
        tb = tp.make_tensor(["N"], name=b); fusion.add_input(tb)
        tile = tp.set(tb) if staged else tb
        tc = tp.add(ta, tile); fusion.add_output(tc)
    if out is not None:
        tc.set_name(out)
    tensors = [tc, tile] if staged else [tc]
    for t in tensors:
        t.split(0, 128); t.axis(0).parallelize(P.BIDx); t.axis(1).parallelize(P.TIDx)
    if staged:
        tile.set_memory_type(tp.MemoryType.Shared)
    return fusion


def _parameters(source: str) -> list[str]:
    return re.findall(r"\* __restrict__ (\w+)", source)


def test_named_tensors_are_the_kernels_parameters():
    source = tp.compile(_add("x", "bias", "y")).cuda_source
    assert _parameters(source) == ["x", "bias", "y"]
    assert "y[" in source and "x[" in source and "bias[" in source and not re.search(r"\bT[012]\[", source)
    assert "//   y = add(x, bias)" in source  # the header names them too


def test_unnamed_tensors_keep_t_n():
    assert _parameters(tp.compile(_add(None, None, None)).cuda_source) == ["T0", "T1", "T2"]


def test_a_name_the_kernel_already_uses_gets_an_underscore():
    """`smem` is the kernel's shared-memory array, `float` a keyword; `x` is free (threadIdx.x is a member)."""
    source = tp.compile(_add("float", "smem", "x", staged=True)).cuda_source
    assert _parameters(source) == ["float_", "smem_", "x"]
    assert "extern __shared__ __align__(1024) unsigned char smem[];" in source


def test_pointer_names_skip_every_word_in_use_and_each_other():
    source = 'int a; float a_; // b is in a comment\nasm("c");'
    assert pointer_names({"T0": "a", "T1": "b", "T2": "c", "T3": "int"}, source) == \
        {"T0": "a__", "T1": "b", "T2": "c", "T3": "int_"}


def test_launch_errors_name_the_inputs_as_the_user_did():
    kernel = tp.compile(_add("x", "bias", "y"))
    with pytest.raises(tp.InputError, match=r"^input bias \(argument 1\): axis 0 has size 6, expected N \(bound to 5 "
                                            r"by input x \(argument 0\) axis 0\)"):
        kernel.run(FakeDeviceArray((5,)), FakeDeviceArray((6,)))
    with pytest.raises(tp.InputError, match=r"^the fusion takes 2 inputs \(x, bias\), got 1"):
        kernel.run(FakeDeviceArray((5,)))


def _strided_copy(name: str | None):
    """y = x for x of two -1 extents with a run-time row stride (contiguity [False, True])."""
    with tp.Fusion("strided_copy") as fusion:
        x = tp.make_tensor([-1, -1], contiguity=[False, True], name=name); fusion.add_input(x)
        y = tp.set(x); fusion.add_output(y)
    y.split(1, 128); y.axis(0).parallelize(P.BIDx); y.axis(2).parallelize(P.TIDx)
    return fusion


def test_a_named_tensors_extents_and_strides_take_its_name():
    fusion = _strided_copy("x")
    assert list(fusion.symbols) == ["x_0", "x_1"]
    kernel = tp.compile(fusion)
    assert [p.name for p in kernel.ir.params][2:] == ["s_x_0", "s_x_1", "stride_x_0"]
    assert _parameters(kernel.cuda_source) == ["x", "T1"] and "stride_x_0" in kernel.cuda_source


def test_an_unnamed_tensors_extents_and_strides_keep_t_n():
    fusion = _strided_copy(None)
    assert list(fusion.symbols) == ["T0_0", "T0_1"]
    assert [p.name for p in tp.compile(fusion).ir.params] == ["T0", "T1", "s_T0_0", "s_T0_1", "stride_T0_0"]


def test_tensor_map_launch_errors_name_the_tensor_as_the_user_did():
    from tileproof.codegen.ir import TensorMap
    from tileproof.codegen.runtime import tensor_maps
    from tileproof.model.expr import const, var

    tmap = TensorMap(param="tmap_T1", tensor="T0", dtype=tp.float32, sizes=(var("x_1"), var("x_0")),
                     strides_bytes=(var("stride.T0.0"),), box=(const(64), const(8)),
                     element_strides=(const(1), const(1)), swizzle_bytes=0, user_name="x")
    with pytest.raises(tp.InputError, match=r"^the tensor map of x needs x_1; pass it as a keyword"):
        tensor_maps.values(tmap, {})
    with pytest.raises(tp.InputError, match=r"^the tensor map of x needs x.stride\(0\)"):
        tensor_maps.values(tmap, {"x_0": 8, "x_1": 64})
    v = tensor_maps.values(tmap, {"x_0": 8, "x_1": 64, "stride.T0.0": 256})
    with pytest.raises(tp.InputError, match=r"^x is loaded or stored by TMA, which needs a 16-byte aligned address"):
        tensor_maps.check(tmap, 8, v)
