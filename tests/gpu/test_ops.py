"""Every op of the public op set on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device), at three sizes each, against PyTorch and the float64 reference
(codegen/runtime/reference.py): the unary ops and gelu / tanh_gelu in float32, bfloat16 and
float64; the binary ops and comparisons (bool outputs, exact); where with promotion and a number;
logical ops; extents as values; tp.min, tp.mean and tp.var_mean (one Welford) over rows (a block per row);
tp.iota against torch.arange, and a mask compared from it.
The schedules are tests/support/op_schedules.py's, which tests/codegen/test_codegen_ops.py
compiles and simulates on the CPU.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tileproof as tp  # noqa: E402
from tileproof.codegen.runtime.reference import reference, reduction_slack, tolerance  # noqa: E402

from support import op_schedules as S  # noqa: E402

pytestmark = pytest.mark.gpu
SIZES = (1, 1000, (1 << 20) + 3)
ROWS = ((1, 1), (7, 1000), (300, 4099))
TORCH_UNARY = {
    "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log2": torch.log2,
    "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "tanh": torch.tanh, "erf": torch.erf, "erfc": torch.erfc, "sigmoid": torch.sigmoid, "silu": F.silu,
    "sin": torch.sin, "cos": torch.cos, "floor": torch.floor, "ceil": torch.ceil, "relu": torch.relu,
    "neg": torch.neg, "abs": torch.abs, "gelu": F.gelu, "tanh_gelu": lambda x: F.gelu(x, approximate="tanh"),
}
TORCH_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "pow": torch.pow, "fmod": torch.fmod, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
    "le": torch.le, "gt": torch.gt, "ge": torch.ge,
}


def random(shape, dtype: str, seed: int, positive: bool = False) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype in ("int8", "int32", "int64"):
        x = torch.randint(-50, 50, tuple(shape), generator=gen, dtype=torch.int64)
        return x.to(getattr(torch, dtype)).cuda()
    x = torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * 2
    if positive:
        x = x.abs() + 0.25
    return x.to(getattr(torch, dtype)).cuda()


def check(fusion, inputs, torch_outputs, *, rounded=None, **sizes) -> None:
    """Run the fusion's kernel on `inputs`; every output equals the reference and PyTorch's
    (computed in float64 and rounded to the output dtype; None: the reference only) within the
    dtype's tolerance, NaN where they have NaN. `rounded`: per output, the magnitude of an
    intermediate the output cancels from (a * n - m), whose rounding (and nvcc's contraction of it
    into an fma) the output's tolerance then allows elementwise."""
    kernel = tp.compile(fusion, "sm_90a")
    outs = kernel.run(*inputs, **sizes)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    arrays = [x.double().cpu().numpy() if x.dtype != torch.bool else x.cpu().numpy() for x in inputs]
    refs, slack = reference(fusion, arrays), reduction_slack(fusion, arrays)
    for k, (t, got, want, ref, extra) in enumerate(zip(fusion.outputs, outs, torch_outputs, refs, slack)):
        rtol, atol = tolerance(t.dtype)
        if rounded is not None and rounded[k] is not None:  # np.testing takes a scalar atol only
            allowed = atol + np.max(extra, initial=0.0) + 2 * rtol * np.abs(rounded[k])
            for what, value in (("the reference", ref), ("PyTorch", want)):
                if value is None:
                    continue
                value = value if isinstance(value, np.ndarray) else value.double().cpu().numpy()
                off = ~np.isclose(got.double().cpu().numpy(), value, rtol=rtol, atol=allowed, equal_nan=True)
                assert not off.any(), f"{t.name}: {int(off.sum())} elements off {what}, first at " \
                                      f"{np.argwhere(off)[0].tolist()}"
            continue
        got64 = got.double().cpu().numpy()
        want64 = None if want is None else want.to(got.dtype).double().cpu().numpy()
        np.testing.assert_allclose(got64, ref, rtol=rtol, atol=atol + np.max(extra, initial=0.0), equal_nan=True)
        if want is None:
            continue
        np.testing.assert_allclose(got64, want64, rtol=2 * rtol, atol=2 * atol + np.max(extra, initial=0.0),
                                   equal_nan=True)


POSITIVE = ("log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("name", [*S.FLOAT_UNARY, *S.COMPOSITES])
def test_unary_ops_match_torch(name, dtype, n):
    x = random([n], dtype, seed=n, positive=name in POSITIVE)
    # a composite's intermediates are bfloat16 tensors, each rounded (1 + tanh near -1 cancels):
    # the reference rounds them too, PyTorch's fused gelu does not
    want = None if name in S.COMPOSITES and dtype == "bfloat16" else TORCH_UNARY[name](x.double())
    check(S.unary(name, dtype), [x], [want])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("name", [*S.FLOAT_BINARY, *S.COMPARISONS])
def test_binary_ops_and_comparisons_match_torch(name, dtype, n):
    a = random([n], dtype, seed=1, positive=name == "pow")
    b = random([n], dtype, seed=2)
    if name in ("eq", "ne", "le", "ge"):
        b[::3] = a[::3]  # equal elements too
    check(S.binary(name, dtype), [a, b], [TORCH_BINARY[name](a.double(), b.double())])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
@pytest.mark.parametrize("name", [*S.INTEGER_BINARY, "lt", "eq"])
def test_integer_ops_match_torch(name, dtype, n):
    a, b = random([n], dtype, seed=3), random([n], dtype, seed=4)
    if name == "fmod":
        b = torch.where(b == 0, torch.ones_like(b), b)
    want = TORCH_BINARY[name](a.long(), b.long())
    check(S.binary(name, dtype), [a, b], [want])


@pytest.mark.parametrize("n", SIZES)
def test_number_and_extent_operands(n):
    a = random([n], "float32", seed=5)
    check(S.binary("sub", value=2.5, value_first=True), [a], [2.5 - a.double()])
    check(S.binary("div", value="N"), [a], [a.double() / n])
    check(S.binary("gt", "bfloat16", value=0.5), [a.bfloat16()], [a.bfloat16().double() > 0.5])


@pytest.mark.parametrize("n", SIZES)
def test_where_promotes_and_takes_a_number(n):
    c, a, b = random([n], "float32", seed=6), random([n], "bfloat16", seed=7), random([n], "float32", seed=8)
    check(S.where("bfloat16", "float32"), [c, a, b], [torch.where(c > 0, a.double(), b.double())])
    i = random([n], "int32", seed=9)
    check(S.where("int32", value=-1), [c, i], [torch.where(c > 0, i.long(), -1)])


@pytest.mark.parametrize("n", SIZES)
def test_logical_ops_store_bool(n):
    a, b = random([n], "bfloat16", seed=10), random([n], "bfloat16", seed=11)
    b[::4] = a[::4]
    mask = ((a > 0) & ~(b < 0)) | (a == b)
    check(S.logical("bfloat16"), [a, b], [mask, mask.to(torch.bfloat16)])


@pytest.mark.parametrize("n", [512, 4096, 1 << 20])
def test_vectorized_bool_operands(n):
    a, c = random([n], "float32", seed=15), random([n], "float32", seed=16) > 0
    check(S.vectorized_mask(4), [a, c], [a > 0, torch.where(c, a.double(), 1.5)])


@pytest.mark.parametrize("m, n", ROWS)
def test_extents_as_values(m, n):
    a = random([m, n], "float32", seed=12)
    check(S.extent_values(), [a], [a.double() * n - m, a.double() / (m * n)],
          rounded=[(a.double() * n).cpu().numpy(), None])


@pytest.mark.parametrize("m, n", ROWS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64", "int32"])
@pytest.mark.parametrize("op", S.ROW_OPS)
def test_row_reductions_match_torch(op, dtype, m, n):
    if op == "mean" and dtype == "int32":
        pytest.skip("mean takes float types")
    x = random([m, n], dtype, seed=13)
    wide = x.double()
    want = {"sum": lambda: wide.sum(1), "max": lambda: wide.amax(1), "min": lambda: wide.amin(1),
            "mean": lambda: x.sum(1, dtype=x.dtype).double() / n}[op]()  # tp.mean stores the sum in x's dtype
    check(S.row(op, dtype), [x], [want])


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("m, length, symbolic", [(1, 2, False), (5, 1000, False), (300, 4099, False), (7, 3001, True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_var_mean_matches_torch(dtype, m, length, symbolic, correction):
    x = random([m, length], dtype, seed=14) + 3.0  # an offset: Welford's one pass does not cancel (E[x^2] - E[x]^2 would)
    var, mean = torch.var_mean(x.double(), dim=1, correction=correction)
    check(S.var_mean(dtype, length="N" if symbolic else length, correction=correction), [x], [var, mean])


def _iota_fusion(dtype: str, start, step):
    """[tp.iota("N", start, step, dtype), where(iota < 11, x, -1)] over x [N] float32, [BIDx, TIDx{128}]."""
    with tp.Fusion(f"iota_{dtype}") as fusion:
        x = tp.make_tensor(["N"], name="x")
        fusion.add_input(x)
        fusion.assume("N <= 33554432")
        i = tp.iota("N", start, step, dtype)
        fusion.add_output(i)
        fusion.add_output(tp.where(tp.lt(i, 11), x, -1.0))
    for tv in fusion.tensors:
        if tv.definition is not None:
            tv.split(0, 128)
            tv.axis(0).parallelize(tp.ParallelType.BIDx)
            tv.axis(1).parallelize(tp.ParallelType.TIDx)
    tp.inline_most(fusion)
    return fusion


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype, start, step", [("int32", 3, 2), ("int64", -7, 5), ("float32", 0.5, 0.25),
                                                ("float64", -1.0, 3.0)])
def test_iota_matches_torch_arange(dtype, start, step, n):
    """tp.iota's element i is start + i step (torch.arange), computed from the element's index; a
    mask made by comparing it selects as torch.where."""
    x = random([n], "float32", seed=15)
    values = torch.arange(n, dtype=torch.float64, device="cuda") * step + start
    check(_iota_fusion(dtype, start, step), [x], [values, torch.where(values < 11, x.double(), -1.0)])
