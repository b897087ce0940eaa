"""The C++ side of each dtype, shared by the emitters (codegen/emit/__init__.py and reduction.py):
its storage and compute types (CTYPES), the C++ of each arithmetic op per compute type (OPS),
of each cast (CASTS, with the conversion helpers they call), of a number operand
(scalar_literal), of an extent operand (extent_value) and of a scalar of extents
(scalar_value_cuda).

Imports nothing of codegen/ (every emitter may import it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CType:
    storage: str
    compute: str
    load: str  # storage -> compute, "{}" is the value
    store: str  # compute -> storage


CTYPES = {
    "float32": CType("float", "float", "{}", "{}"),
    "float64": CType("double", "double", "{}", "{}"),
    "float16": CType("__half", "float", "__half2float({})", "__float2half_rn({})"),
    "bfloat16": CType("__nv_bfloat16", "float", "__bfloat162float({})", "__float2bfloat16_rn({})"),
    "int8": CType("signed char", "int", "(int)({})", "(signed char)({})"),
    "int32": CType("int", "int", "{}", "{}"),
    "int64": CType("long long", "long long", "{}", "{}"),
    "bool": CType("bool", "bool", "{}", "{}"),
}
HALF_TYPES = ("float16", "bfloat16")

_COMPARE = {"eq": "({a} == {b})", "ne": "({a} != {b})", "lt": "({a} < {b})", "le": "({a} <= {b})",
            "gt": "({a} > {b})", "ge": "({a} >= {b})"}  # IEEE: every comparison with NaN false, but ne
_INT = {"neg": "(-{a})", "abs": "({a} < 0 ? -{a} : {a})", "relu": "({a} < 0 ? 0 : {a})",
        "maximum": "({a} > {b} ? {a} : {b})", "minimum": "({a} < {b} ? {a} : {b})", "fmod": "({a} % {b})",
        **_COMPARE}
_ARITH = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
          "where": "({a} ? {b} : {c})"}


def _float_ops(f: str, one: str) -> dict[str, str]:
    """The float (f = "f", one = "1.0f") or double (f = "", one = "1.0") ops: CUDA's math functions,
    as nvFuser's runtime helpers (runtime/helpers.cu) call them."""
    math_functions = {name: f"{name}{f}({{a}})" for name in
                      ("exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "erf", "erfc", "sin",
                       "cos", "floor", "ceil")}
    sigmoid = f"({one} / ({one} + exp{f}(-{{a}})))"
    return {**_ARITH, **_COMPARE, **math_functions, "maximum": "tp_max({a}, {b})", "minimum": "tp_min({a}, {b})",
            "neg": "(-{a})", "abs": f"fabs{f}({{a}})", "relu": f"tp_max({{a}}, {'0.0f' if f else '0.0'})",
            "reciprocal": f"({one} / {{a}})", "sigmoid": sigmoid, "silu": f"({{a}} * {sigmoid})",
            "pow": f"pow{f}({{a}}, {{b}})", "fmod": f"fmod{f}({{a}}, {{b}})",
            # an online max's growth (execution/online.py): 0 where equal, so -inf to -inf is 0, not NaN
            "online_delta": f"({{a}} == {{b}} ? {'0.0f' if f else '0.0'} : {{a}} - {{b}})"}


# maximum / minimum / relu propagate NaN, as the reference (numpy) and PyTorch do; CUDA's
# fmax/fmin return the other operand (measured on H100: relu(sqrt(-1)) was 0, not NaN)
OPS = {  # compute type -> op name -> C++ ({a}, {b}, {c}: the operands, each in its operand type)
    "float": _float_ops("f", "1.0f"),
    "double": _float_ops("", "1.0"),
    "int": {**_ARITH, **_INT},
    "long long": {**_ARITH, **_INT},
    "bool": {"eq": "({a} == {b})", "ne": "({a} != {b})", "logical_and": "({a} && {b})",
             "logical_or": "({a} || {b})", "logical_not": "(!{a})"},
}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def operand_types(kind: str, name: str, ins: list, out) -> tuple[str, list[str]]:
    """(the OPS table an arithmetic op's C++ comes from, the C++ type each operand is converted to
    before it): a comparison's operands stay in their compute type (the output is bool), where's
    condition is a bool and its values take the output's compute type, every other op computes
    in the output's compute type. `ins` and `out` are the operands' and the output's dtypes, the
    value operand (a number, an extent) included at its position."""
    if name in COMPARISONS:
        table = CTYPES[ins[0].name].compute
        return table, [table] * len(ins)
    table = CTYPES[out.name].compute
    if name == "where":
        return table, ["bool"] + [table] * (len(ins) - 1)
    return table, [table] * len(ins)


def extent_value(text: str, compute: str) -> str:
    """An extent operand (its C++ in signed 64-bit arithmetic, `text`) in the compute type: one
    conversion (cvt.rn for a float type); model/ops.py checked that it fits an integer type."""
    return f"(({compute})({text}))"


# A cast: (the source's compute type, the destination dtype) -> C++ turning a value of the compute
# type (the source loaded exactly: half types widen to float, int8 to int) into the destination's
# storage, rounding once. Float -> float: nearest even. Float -> integer: toward zero, saturated
# (PTX cvt.rzi clamps to the destination's range), NaN -> 0 for every pair (cvt.rzi itself gives
# 0 only where neither side is 64-bit, MININT otherwise; CUDA's __float2int_rz and kin leave
# out-of-range values undefined, hence CAST_HELPERS). Integer -> integer: the low bits.
# int -> float16 goes through float: exact below 2^24, and from 65520 up both are inf; int ->
# bfloat16 through double (exact); long long -> bfloat16 by cvt.rn.bf16.s64, since through float
# or double it would round twice. To bool: nonzero is true; from bool: 0 or 1.
# codegen/runtime/reference.py does the same in float64.
CASTS = {
    "float": {"float32": "{}", "float64": "(double)({})", "float16": "__float2half_rn({})",
              "bfloat16": "__float2bfloat16_rn({})", "int8": "tp_sat_s8(tp_f2i({}))",
              "int32": "tp_f2i({})", "int64": "tp_f2ll({})"},
    "double": {"float32": "__double2float_rn({})", "float64": "{}", "float16": "__double2half({})",
               "bfloat16": "__double2bfloat16({})", "int8": "tp_sat_s8(tp_d2i({}))",
               "int32": "tp_d2i({})", "int64": "tp_d2ll({})"},
    "int": {"float32": "__int2float_rn({})", "float64": "__int2double_rn({})",
            "float16": "__float2half_rn(__int2float_rn({}))", "bfloat16": "__double2bfloat16(__int2double_rn({}))",
            "int8": "(signed char)({})", "int32": "{}", "int64": "(long long)({})"},
    "long long": {"float32": "__ll2float_rn({})", "float64": "__ll2double_rn({})",
                  "float16": "__float2half_rn(__ll2float_rn({}))", "bfloat16": "__ll2bfloat16_rn({})",
                  "int8": "(signed char)({})", "int32": "(int)({})", "int64": "{}"},
    "bool": {"float32": "({} ? 1.0f : 0.0f)", "float64": "({} ? 1.0 : 0.0)",
             "float16": "__float2half_rn({} ? 1.0f : 0.0f)", "bfloat16": "__float2bfloat16_rn({} ? 1.0f : 0.0f)",
             "int8": "(signed char)({})", "int32": "(int)({})", "int64": "(long long)({})", "bool": "{}"},
}
for _source, _zero in (("float", "0.0f"), ("double", "0.0"), ("int", "0"), ("long long", "0LL")):
    CASTS[_source]["bool"] = f"({{}} != {_zero})"  # nonzero (NaN too) is true, as C++ and PyTorch
# the float -> integer conversions CASTS names, each emitted where the kernel uses it
CAST_HELPERS = {
    "tp_f2i": """\
__device__ __forceinline__ int tp_f2i(float x) {  // toward zero, saturated, NaN -> 0
  int r; asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(r) : "f"(x)); return r; }""",
    "tp_f2ll": """\
__device__ __forceinline__ long long tp_f2ll(float x) {  // toward zero, saturated, NaN -> 0
  long long r; asm("cvt.rzi.s64.f32 %0, %1;" : "=l"(r) : "f"(x)); return x != x ? 0 : r; }""",
    "tp_d2i": """\
__device__ __forceinline__ int tp_d2i(double x) {  // toward zero, saturated, NaN -> 0
  int r; asm("cvt.rzi.s32.f64 %0, %1;" : "=r"(r) : "d"(x)); return x != x ? 0 : r; }""",
    "tp_d2ll": """\
__device__ __forceinline__ long long tp_d2ll(double x) {  // toward zero, saturated, NaN -> 0
  long long r; asm("cvt.rzi.s64.f64 %0, %1;" : "=l"(r) : "d"(x)); return x != x ? 0 : r; }""",
    "tp_sat_s8": """\
__device__ __forceinline__ signed char tp_sat_s8(int x) {  // saturated to int8's range
  return (signed char)(x < -128 ? -128 : x > 127 ? 127 : x); }""",
}
# a number operand's C++ for non-finite values, per compute type: (inf, nan)
_NON_FINITE = {"float": ("__int_as_float(0x7f800000)", "__int_as_float(0x7fc00000)"),
               "double": ("__longlong_as_double(0x7ff0000000000000LL)", "__longlong_as_double(0x7ff8000000000000LL)")}
_INT_MIN = {"int": -2**31, "long long": -2**63}


def scalar_literal(value: int | float, compute: str) -> str:
    """A binary op's number operand (already converted to the compute type) as C++ of that type."""
    if compute in _INT_MIN:
        suffix = "LL" if compute == "long long" else ""
        if value == _INT_MIN[compute]:
            return f"({value + 1}{suffix} - 1)"  # -2147483648 would be the long 2147483648, negated
        return f"{value}{suffix}" if value >= 0 else f"({value}{suffix})"
    inf, nan = _NON_FINITE[compute]
    if math.isnan(value):
        return nan
    if math.isinf(value):
        return inf if value > 0 else f"(-{inf})"
    text = repr(float(value)) + ("f" if compute == "float" else "")  # a float32 value prints exactly
    return f"({text})" if text.startswith("-") else text


_COMPUTE_DTYPE = {"float": "float32", "double": "float64", "int": "int32", "long long": "int64"}


def scalar_value_cuda(value, extent_cuda, compute: str) -> str:
    """A float scalar of extents (model/scalar_value.py ScalarValue) as C++ computed in its own
    dtype node by node (each extent in signed 64-bit by `extent_cuda`, each op rounding once, as
    IEEE, never contracted into an fma; codegen/runtime/reference.py scalar_value_at does the same), converted to `compute`."""
    def render(v) -> str:
        if v.op == "extent":
            return f"({extent_cuda(v.value)})"
        if v.op == "number":
            return scalar_literal(v.value, CTYPES[v.dtype.name].compute)
        if v.op == "cast":
            return CASTS[CTYPES[v.args[0].dtype.name].compute][v.dtype.name].format(render(v.args[0]))
        prefix = "__d" if v.dtype.name == "float64" else "__f"  # round-to-nearest intrinsics: never fused
        return f"{prefix}{v.op}_rn({render(v.args[0])}, {render(v.args[1])})"

    return CASTS[CTYPES[value.dtype.name].compute][_COMPUTE_DTYPE[compute]].format(render(value))
