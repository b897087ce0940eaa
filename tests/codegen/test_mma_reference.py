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


def test_sums_of_products_by_einsum_equal_the_product_array_summed(monkeypatch):
    """The reference sums an MmaOp's products by einsum, without their [M, N, K] array (1024 each:
    8 GiB and 41 s): the same values as the array summed, for K-major and M-major operands, the
    absolute sums reduction_slack asks for, and a sum over two axes."""
    from tileproof.codegen.runtime import reference as R

    rng = np.random.default_rng(3)
    cases = []
    with tp.Fusion("mm") as f:
        a, b = tp.make_tensor([6, 1, 9]), tp.make_tensor([1, 4, 9])
        f.add_input(a)
        f.add_input(b)
        f.add_output(tp.fused_multiply_sum(a, b, [-1]))
    cases.append((f, [rng.standard_normal((6, 1, 9)), rng.standard_normal((1, 4, 9))]))
    with tp.Fusion("mm_m_major") as g:
        a, b = tp.make_tensor([9, 6, 1]), tp.make_tensor([9, 1, 4])
        g.add_input(a)
        g.add_input(b)
        g.add_output(tp.fused_multiply_sum(a, b, [0]))
    cases.append((g, [rng.standard_normal((9, 6, 1)), rng.standard_normal((9, 1, 4))]))
    with tp.Fusion("two_axes") as h:
        a, b = tp.make_tensor([3, 1, 5, 2]), tp.make_tensor([1, 4, 5, 2])
        h.add_input(a)
        h.add_input(b)
        h.add_output(tp.fused_multiply_sum(a, b, [2, 3]))
    cases.append((h, [rng.standard_normal((3, 1, 5, 2)), rng.standard_normal((1, 4, 5, 2))]))
    for fusion, inputs in cases:
        sums = frozenset(t.name for t in fusion.outputs)
        fast = [reference(fusion, inputs)[0], reference(fusion, inputs, absolute_sums=sums)[0]]
        with monkeypatch.context() as m:
            m.setattr(R, "_product_sum", lambda *args: None)
            slow = [reference(fusion, inputs)[0], reference(fusion, inputs, absolute_sums=sums)[0]]
        for got, want in zip(fast, slow):
            assert got.shape == want.shape, fusion.name
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
