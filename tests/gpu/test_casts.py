"""Casts and number operands on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device).

Every cast between the seven dtypes must match the float64 reference of
codegen/runtime/reference.py bit for bit, on values chosen to hit the edges: ties of round to
nearest even (the int32 2^24 + 2^16 + 1 rounds to bfloat16 differently through float, a double
rounding the kernel must not do; so does the float64 1 + 2^-8 + 2^-40), overflow to inf,
float -> integer truncation, saturation and NaN, integer wrap-around. PyTorch's own casts agree where C++ defines them.
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

from support import codegen_schedules as cs  # noqa: E402

from gpu.test_kernels import check_reference  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
TORCH = {name: getattr(torch, name) for name in cs.DTYPE_NAMES}
FLOAT_EDGES = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, 0.1, 127.9, 128.0, 128.5, -128.9,
               -129.0, 255.5, 256.0, 1000.7, -1000.7, 2049.0, 2051.0, 65504.0, 65519.0, 65520.0, 70000.0,
               1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -9, 1.0 + 2.0 ** -8 + 2.0 ** -40, -(1.0 + 2.0 ** -8 + 2.0 ** -40),
               16777217.0, 2.0 ** 31, -2.0 ** 31 - 1000.0, 3.0e9, -3.0e9,
               1.0e19, -1.0e19, 1.0e30, 3.0e38, -3.0e38, 1.0e-40, 1.0e-8, float("inf"), float("-inf"),
               float("nan")]
INT_EDGES = [0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 1000, -1000, 65504, 65520, 70000, 2 ** 24 + 1,
             2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1), 2 ** 31 - 1, -2 ** 31, 2 ** 40 + 3, -2 ** 45,
             2 ** 53 - 1]
RANGES = {"int8": (-128, 127), "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 53, 2 ** 53)}


def edge_values(dtype: str, n: int = 4096) -> torch.Tensor:
    """The edges a cast from `dtype` can meet, then random values of every magnitude."""
    gen = torch.Generator().manual_seed(12)
    if dtype in RANGES:
        lo, hi = RANGES[dtype]
        edges = [v for v in INT_EDGES if lo <= v <= hi]
        rest = torch.randint(lo, hi, (n - len(edges),), generator=gen, dtype=torch.int64)
        return torch.cat([torch.tensor(edges, dtype=torch.int64), rest]).to(TORCH[dtype]).cuda()
    scale = 10.0 ** torch.randint(-6, 12, (n - len(FLOAT_EDGES),), generator=gen).double()
    rest = torch.randn(n - len(FLOAT_EDGES), generator=gen, dtype=torch.float64) * scale
    return torch.cat([torch.tensor(FLOAT_EDGES, dtype=torch.float64), rest]).to(TORCH[dtype]).cuda()


def host(x: torch.Tensor) -> np.ndarray:
    return x.double().cpu().numpy()


@pytest.mark.parametrize("source", cs.DTYPE_NAMES)
def test_every_cast_matches_the_reference_bit_for_bit(source):
    fusion = cs.every_cast(source)
    kernel = tp.compile(fusion)
    x = edge_values(source)
    outs = kernel.run(x)
    torch.cuda.synchronize()
    for t, got, want in zip(fusion.outputs, outs, reference(fusion, [host(x)])):
        assert got.dtype == TORCH[t.dtype.name], t.dtype  # run() allocates each output in its dtype
        got = host(got)
        bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
        where = np.flatnonzero(bad)[:5]
        assert not bad.any(), (f"{source} -> {t.dtype}: {int(bad.sum())} differ, e.g. input "
                               f"{host(x)[where]} gave {got[where]}, want {want[where]}")


@pytest.mark.parametrize("source,dest", [("float32", "bfloat16"), ("float32", "float16"), ("bfloat16", "float32"),
                                         ("float64", "float32"), ("int32", "float32"), ("float32", "int32"),
                                         ("int64", "int32"), ("int32", "int8")])
def test_casts_agree_with_pytorch_where_cpp_defines_them(source, dest):
    """Finite values in the destination's range (float -> integer out of range is undefined in C++)."""
    fusion = cs.every_cast(source)
    kernel = tp.compile(fusion)
    x = edge_values(source)
    if not x.dtype.is_floating_point:
        pass
    elif dest.startswith("int"):
        x = x[x.isfinite() & (x.abs() < 2.0 ** 31 - 128)]
    else:
        x = x[~x.isnan()]  # NaN != NaN
    outs = dict(zip([t.dtype.name for t in fusion.outputs], kernel.run(x)))
    torch.cuda.synchronize()
    assert torch.equal(outs[dest], x.to(TORCH[dest]))


@pytest.mark.parametrize("vector,source,dest", [(4, "float32", "bfloat16"), (4, "bfloat16", "float32"),
                                                (8, "bfloat16", "float16")])
def test_vectorized_cast(vector, source, dest):
    fusion = cs.vectorized_cast(source, dest, vector)
    kernel = tp.compile(fusion)
    x = torch.randn(37, 64, device="cuda").to(TORCH[source])
    out = torch.full((37, 64), float("nan"), device="cuda", dtype=TORCH[dest])
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x.to(TORCH[dest]))


@pytest.mark.parametrize("dtype", cs.DTYPE_NAMES)
def test_number_operands(dtype):
    fusion = cs.scalar_ops(dtype)
    kernel = tp.compile(fusion)
    if dtype in RANGES:
        a = torch.randint(-100, 100, (3000,), device="cuda", dtype=TORCH[dtype])
    else:
        a = (torch.randn(3000, device="cuda") * 4).to(TORCH[dtype])
    (out,) = kernel.run(a)
    check_reference(fusion, [a], [out])


def test_number_operand_order_and_non_finite_numbers():
    with tp.Fusion("number_edges") as fusion:
        a = tp.make_tensor(["N"])
        fusion.add_input(a)
        outs = [tp.sub(1.0, a), tp.sub(a, 1.0), tp.div(1, a), tp.mul(a, float("inf")), tp.add(a, float("nan")),
                tp.mul(a, -0.0)]
        for t in outs:
            fusion.add_output(t)
            t.split(0, 128)
            t.axis(0).parallelize(tp.ParallelType.BIDx)
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    kernel = tp.compile(fusion)
    a = torch.tensor([3.0, -2.0, 0.0, 0.5], device="cuda")
    got = kernel.run(a)
    torch.cuda.synchronize()
    for g, w in zip(got, [1.0 - a, a - 1.0, 1.0 / a, a * float("inf"), a + float("nan"), a * -0.0]):
        assert torch.equal(g.isnan(), w.isnan()) and torch.equal(g.nan_to_num(), w.nan_to_num())
        numbers = ~w.isnan()
        assert torch.equal(g[numbers].signbit(), w[numbers].signbit())


def test_cast_chain_inlined_with_numbers():
    fusion = cs.cast_chain("bfloat16")
    kernel = tp.compile(fusion)
    a = torch.randn(5000, device="cuda").bfloat16() * 100
    b = torch.randn(5000, device="cuda").bfloat16() * 100
    rounded, whole = kernel.run(a, b)
    torch.cuda.synchronize()
    want = a.float() * 2 + b.float()
    assert rounded.dtype == torch.bfloat16 and whole.dtype == torch.int32
    assert torch.equal(rounded, want.bfloat16())
    assert torch.equal(whole, want.to(torch.int32))
    check_reference(fusion, [a, b], [rounded, whole])


@pytest.mark.parametrize("case", discover([str(ROOT / "examples" / "valid" / "casts.py")]), ids=lambda c: c.name)
def test_cast_examples_match_the_reference(case):
    fusion = case.build()
    kernel = tp.compile(fusion)
    sizes = {"M": 33, "N": 256}
    inputs = []
    for t in fusion.inputs:
        shape = [sizes[str(i.extent)] if i.static_extent is None else i.static_extent for i in t.logical]
        if t.dtype.is_integer:
            inputs.append(torch.randint(-128, 128, shape, device="cuda", dtype=TORCH[t.dtype.name]))
        else:
            inputs.append((torch.randn(*shape, device="cuda") * 8).to(TORCH[t.dtype.name]))
    outs = kernel.run(*inputs)
    for t, o in zip(fusion.outputs, outs):
        assert o.dtype == TORCH[t.dtype.name]
    check_reference(fusion, inputs, outs)
