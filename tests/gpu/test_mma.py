"""Tensor-core matmuls on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device).

Every bundled MmaOp example (examples/valid/mma.py) runs on random inputs into an output
poisoned with NaN and is compared with a float64 reference: within the tf32 bound for float32
operands (each operand rounded to 10 mantissa bits, cvt.rna: a relative error of at most
2^-11 per operand, so |error| <= 2^-10 sum_k |a||b| plus the float32 additions), within the
float32 additions for bfloat16 / float16 operands (their products are exact in float32). A
schedule that declares tf32 truncation (tp.Tf32Rounding.Truncate) has twice the tf32 bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.schedule_files import discover  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = discover([str(ROOT / "examples" / "valid" / "mma.py")])
SYMBOLIC = {"M": 384, "N": 256, "K": 192}
TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def operand(tv, shape, seed):
    """Random values in tv's memory layout (its allocation order), broadcast axes of extent 1."""
    gen = torch.Generator().manual_seed(seed)
    order = [tv.logical.index(i) if i in tv.logical else k for k, i in enumerate(tv.allocation or tv.logical)]
    dense = torch.randn([shape[k] for k in order], generator=gen, dtype=torch.float64)
    x = dense.to(TORCH[tv.dtype.name]).cuda()
    return x.permute([order.index(k) for k in range(len(shape))])


def truncates(fusion) -> bool:
    return any(op.tf32_rounding is tp.Tf32Rounding.Truncate for op in fusion.exprs)


def check(a, b, got, truncated=False):
    """got (M x N) against A (M x 1 x K) B (1 x N x K) in float64, within the operand dtype's bound."""
    torch.cuda.synchronize()
    a64, b64 = a.double()[:, 0, :], b.double()[0]
    want = a64 @ b64.T
    magnitude = a64.abs() @ b64.abs().T
    unit = 0.0
    if a.dtype == torch.float32:  # tf32 rounding of both operands: 2^-11 each, 2^-10 truncated
        unit = 2.0 ** -9 if truncated else 2.0 ** -10
    k = a.shape[-1]
    bound = unit * magnitude + k * 2.0 ** -23 * magnitude + 1e-6
    if got.dtype == torch.bfloat16:  # a cast epilogue: one rounding to bfloat16
        bound = bound + 2.0 ** -8 * want.abs()
    err = (got.double() - want).abs()
    assert not torch.isnan(got).any(), "NaN left in the output: an element was not stored"
    assert bool((err <= bound).all()), f"max error {float(err.max())}, at bound {float(bound.flatten()[err.argmax()])}"


def run(fusion, env, seed=0):
    kernel = tp.compile(fusion, "sm_90a")
    a_tv, b_tv = fusion.inputs
    from tileproof.model.expr import evaluate

    shapes = [[evaluate(i.extent_expr, env) for i in t.logical] for t in (a_tv, b_tv)]
    a, b = operand(a_tv, shapes[0], seed), operand(b_tv, shapes[1], seed + 1)
    out = torch.full((shapes[0][0], shapes[1][1]), float("nan"), dtype=TORCH[fusion.outputs[0].dtype.name],
                     device="cuda")
    (got,) = kernel.run(a, b, out=[out], **{k: v for k, v in env.items() if k in fusion.symbols})
    check(a, b, got, truncates(fusion))
    return a, b, got


@pytest.mark.parametrize("case", EXAMPLES, ids=lambda c: c.name)
def test_mma_example_matches_float64(case):
    fusion = case.build()
    run(fusion, SYMBOLIC)


@pytest.mark.parametrize("case", [c for c in EXAMPLES if c.name.startswith("tuned_matmul_k_tail")],
                         ids=lambda c: c.name)
@pytest.mark.parametrize("k", [200, 72, 8])
def test_a_k_tail_runs_on_zeros(case, k):
    """K not a multiple of the 128-byte K tile: the last tile's cp.async copies write zeros past K
    and ldmatrix and mma.sync run on them; the output poisoned with NaN first."""
    run(case.build(), {**SYMBOLIC, "K": k})


@pytest.mark.parametrize("case", [c for c in EXAMPLES if c.name.startswith("tuned_matmul_grouped_double_buffered")],
                         ids=lambda c: c.name)
@pytest.mark.parametrize("m", [1152, 128])
def test_grouped_blocks_cover_every_tile(case, m):
    """Groups of 8 M tiles (blockIdx.z the group): 9 tiles are a whole group and one tile of the
    next, 1 tile leaves 7 blocks of its group past M; fragments double-buffered in registers."""
    run(case.build(), {**SYMBOLIC, "M": m})


@pytest.mark.parametrize("case", [c for c in EXAMPLES if c.name.startswith("tuned_matmul_stmatrix_epilogue")],
                         ids=lambda c: c.name)
@pytest.mark.parametrize("m", [1152, 128])
def test_the_stmatrix_epilogue_stores_every_tile(case, m):
    """bfloat16 output through stmatrix and TMA stores, M past the last group's tiles."""
    run(case.build(), {**SYMBOLIC, "M": m})


def as_tf32(x, truncated):
    """float32 x as the tensor cores take it: cvt.rna.tf32.f32 (finite values: half an ulp added to
    the magnitude bits, then the low 13 cleared), or its bits truncated."""
    bits = x.contiguous().view(torch.int32)
    if not truncated:
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize("case", [c for c in EXAMPLES if c.name in (
    "tuned_matmul_tf32_truncated", "tuned_matmul_grouped_double_buffered[dtype=float32]")], ids=lambda c: c.name)
def test_tf32_operands_are_rounded_as_declared(case):
    """The product equals float64's of the operands rounded as the schedule declares, up to the
    float32 additions: cvt.rna by default, the upper 19 bits where truncation is declared."""
    fusion = case.build()
    a, b, got = run(fusion, SYMBOLIC)
    truncated = truncates(fusion)
    a64, b64 = as_tf32(a, truncated).double()[:, 0, :], as_tf32(b, truncated).double()[0]
    err = (got.double() - a64 @ b64.T).abs()
    bound = a.shape[-1] * 2.0 ** -23 * (a64.abs() @ b64.abs().T) + 1e-6
    assert bool((err <= bound).all()), f"max error {float(err.max())} past the float32 additions' bound"


def test_every_lane_and_register_of_the_seed_tile():
    """The seed's 16 x 8 x 8 tile on A = iota, B = one-hot columns: each output column is one
    column of A, so a misplaced fragment element shows as a wrong number, not a small error."""
    from support.examples import example_module

    examples = example_module("valid", "mma")
    kernel = tp.compile(examples.moye_tile(16, 8, 8), "sm_90a")
    a = torch.arange(16 * 8, dtype=torch.float32, device="cuda").reshape(8, 16).t().reshape(16, 1, 8)
    b = torch.zeros(1, 8, 8, dtype=torch.float32, device="cuda")
    for n in range(8):
        b[0, n, (3 * n + 1) % 8] = 1.0
    (got,) = kernel.run(a, b)
    torch.cuda.synchronize()
    want = a[:, 0, :] @ b[0].T  # small integers: exact in tf32
    assert torch.equal(got, want), (got, want)
