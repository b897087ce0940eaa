"""Reductions on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device).

Every bundled reduction example and the schedules of tests/support/reduction_schedules.py run on
random inputs into outputs poisoned with NaN and are compared with PyTorch (torch.sum, torch.amax)
and with the float64 reference: sums of floats within a tolerance that scales with the number
of terms (the kernel adds in float32 in another order), maxima and integer sums exactly. The
sizes cover indivisible splits (holes must not contribute: max over negative values, sums with
a tail), block combines over TIDx{96} / TIDx{48} / TIDy, partial warps and a 0-dimensional
total; a reduction read back by a pointwise consumer (x - rowmax) checks that every thread of
a row holds the total.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import numpy as np  # noqa: E402

import tileproof as tp  # noqa: E402
from tileproof.codegen.runtime.reference import reference  # noqa: E402
from tileproof.schedule_files import discover  # noqa: E402

from support import reduction_schedules as rs  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = discover([str(ROOT / "examples" / "valid" / "reductions.py")])
TORCH = {name: getattr(torch, name) for name in rs.DTYPE_NAMES}


def values(shape, dtype: str, seed: int = 0, negative: bool = False) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype in ("int8", "int32", "int64"):
        lo, hi = (-100, 0) if negative else (-100, 100)
        return torch.randint(lo, hi, tuple(shape), generator=gen, dtype=torch.int64).to(TORCH[dtype]).cuda()
    x = torch.randn(tuple(shape), generator=gen, dtype=torch.float64)
    if negative:
        x = -x.abs() - 1.0  # holes read as 0 would win a max
    return x.to(TORCH[dtype]).cuda()


def poisoned(shape, dtype: str) -> torch.Tensor:
    if dtype in ("int8", "int32", "int64"):
        return torch.full(tuple(shape), 77, dtype=TORCH[dtype], device="cuda")
    return torch.full(tuple(shape), float("nan"), dtype=TORCH[dtype], device="cuda")


def expected(op: str, x: torch.Tensor, dims) -> torch.Tensor:
    """PyTorch's answer in float64 (int64 for integers: exact), and the tolerance a float sum needs."""
    wide = x.double() if x.dtype.is_floating_point else x.long()
    dims = tuple(dims)
    return wide.sum(dim=dims) if op == "sum" else wide.amax(dim=dims)


def check(op: str, x: torch.Tensor, dims, got: torch.Tensor, dtype: str) -> None:
    torch.cuda.synchronize()
    want = expected(op, x, dims)
    terms = int(np.prod([x.shape[d] for d in dims]))
    if dtype in ("int8", "int32", "int64"):
        if dtype != "int64":  # the sums here fit int64: narrower ones wrap as the stored integer does
            info = torch.iinfo(TORCH[dtype])
            span = info.max - info.min + 1
            want = ((want - info.min) % span) + info.min
        assert torch.equal(got.long(), want), (got, want)
        return
    if op == "max":
        assert torch.equal(got.double(), want.to(TORCH[dtype]).double()), (got, want)
        return
    unit = {"float32": 2.0 ** -23, "float64": 2.0 ** -52, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[dtype]
    scale = float(x.double().abs().sum(dim=tuple(dims)).max()) if x.numel() else 1.0
    accumulate = (2.0 ** -23 if dtype != "float64" else 2.0 ** -52) * terms * scale  # float32 adds
    torch.testing.assert_close(got.double(), want, rtol=2 * unit, atol=accumulate + 2 * unit * scale)


# each bundled example's reduction, as PyTorch computes it: (op, reduced input dims)
TORCH_OF = {"row_sum_symbolic": ("sum", (1,)), "row_sum_ninety_six_threads": ("sum", (1,)),
            "column_sum_symbolic": ("sum", (0,)), "column_sum_across_tidy": ("sum", (0,)),
            "row_max_forty_eight_threads": ("max", (1,)), "row_sum_rfactor": ("sum", (1,)),
            "column_sum_rfactor_vectorized": ("sum", (0,)), "bfloat16_row_sum_in_float32": ("sum", (1,)),
            "int8_column_max": ("max", (0,)), "sum_of_both_axes": ("sum", (0, 1)),
            "row_sum_across_blocks": ("sum", (1,)), "row_sum_across_blocks_then_scaled": ("sum", (1,))}
SIZES = {"M": 296, "N": 4096}  # M % 8 == 0 and N % 1024 == 0, as the rfactor examples assume


def shape_of(tv, env) -> list[int]:
    from tileproof.model.expr import evaluate
    from tileproof.model.reduction import element_axes

    return [evaluate(tv.logical[k].extent_expr, env) for k in element_axes(tv)]


# examples whose output is a pointwise consumer of a row sum every thread of the row reads back
ROW_SUM_CONSUMERS = {
    "row_sum_then_subtract": lambda x: x - x.sum(dim=1, keepdim=True),
    "rows_divided_by_their_sums_across_blocks": lambda x: x / x.sum(dim=1, keepdim=True),
}


def test_every_bundled_example_is_checked():
    assert {c.name for c in EXAMPLES} == set(TORCH_OF) | set(ROW_SUM_CONSUMERS)


@pytest.mark.parametrize("case", EXAMPLES, ids=lambda c: c.name)
def test_reduction_example_matches_torch_and_the_reference(case):
    fusion = case.build()
    kernel = tp.compile(fusion, "sm_90a")
    env = {k: v for k, v in SIZES.items() if k in fusion.symbols}
    t0, out_tv = fusion.inputs[0], fusion.outputs[0]
    op, dims = TORCH_OF.get(case.name, ("sum", (1,)))
    # all-negative values: holes read as 0 would win a max, and a row sum divided by stays far from 0
    x = values(shape_of(t0, env), t0.dtype.name, negative=op == "max" or case.name in ROW_SUM_CONSUMERS)
    out = poisoned(shape_of(out_tv, env), out_tv.dtype.name)
    (got,) = kernel.run(x, out=[out], **env)
    assert got is out
    if case.name in ROW_SUM_CONSUMERS:
        torch.cuda.synchronize()
        want = ROW_SUM_CONSUMERS[case.name](x.double())
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-4)
    elif case.name == "row_sum_across_blocks_then_scaled":  # the grid total read in the last block
        check(op, x, dims, got / 2, out_tv.dtype.name)
    else:
        check(op, x, dims, got, out_tv.dtype.name)
    host = x.float().cpu().numpy() if x.dtype == torch.bfloat16 else x.cpu().numpy()
    (ref,) = reference(fusion, [host])
    want = torch.from_numpy(np.asarray(ref)).to(got.device).double()
    tol = 0.0 if not got.dtype.is_floating_point else 1e-6 * float(want.abs().max() + 1) * max(x.shape)
    torch.testing.assert_close(got.double(), want, rtol=1e-2 if out_tv.dtype.name == "bfloat16" else 1e-5,
                               atol=tol)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("dtype", rs.DTYPE_NAMES)
def test_row_reduction_every_dtype(op, dtype):
    kernel = tp.compile(rs.row_reduction(op, dtype, threads=96, unroll=2), "sm_90a")
    for m, n in [(37, 1000), (5, 1), (3, 4097), (1, 96 * 2 * 3)]:
        x = values((m, n), dtype, seed=m * n, negative=op == "max")
        (got,) = kernel.run(x, out=[poisoned((m,), dtype)])
        check(op, x, (1,), got, dtype)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "float64"])
@pytest.mark.parametrize("tidx, tidy", [(32, 8), (48, 6), (16, 64)])
def test_column_reduction_over_tidy(op, dtype, tidx, tidy):
    kernel = tp.compile(rs.column_reduction(op, dtype, tidx=tidx, tidy=tidy), "sm_90a")
    for m, n in [(1000, 96), (7, 100), (4096, 48)]:
        x = values((m, n), dtype, seed=m + n, negative=op == "max")
        (got,) = kernel.run(x, out=[poisoned((n,), dtype)])
        check(op, x, (0,), got, dtype)


@pytest.mark.parametrize("dtype, vector", [("float32", 4), ("bfloat16", 8), ("float16", 8), ("float64", 2)])
def test_rfactor_with_vector_loads(dtype, vector):
    kernel = tp.compile(rs.row_reduction_rfactor("sum", dtype, vector=vector, threads=128, unroll=2), "sm_90a")
    n = vector * 128 * 2 * 3
    x = values((129, n), dtype, seed=5)
    (got,) = kernel.run(x, out=[poisoned((129,), dtype)])
    check("sum", x, (1,), got, dtype)


@pytest.mark.parametrize("op, dtype", [("sum", "float32"), ("max", "float32"), ("sum", "int64"), ("max", "int8")])
def test_total_of_every_element_is_a_0_dimensional_output(op, dtype):
    kernel = tp.compile(rs.total(op, dtype), "sm_90a")
    x = values((48, 50), dtype, seed=9, negative=op == "max")
    (got,) = kernel.run(x)
    assert got.shape == ()
    check(op, x, (0, 1), got, dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_thread_of_a_row_holds_the_rows_maximum(dtype):
    kernel = tp.compile(rs.subtract_row_max(dtype), "sm_90a")
    x = values((77, 1000), dtype, seed=3)
    (got,) = kernel.run(x, out=[poisoned((77, 1000), dtype)])
    torch.cuda.synchronize()
    want = (x.float() - x.float().amax(dim=1, keepdim=True)).to(TORCH[dtype])
    assert torch.equal(got, want)


def test_partials_through_shared_memory():
    kernel = tp.compile(rs.shared_partials(), "sm_90a")
    x = values((33, 1000), "float32", seed=4)
    (got,) = kernel.run(x, out=[poisoned((33,), "float32")])
    check("sum", x, (1,), got, "float32")


def test_the_output_shape_drops_the_reduced_axis():
    kernel = tp.compile(rs.row_reduction(), "sm_90a")
    x = values((10, 300), "float32")
    (got,) = kernel.run(x)
    assert got.shape == (10,) and isinstance(got, torch.Tensor)
    with pytest.raises(tp.InputError, match="expected 1 dimensions"):
        kernel.run(x, out=[torch.empty((10, 1), device="cuda")])


def _benchmark_schedules():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_reduction_schedules",
                                                  ROOT / "benchmarks" / "reduction_schedules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark_schedules()


@pytest.fixture(scope="module")
def big():
    n = BENCH.SIZE
    return torch.randn(n, n, device="cuda", dtype=torch.float32, generator=torch.Generator("cuda").manual_seed(0))


@pytest.mark.parametrize("kind, cfg", [("row", c) for c in BENCH.ROW_CONFIGS] + [("column", c) for c in BENCH.COLUMN_CONFIGS],
                         ids=lambda v: str(v))
def test_benchmark_schedules_sum_a_16384_square_tensor(big, kind, cfg):
    """benchmarks/reductions.py's schedules at the benchmark's size, checked as it checks them."""
    build, dim = (BENCH.row_sum, 1) if kind == "row" else (BENCH.column_sum, 0)
    kernel = tp.compile(build(**cfg), "sm_90a")
    (got,) = kernel.run(big, out=[poisoned((BENCH.SIZE,), "float32")])
    check("sum", big, (dim,), got, "float32")
