"""The launch checks what an op's extent unification assumed (codegen/runtime/binding.py): inputs
whose mapped axes have different sizes are a tp.InputError naming both tensors, the axes and the
sizes, before anything touches a GPU (the arrays here point nowhere)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.runtime.binding import bind

from support.extent_schedules import add_symbolic


class FakeDeviceArray:
    """A CUDA-array-interface object that points nowhere (for argument checks only)."""

    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": "<f4", "data": (1 << 40, False),
                                         "version": 3, "strides": None}


def bound_sizes(kernel, *shapes) -> dict[str, int]:
    bound = bind(kernel.ir.globals, [FakeDeviceArray(s) for s in shapes], None, {}, list(kernel.fusion.symbols), None)
    return bound.env


def test_equal_sizes_bind_the_one_extent():
    kernel = tp.compile(add_symbolic(2))
    assert [p.symbol for p in kernel.ir.params if p.symbol] == ["T0_0", "T0_1"]  # no T1_0, T1_1 to pass
    assert bound_sizes(kernel, (37, 300), (37, 300)) == {"T0_0": 37, "T0_1": 300}


@pytest.mark.parametrize("second,axis,size,want", [((37, 299), 1, 299, 300), ((36, 300), 0, 36, 37)])
def test_mismatched_sizes_name_both_tensors_axes_and_sizes(second, axis, size, want):
    kernel = tp.compile(add_symbolic(2))
    message = (rf"input T1 \(argument 1\): axis {axis} has size {size}, expected T0_{axis} \(bound to {want} by "
               rf"input T0 \(argument 0\) axis {axis}\); both axes have the one extent T0_{axis} \(the fusion's ops "
               rf"map them onto one another")
    with pytest.raises(tp.InputError, match=message):
        kernel.run(FakeDeviceArray((37, 300)), FakeDeviceArray(second))


def test_an_input_unified_with_a_constant_must_have_that_size():
    kernel = tp.compile(add_symbolic(1, second=[512]))
    assert bound_sizes(kernel, (512,), (512,)) == {}
    with pytest.raises(tp.InputError, match=r"input T0 \(argument 0\): axis 0 has size 500, expected 512"):
        kernel.run(FakeDeviceArray((500,)), FakeDeviceArray((512,)))


def test_an_assumption_stated_on_the_unified_symbol_is_checked_at_launch():
    kernel = tp.compile(add_symbolic(1, vector=4))  # assumes T1_0 % 4 == 0, which is T0_0 % 4 == 0
    with pytest.raises(tp.InputError, match=r"sizes T0_0 = 6 violate the assumption T0_0 % 4 == 0"):
        kernel.run(FakeDeviceArray((6,)), FakeDeviceArray((6,)))
