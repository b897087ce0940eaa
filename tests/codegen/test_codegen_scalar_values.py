"""Scalar arithmetic on extents (model/scalar_value.py): nvFuser's `castOp(DataType::Double, extent)`,
`mul(scalar, extent)` and `reciprocal(scalar)` as values a tensor op takes. The kernel computes
them from its size parameters node by node (round-to-nearest intrinsics, never an fma); the CPU
simulator (tests/support/reduction_sim.py, which reads the float64 reference's operand_value) and
an independent numpy computation agree on the values; NVRTC compiles the kernels; what is not
supported is a ScheduleError at the call.
"""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.runtime.reference import reference
from tileproof.model.scalar_value import ScalarValue
from tileproof.model.targets import get_target

from support.reduction_sim import Numbers, run_kernel

P = tp.ParallelType


def _pointwise(make_value, dtype=tp.float32, name="scaled"):
    """out = x * value (value = make_value(x)) of an [M, N] tensor, rows on BIDx, columns [N/32, TIDx{32}]."""
    with tp.Fusion(name) as fusion:
        x = tp.make_tensor(["M", "N"], dtype=dtype)
        fusion.add_input(x)
        out = tp.mul(x, make_value(x))
        fusion.add_output(out)
    out.split(1, 32)
    tp.propagate_transforms(out)
    out.axis(0).parallelize(P.BIDx)
    out.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(out)
    assert tp.verify(fusion, "sm_90a").ok
    return fusion


def _reciprocal_count(x):  # nvFuser's reciprocal(mul(castOp(Double, M), N))
    return tp.div(1.0, tp.mul(tp.cast(x.axis(0).extent, tp.float64), x.axis(1).extent))


def _float32_chain(x):  # float32 throughout: (float(M) * 3 - N) / 7
    return tp.div(tp.sub(tp.mul(tp.cast(tp.extent(x, 0), tp.float32), 3), tp.extent(x, 1)), 7)


CHAINS = [
    (_reciprocal_count, lambda m, n: np.float32(1.0 / (float(m) * float(n)))),
    (_float32_chain, lambda m, n: (np.float32(m) * np.float32(3) - np.float32(n)) / np.float32(7)),
]


@pytest.mark.parametrize("make_value, expected", CHAINS, ids=["reciprocal_float64", "float32_chain"])
@pytest.mark.parametrize("sizes", [(3, 7), (1, 1), (5, 33)])
def test_the_simulated_kernel_the_reference_and_numpy_agree(make_value, expected, sizes):
    fusion = _pointwise(make_value)
    m, n = sizes
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    x = np.random.default_rng(m * 100 + n).standard_normal((m, n)).astype(np.float32).astype(float)
    got = run_kernel(kernel, fusion, [x], {"M": m, "N": n}, Numbers)[0].astype(float)
    want = (np.float32(x) * expected(m, n)).astype(np.float32).astype(float)
    assert np.array_equal(got, want)
    assert np.array_equal(reference(fusion, [x])[0], want)


def test_the_float64_scalar_is_converted_to_float_once_after_the_double_ops():
    text = tp.compile(_pointwise(_reciprocal_count), "sm_90a").cuda_source
    assert "__double2float_rn(__ddiv_rn(1.0, __dmul_rn(__ll2double_rn(" in text


@pytest.mark.parametrize("make_value", [c[0] for c in CHAINS], ids=["reciprocal_float64", "float32_chain"])
def test_the_kernels_compile_with_nvrtc(make_value):
    ir = lower(_pointwise(make_value).snapshot(), get_target("sm_90a")).kernel
    for headers in (True, False):
        include = nvrtc.cuda_include_dir() if headers else None
        if headers and include is None:
            continue
        assert nvrtc.compile_to_cubin(emit(ir, cuda_headers=headers), "sm_90a", include)[:4] == b"\x7fELF"


def test_integer_arithmetic_of_extents_stays_an_extent():
    with tp.Fusion("f"):
        x = tp.make_tensor(["M", "N"])
        product = tp.mul(x.axis(0).extent, tp.extent(x, 1))
        assert str(tp.sub(product, 1)) == str(tp.extent(x, 0) * tp.extent(x, 1) - 1)
        assert not isinstance(tp.cast(product, tp.int64), ScalarValue)
        assert tp.add(tp.cast(product, tp.float32), 0.5).dtype == tp.float64  # a Python float is a Double


def test_a_symbol_unified_later_is_renamed_inside_the_scalar():
    with tp.Fusion("unified") as fusion:
        x = tp.make_tensor(["M"])
        y = tp.make_tensor(["K"])
        fusion.add_input(x)
        fusion.add_input(y)
        scaled = tp.mul(x, tp.div(1.0, tp.cast(y.axis(0).extent, tp.float64)))
        out = tp.add(scaled, y)  # K becomes M
        fusion.add_output(out)
    assert "K" not in str(scaled.definition.scalar) and "M" in str(scaled.definition.scalar)


@pytest.mark.parametrize("build, message", [
    (lambda x: tp.div(x.axis(0).extent, x.axis(1).extent), "integer division of extents"),
    (lambda x: tp.maximum(tp.cast(x.axis(0).extent, tp.float64), 1.0), "scalar arithmetic on extents takes"),
    (lambda x: tp.cast(x.axis(0).extent, tp.float16), "converts to float32, float64 or int64"),
    (lambda x: tp.cast(tp.cast(x.axis(0).extent, tp.float32), tp.int64), "does not convert back to int64"),
    (lambda x: tp.mul(tp.cast(tp.cast(x, tp.int32), tp.int32), tp.cast(x.axis(0).extent, tp.float64)),
     "cast T.* to a float type first"),
    (lambda x: tp.mul(tp.cast(x.axis(0).extent, tp.float64), [1]), "a number, an extent or a scalar"),
    (lambda x: tp.mul(x.axis(0).extent, "N"), "symbol's name, which an op takes only beside a tensor"),
])
def test_unsupported_scalar_arithmetic_is_a_schedule_error(build, message):
    with tp.Fusion("bad"):
        x = tp.make_tensor(["M", "N"])
        with pytest.raises(tp.ScheduleError, match=message):
            build(x)


def test_an_extent_of_another_fusion_is_refused():
    with tp.Fusion("other"):
        other = tp.make_tensor(["Q"])
    with tp.Fusion("this"):
        x = tp.make_tensor(["M"])
        with pytest.raises(tp.ScheduleError, match="not an extent of this fusion"):
            tp.mul(x, tp.cast(other.axis(0).extent, tp.float64))
