"""Casts and number operands in the code generator and the reference (no GPU): the conversion
each (source, destination) pair emits, NVRTC compiles for sm_90a and sm_100a with and without
the CUDA headers, vectorized casts move each operand in its own width, a number operand is
printed exactly in the compute type, and the float64 reference converts as the kernel does.
tests/gpu/test_casts.py runs the same kernels against the reference on a GPU."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.emit import CASTS, CTYPES, emit, scalar_literal
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.runtime.reference import reference, round_to
from tileproof.model.targets import get_target
from tileproof.model.types import DTYPES

from support.codegen_schedules import DTYPE_NAMES, cast_chain, every_cast, scalar_ops, vectorized_cast

ROOT = Path(__file__).resolve().parents[2]
P = tp.ParallelType

pytestmark = pytest.mark.usefixtures("private_cache")

# (source, destination) -> what the emitted statement must call: one rounding, no detour
CONVERSIONS = {
    ("float32", "bfloat16"): "__float2bfloat16_rn(T0[",
    ("float32", "float16"): "__float2half_rn(T0[",
    ("float32", "int8"): "tp_sat_s8(tp_f2i(T0[",
    ("float32", "int32"): "tp_f2i(T0[",
    ("float32", "int64"): "tp_f2ll(T0[",
    ("float64", "float32"): "__double2float_rn(T0[",
    ("float64", "bfloat16"): "__double2bfloat16(T0[",
    ("float64", "float16"): "__double2half(T0[",
    ("float64", "int32"): "tp_d2i(T0[",
    ("bfloat16", "float32"): "__bfloat162float(T0[",
    ("bfloat16", "float16"): "__float2half_rn(__bfloat162float(T0[",
    ("float16", "bfloat16"): "__float2bfloat16_rn(__half2float(T0[",
    ("bfloat16", "int32"): "tp_f2i(__bfloat162float(T0[",
    ("int32", "bfloat16"): "__double2bfloat16(__int2double_rn(T0[",
    ("int64", "bfloat16"): "__ll2bfloat16_rn(T0[",
    ("int64", "float32"): "__ll2float_rn(T0[",
    ("int64", "int32"): "(int)(T0[",
    ("int32", "int8"): "(signed char)(T0[",
    ("int8", "float32"): "__int2float_rn((int)(T0[",
    ("int8", "int64"): "(long long)((int)(T0[",
}


def test_the_cast_table_covers_every_pair_of_compute_type_and_dtype():
    assert set(CASTS) == {c.compute for c in CTYPES.values()}
    for table in CASTS.values():
        assert set(table) == set(DTYPES)
    for name, dtype in DTYPES.items():  # the model's compute type is the C++ one
        assert CTYPES[dtype.compute.name].storage == CTYPES[name].compute, name


@pytest.mark.parametrize("source,dest", sorted(CONVERSIONS))
def test_each_cast_emits_its_conversion(source, dest):
    source_text = tp.compile(every_cast(source)).cuda_source
    k = [d for d in DTYPE_NAMES if d != source].index(dest) + 1
    line = next(ln for ln in source_text.splitlines() if ln.lstrip().startswith(f"T{k}["))
    assert CONVERSIONS[(source, dest)] in line, line


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("source", DTYPE_NAMES)
def test_every_cast_compiles_with_and_without_cuda_headers(source, target):
    ir = lower(every_cast(source).snapshot(), get_target(target)).kernel
    for headers in (True, False):
        text = emit(ir, cuda_headers=headers)
        include = nvrtc.cuda_include_dir() if headers else None
        if headers and include is None:
            continue
        assert nvrtc.compile_to_cubin(text, target, include)[:4] == b"\x7fELF"


def test_float_to_integer_helpers_appear_only_where_used():
    text = tp.compile(every_cast("float64")).cuda_source
    assert "tp_d2i(double x)" in text and "tp_d2ll(double x)" in text and "tp_sat_s8(int x)" in text
    assert "tp_f2i(" not in text and "tp_f2ll(" not in text
    assert "tp_sat_s8" not in tp.compile(every_cast("int32")).cuda_source


def test_vectorized_bfloat16_cast_moves_each_operand_in_its_own_width():
    """float32 -> bfloat16, 4 per vector: one 16-byte load (uint4) and one 8-byte store (uint2)."""
    text = tp.compile(vectorized_cast("float32", "bfloat16", 4)).cuda_source
    assert "*reinterpret_cast<uint4*>(in0) = *reinterpret_cast<const uint4*>(&T0[" in text
    assert "alignas(16) __nv_bfloat16 result[4];" in text
    assert "result[v] = __float2bfloat16_rn(in0[v]);" in text
    assert "*reinterpret_cast<uint2*>(&T1[" in text and "reinterpret_cast<const uint2*>(result)" in text
    back = tp.compile(vectorized_cast("bfloat16", "float32", 4)).cuda_source
    assert "*reinterpret_cast<uint2*>(in0) = *reinterpret_cast<const uint2*>(&T0[" in back
    assert "reinterpret_cast<const uint4*>(result)" in back


def test_vectorized_cast_records_each_operands_alignment():
    kernel = tp.compile(vectorized_cast("float32", "bfloat16", 4))
    assert {g.name: g.vector_elements for g in kernel.ir.globals} == {"T0": 4, "T1": 4}
    assert {g.name: g.dtype.name for g in kernel.ir.globals} == {"T0": "float32", "T1": "bfloat16"}


def test_cast_examples_compile_and_reject_as_declared():
    from tileproof.schedule_files import discover

    valid = discover([str(ROOT / "examples" / "valid" / "casts.py")])
    assert len(valid) >= 4
    for case in valid:
        assert tp.compile(case.build()).cubin[:4] == b"\x7fELF"
    for case in discover([str(ROOT / "examples" / "invalid" / "casts.py")]):
        report = tp.verify(case.build())
        assert [d.code for d in report.errors] == ["VECTORIZE-WIDTH"], case.name
        assert report.errors[0].counterexample["bytes"] == 32


def test_cast_into_and_out_of_tensor_memory_compiles_for_sm100a():
    """The accumulator epilogue shape: float32 in tensor memory, converted in registers."""
    for into in (True, False):
        with tp.Fusion("tmem_cast") as fusion:
            t0 = tp.make_contig_concrete_tensor([2, 8, 8, 2], dtype=tp.bfloat16 if into else tp.float32)
            fusion.add_input(t0)
            t1 = tp.set(t0)
            t2 = tp.cast(t1, tp.float32) if into else tp.set(t1)
            t3 = tp.set(t2) if into else tp.cast(t2, tp.bfloat16)
            t4 = tp.set(t3)
            fusion.add_output(t4)
        t2.set_memory_type(tp.MemoryType.Tensor)
        t4.axis(0).parallelize(P.TIDz)
        t4.axis(1).parallelize(P.TIDy)
        t4.axis(2).parallelize(P.TIDx)
        tp.parallelize_all_like(t4)
        t2.set_tmem_dim_sep_pos(3)
        text = tp.compile(fusion, target="sm_100a").cuda_source
        # the registers hold float32 (tensor memory's dtype); the conversion is in the thread's code
        assert "float tmem_elements[1];" in text
        want = "tmem_elements[0] = __bfloat162float(T1[" if into else "] = __float2bfloat16_rn(tmem_elements[0]);"
        assert want in text


# -- number operands ---------------------------------------------------------------------------


def test_a_number_operand_is_printed_in_its_place_and_compute_type():
    with tp.Fusion("numbers") as fusion:
        a = tp.make_tensor(["N"], dtype=tp.bfloat16)
        fusion.add_input(a)
        outs = [tp.mul(a, 0.1), tp.sub(2, a), tp.div(a, -3.5), tp.add(a, float("inf")), tp.mul(a, float("nan"))]
        for t in outs:
            fusion.add_output(t)
            t.split(0, 128)
            t.axis(0).parallelize(P.BIDx)
            t.axis(1).parallelize(P.TIDx)
    text = tp.compile(fusion).cuda_source
    assert "((float)(__bfloat162float(T0[" in text
    assert "* 0.10000000149011612f)" in text  # float32(0.1), printed exactly
    assert "((2.0f) - " not in text and "(2.0f - (float)(__bfloat162float(T0[" in text
    assert "/ (-3.5f))" in text
    assert "+ __int_as_float(0x7f800000))" in text and "* __int_as_float(0x7fc00000))" in text
    assert "//   T2 = sub(2, T0)" in text


@pytest.mark.parametrize("value,compute,text", [
    (0.5, "float", "0.5f"), (-2.0, "float", "(-2.0f)"), (1e-05, "double", "1e-05"), (-0.0, "double", "(-0.0)"),
    (float("-inf"), "double", "(-__longlong_as_double(0x7ff0000000000000LL))"),
    (7, "int", "7"), (-7, "long long", "(-7LL)"), (-2 ** 31, "int", "(-2147483647 - 1)"),
    (-2 ** 63, "long long", "(-9223372036854775807LL - 1)"), (2 ** 40, "long long", "1099511627776LL"),
])
def test_scalar_literals(value, compute, text):
    assert scalar_literal(value, compute) == text


def test_a_float32_literal_reads_back_as_the_same_float32():
    for given in (0.1, 1 / 3, 3.4e38, 1e-45, 123456.789):
        value = struct.unpack("f", struct.pack("f", given))[0]
        literal = scalar_literal(value, "float")
        assert struct.unpack("f", struct.pack("f", float(literal.rstrip("f"))))[0] == value


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_number_operands_compile(dtype):
    text = tp.compile(scalar_ops(dtype)).cuda_source
    assert "T0[" in text


def test_kernels_differing_in_a_number_are_not_one_cached_kernel():
    def scaled(by):
        with tp.Fusion("scaled") as fusion:
            a = tp.make_tensor(["N"])
            fusion.add_input(a)
            out = tp.mul(a, by)
            fusion.add_output(out)
        out.split(0, 128)
        out.axis(0).parallelize(P.BIDx)
        out.axis(1).parallelize(P.TIDx)
        return fusion

    two, three = tp.compile(scaled(2.0)), tp.compile(scaled(3.0))
    assert "* 2.0f" in two.cuda_source and "* 3.0f" in three.cuda_source


# -- the reference -----------------------------------------------------------------------------


def run_reference(source, dest, values):
    with tp.Fusion("one_cast") as fusion:
        a = tp.make_tensor([len(values)], dtype=source)
        fusion.add_input(a)
        fusion.add_output(tp.cast(a, dest))
    return reference(fusion, [np.array(values, dtype=np.float64)])[0]


def test_reference_float_to_integer_truncates_saturates_and_zeroes_nan():
    values = [2.7, -2.7, 127.9, 128.5, -129.9, 1e10, -1e10, float("inf"), float("-inf"), float("nan"), -0.5]
    np.testing.assert_array_equal(run_reference("float32", "int8", values),
                                  [2, -2, 127, 127, -128, 127, -128, 127, -128, 0, 0])
    np.testing.assert_array_equal(run_reference("float64", "int32", values),
                                  [2, -2, 127, 128, -129, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, 0, 0])
    assert run_reference("float64", "int64", [1e30, -1e30]).tolist() == [2.0 ** 63, -2.0 ** 63]


def test_reference_integers_wrap():
    np.testing.assert_array_equal(run_reference("int32", "int8", [127, 128, 255, 256, -129, -200]),
                                  [127, -128, -1, 0, 127, 56])
    np.testing.assert_array_equal(run_reference("int64", "int32", [2 ** 31, 2 ** 32 + 5, -2 ** 31 - 1]),
                                  [-2 ** 31, 5, 2 ** 31 - 1])
    assert round_to(np.array([200.0, -300.0]), DTYPES["int8"]).tolist() == [-56.0, -44.0]


def test_reference_rounds_to_nearest_even_once():
    # float16: 2049 and 2051 are ties between neighbours 2 apart; 65520 rounds to inf
    np.testing.assert_array_equal(run_reference("float32", "float16", [2049, 2051, 65519, 65520]),
                                  [2048, 2052, 65504, np.inf])
    # int32 2^24 + 2^16 + 1 to bfloat16: through float32 it would round to 2^24 (a tie, to even);
    # once, it is above the tie and rounds up to 2^24 + 2^17
    assert run_reference("int32", "bfloat16", [2 ** 24 + 2 ** 16 + 1]).tolist() == [2.0 ** 24 + 2.0 ** 17]
    # float64 just above a bfloat16 tie
    tie = 1.0 + 2.0 ** -8
    assert run_reference("float64", "bfloat16", [tie, tie + 2.0 ** -40]).tolist() == [1.0, 1.0 + 2.0 ** -7]
    assert np.isnan(run_reference("float32", "bfloat16", [float("nan")])).all()


def test_reference_uses_the_number_in_the_compute_type_and_its_place():
    with tp.Fusion("numbers") as fusion:
        a = tp.make_tensor([3], dtype=tp.float32)
        fusion.add_input(a)
        fusion.add_output(tp.sub(1.0, a))
        fusion.add_output(tp.mul(a, 0.1))
        fusion.add_output(tp.cast(tp.sub(tp.cast(a, tp.int32), 5), tp.int8))
    x = np.array([0.25, 2.0, -300.0])
    left, scaled, shifted = reference(fusion, [x])
    np.testing.assert_array_equal(left, 1.0 - x)
    np.testing.assert_array_equal(scaled, (x.astype(np.float32) * np.float32(0.1)).astype(np.float64))
    np.testing.assert_array_equal(shifted, [-5, -3, -49])  # int32 -305 keeps its low 8 bits: -49


def test_cast_chain_reference():
    fusion = cast_chain("bfloat16")
    a = np.array([1.5, -2.25, 100.0])
    b = np.array([0.5, 0.125, -3.0])
    rounded, whole = reference(fusion, [a, b])
    np.testing.assert_array_equal(rounded, [3.5, -4.375, 197.0])
    np.testing.assert_array_equal(whole, [3, -4, 197])
