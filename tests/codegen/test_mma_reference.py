"""The float64 reference (codegen/runtime/reference.py) of an MmaOp is the sum of the products,
what the GPU checks (fuzz --run, rejected_on_gpu) compare kernels with: for operands declared
broadcast ([M, 1, K], [1, N, K]), for tp.matmul's two broadcasts, and with an M-major A."""

from __future__ import annotations

import numpy as np

import tileproof as tp
from tileproof.codegen.runtime.reference import reference


def test_fused_multiply_sum_is_a_sum_of_products():
    with tp.Fusion("mm") as f:
        a, b = tp.make_tensor([5, 1, 7]), tp.make_tensor([1, 3, 7])
        f.add_input(a)
        f.add_input(b)
        f.add_output(tp.fused_multiply_sum(a, b, [-1]))
    a.set_allocation_domain([a.axis(2), a.axis(1), a.axis(0)], True)  # the layout does not change values
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((5, 1, 7)), rng.standard_normal((1, 3, 7))
    (got,) = reference(f, [x, y])
    np.testing.assert_allclose(got, x[:, 0, :] @ y[0].T, rtol=1e-6)  # float32 output: rounded once


def test_matmul_of_negative_products_is_not_a_maximum():
    with tp.Fusion("mm") as f:
        a, b = tp.make_tensor([4, 6]), tp.make_tensor([6, 2])
        f.add_input(a)
        f.add_input(b)
        f.add_output(tp.matmul(a, b))
    x, y = -np.ones((4, 6)), np.ones((6, 2))
    (got,) = reference(f, [x, y])
    assert (got == -6.0).all()
