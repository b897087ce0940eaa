"""Every op of the public op set in the generated code: each compiles with NVRTC for sm_90a, is
emitted as the CUDA function nvFuser's runtime calls (half types computed in float), comparisons
store bool, where selects in the promoted type, value operands (numbers, extents) stand where
they were written, and the CPU simulator (support/reduction_sim.py) running the lowered kernels
at small sizes gives the float64 reference. tests/gpu/test_ops.py runs them on the GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.runtime.reference import reference, tolerance
from tileproof.model.targets import get_target

from support import op_schedules as S
from support.reduction_sim import run_kernel

TARGET = get_target("sm_90a")
# the CUDA each float op becomes, as nvFuser's runtime/helpers.cu: (float, double)
EXPECTED = {
    "exp": ("expf(", "exp("), "exp2": ("exp2f(", "exp2("), "expm1": ("expm1f(", "expm1("), "log": ("logf(", "log("),
    "log2": ("log2f(", "log2("), "log1p": ("log1pf(", "log1p("), "sqrt": ("sqrtf(", "sqrt("),
    "rsqrt": ("rsqrtf(", "rsqrt("), "reciprocal": ("(1.0f / ", "(1.0 / "), "tanh": ("tanhf(", "tanh("),
    "erf": ("erff(", "erf("), "erfc": ("erfcf(", "erfc("), "sigmoid": ("(1.0f / (1.0f + expf(-", "(1.0 / (1.0 + exp(-"),
    "silu": (" * (1.0f / (1.0f + expf(-", " * (1.0 / (1.0 + exp(-"), "sin": ("sinf(", "sin("), "cos": ("cosf(", "cos("),
    "floor": ("floorf(", "floor("), "ceil": ("ceilf(", "ceil("), "relu": ("tp_max(", "tp_max("),
    "neg": ("(-(float)", "(-(double)"), "abs": ("fabsf(", "fabs("),
    "pow": ("powf(", "pow("), "fmod": ("fmodf(", "fmod("), "maximum": ("tp_max(", "tp_max("),
    "minimum": ("tp_min(", "tp_min("), "add": (" + ", " + "), "sub": (" - ", " - "), "mul": (" * ", " * "),
    "div": (" / ", " / "),
}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def kernel_body(fusion, headers: bool = True) -> str:
    assert tp.verify(fusion, target="sm_90a").ok
    source = emit(lower(fusion.snapshot(), TARGET).kernel, cuda_headers=headers)
    include = nvrtc.cuda_include_dir() if headers else None
    assert nvrtc.compile_to_cubin(source, "sm_90a", include)[:4] == b"\x7fELF"
    return source[source.index('extern "C"'):]


def statements(body: str) -> list[str]:
    return [line.strip() for line in body.splitlines() if " = " in line and not line.strip().startswith("//")]


@pytest.mark.parametrize("name", S.FLOAT_UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_each_unary_op_compiles_as_nvfusers_cuda_function(name, dtype):
    body = kernel_body(S.unary(name, dtype))
    (line,) = statements(body)
    assert EXPECTED[name][dtype == "float64"] in line
    if dtype == "bfloat16":  # computed in float, rounded once when stored
        assert line.split(" = ", 1)[1].startswith("__float2bfloat16_rn(") and "__bfloat162float(" in line


@pytest.mark.parametrize("name", S.FLOAT_BINARY)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_each_binary_op_compiles(name, dtype):
    (line,) = statements(kernel_body(S.binary(name, dtype)))
    assert EXPECTED[name][dtype == "float64"] in line


@pytest.mark.parametrize("name", S.INTEGER_BINARY)
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_integer_binary_ops_compile(name, dtype):
    (line,) = statements(kernel_body(S.binary(name, dtype)))
    assert {"maximum": " > ", "minimum": " < ", "fmod": " % "}.get(name, EXPECTED[name][0]) in line


@pytest.mark.parametrize("name", S.COMPARISONS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_comparisons_compare_in_the_operands_type_and_store_bool(name, dtype):
    body = kernel_body(S.binary(name, dtype, value=3))
    assert "bool* __restrict__ T1" in body
    (line,) = statements(body)
    literal = {"float32": "3.0f", "bfloat16": "3.0f", "int64": "3LL"}[dtype]
    assert line.endswith(f" {COMPARE[name]} {literal});")


def test_a_number_before_the_tensor_stays_first():
    (line,) = statements(kernel_body(S.binary("sub", value=2.5, value_first=True)))
    assert line.split(" = ", 1)[1].startswith("(2.5f - (float)(T0[")


def test_an_extent_becomes_the_size_parameter_converted_once():
    (line,) = statements(kernel_body(S.binary("div", value="N")))
    assert line.endswith(" / ((float)((long long)(s_N))));")
    times_n, minus_m, over_mn = statements(kernel_body(S.extent_values()))
    assert times_n.endswith(" * ((float)((long long)(s_N))));") and minus_m.endswith(" - ((float)((long long)(s_M))));")
    assert over_mn.endswith(" / ((float)(((long long)(s_M) * (long long)(s_N)))));")  # a 64-bit product


def test_where_selects_in_the_promoted_type():
    body = kernel_body(S.where("bfloat16", "float32"))
    assert "float* __restrict__ T4" in body
    line = statements(body)[-1]
    assert line.startswith("T4[") and "? (float)(__bfloat162float(T1[" in line and ": (float)(T2[" in line
    (line,) = statements(kernel_body(S.where("int32", value=-1)))[-1:]
    assert line.endswith(": (-1));")


def test_bool_tensors_combine_and_cast():
    body = kernel_body(S.logical("bfloat16"))
    lines = statements(body)
    assert any("(!" in line for line in lines) and any(" && " in line for line in lines)
    assert lines[-1].endswith("__float2bfloat16_rn(T7[((blockIdx.x * 128U) + threadIdx.x)] ? 1.0f : 0.0f);")


def test_bool_operands_vectorize_as_bytes():
    body = kernel_body(S.vectorized_mask(4))  # 4 bools are one 4-byte access beside 16 bytes of float32
    assert "*reinterpret_cast<unsigned int*>(&T2[" in body and "alignas(16) bool in0[4];" in body
    report = tp.verify(S.vectorized_mask(8), target="sm_90a")  # 32 bytes of float32 are no access
    assert not report.ok and {d.code for d in report.diagnostics if d.severity is tp.Severity.ERROR} == {
        "VECTORIZE-WIDTH"}


@pytest.mark.parametrize("op", S.ROW_OPS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_row_reductions_compile(op, dtype):
    body = kernel_body(S.row(op, dtype))
    if op == "min":
        infinity = "__longlong_as_double(0x7ff0000000000000LL)" if dtype == "float64" else "__int_as_float(0x7f800000)"
        assert "tp_min" in body and f"= {infinity};" in body  # starts at +inf
    if op == "mean":
        assert " / ((float)((long long)(s_N)))" in body or " / ((double)((long long)(s_N)))" in body


@pytest.mark.parametrize("dtype, start", [("int8", "127"), ("int32", "2147483647"), ("int64", "9223372036854775807LL")])
def test_an_integer_min_starts_at_the_highest_value(dtype, start):
    assert f"= {start};" in kernel_body(S.row("min", dtype))


def test_var_mean_compiles_without_the_cuda_headers_too():
    for headers in (True, False):
        body = kernel_body(S.var_mean(), headers=headers)
        assert "/ ((float)(999LL))" in body
    symbolic = kernel_body(S.var_mean("float64", length="N"))  # max(N - 1, 0) in signed 64-bit
    assert "/ ((double)(max(((long long)(s_N) + (-1LL)), 0LL)))" in symbolic


# -- the lowered kernels on the CPU simulator against the reference ---------------------------------

def _inputs(fusion, sizes, rng):
    out = []
    for t in fusion.inputs:
        shape = [sizes[i.extent_expr.value] if i.extent_expr.op == "var" else i.extent_expr.value for i in t.logical]
        values = rng.standard_normal(shape) * 3
        out.append(np.round(values) if t.dtype.is_integer else values)
    return out


SIMULATED = [
    (lambda: S.unary("gelu"), {"N": 300}), (lambda: S.unary("tanh_gelu", "bfloat16"), {"N": 200}),
    (lambda: S.unary("erf", "float64"), {"N": 130}), (lambda: S.binary("pow", value=2.0), {"N": 130}),
    (lambda: S.binary("sub", value=2.5, value_first=True), {"N": 130}),
    (lambda: S.binary("div", value="N"), {"N": 300}), (lambda: S.binary("ge", "int32", value=1), {"N": 130}),
    (lambda: S.where("bfloat16", "float32"), {"N": 300}), (lambda: S.where("float32", value=-1.0), {"N": 200}),
    (lambda: S.logical(), {"N": 300}), (lambda: S.row("min"), {"M": 3, "N": 300}),
    (lambda: S.row("min", "int32"), {"M": 2, "N": 200}), (lambda: S.row("mean", "bfloat16"), {"M": 3, "N": 300}),
    (lambda: S.var_mean(length=200), {"M": 2}), (lambda: S.var_mean(length=200, correction=0), {"M": 2}),
    (lambda: S.var_mean(length="N", correction=3), {"M": 2, "N": 2}),  # N - correction < 0: inf, NaN
    (lambda: S.extent_values(), {"M": 3, "N": 50}), (lambda: S.vectorized_mask(4), {"N": 1024}),
]


@pytest.mark.parametrize("build, sizes", SIMULATED, ids=lambda x: x.__name__ if callable(x) else str(x))
def test_the_simulated_kernel_computes_the_reference(build, sizes):
    fusion = build()
    ir = lower(fusion.snapshot(), TARGET).kernel
    inputs = _inputs(fusion, sizes, np.random.default_rng(7))
    for t, got, want in zip(fusion.outputs, run_kernel(ir, fusion, inputs, sizes), reference(fusion, inputs)):
        rtol, atol = tolerance(t.dtype)
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol)
