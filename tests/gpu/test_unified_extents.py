"""Adds of inputs with distinct symbolic extents on the GPU (marker `gpu`; skipped without
PyTorch or a CUDA device): `add(makeContigTensor(n), makeContigTensor(n))`, the extents unified
by the op (model/extent_unification.py), run at three sizes into outputs poisoned with NaN and
compared with PyTorch bit for bit; inputs whose sizes differ are refused at launch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.extent_schedules import add_symbolic  # noqa: E402

pytestmark = pytest.mark.gpu

SHAPES = {1: [(1,), (1000,), (70001,)], 2: [(1, 1), (37, 300), (129, 1000)]}


def run_add(kernel, shape, second=None):
    a = torch.randn(shape, device="cuda")
    b = torch.randn(second or shape, device="cuda")
    out = torch.full(shape, float("nan"), device="cuda")
    kernel.run(a, b, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, a + b), shape


@pytest.mark.parametrize("ndims", [1, 2])
def test_add_of_two_symbolic_inputs_runs_at_three_sizes(ndims):
    kernel = tp.compile(add_symbolic(ndims))
    for shape in SHAPES[ndims]:
        run_add(kernel, shape)


@pytest.mark.parametrize("ndims", [1, 2])
def test_vectorized_add_with_the_assumption_on_the_second_input_runs_at_three_sizes(ndims):
    kernel = tp.compile(add_symbolic(ndims, vector=4))
    for shape in ([(4,), (1000,), (70004,)] if ndims == 1 else [(1, 4), (37, 300), (129, 1000)]):
        run_add(kernel, shape)


def test_a_symbolic_input_unified_with_a_constant_runs():
    kernel = tp.compile(add_symbolic(1, second=[512]))
    run_add(kernel, (512,))
    with pytest.raises(tp.InputError, match=r"input T0 \(argument 0\): axis 0 has size 500, expected 512"):
        run_add(kernel, (500,), (512,))


@pytest.mark.parametrize("ndims", [1, 2])
def test_inputs_of_different_sizes_are_refused_at_launch(ndims):
    kernel = tp.compile(add_symbolic(ndims))
    first = SHAPES[ndims][1]
    second = first[:-1] + (first[-1] + 1,)
    with pytest.raises(tp.InputError, match=rf"input T1 \(argument 1\): axis {ndims - 1} has size {second[-1]}, "
                                            rf"expected T0_{ndims - 1} \(bound to {first[-1]} by input T0"):
        run_add(kernel, first, second)
