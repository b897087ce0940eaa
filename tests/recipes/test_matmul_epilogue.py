"""Fused epilogues of the Hopper GEMM recipe without a GPU: out = cast(activation(scale * D + bias +
residual)) verifies in both output paths (float32 from the registers, a 16-bit output through
stmatrix and TMA stores) for each op alone and the ops together, on every configuration
recipes.matmul runs it on (epilogue_configs: each tile shape in each case of the ops together, each
configuration in one of them at least); the verifier rejects the long gelu chain on the
128 x 256 tile (UNROLL-LENGTH), which is why those configurations are left out; the kernel reads
the bias and residual in D's fragment layout (the residual a column pair at a time, one vector)
and computes the activation; split-K's sum kernel
with the ops verifies, compiles (NVRTC) and, simulated (tests/support/reduction_sim.py), computes
the formula against numpy in float64 at sizes no block divides; EpilogueOps refuses bad fields;
the entry refuses bad bias and residual tensors and a configuration that does not fuse the ops,
and its fake implementation gives the output. The GEMM's values are checked on the GPU
(tests/gpu/test_matmul_epilogue.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import binding
from tileproof.codegen.runtime.reference import round_to
from tileproof.model.fingerprint import fingerprint
from tileproof.model.targets import get_target
from tileproof.recipes import Matmul, matmul
from tileproof.recipes.hopper_gemm import hopper_gemm
from tileproof.recipes.matmul import config_fusions, config_params, epilogue_configs, epilogue_of, shape_class_fusion
from tileproof.recipes.matmul_heuristic import BY_NAME, CONFIGS, ONE_KERNEL_SPLIT_K, WIDE, choose
from tileproof.recipes.params import EpilogueOps
from tileproof.recipes.split_k import split_k_sum

from support.reduction_sim import run_kernel

pytestmark = pytest.mark.usefixtures("private_cache")

ALONE = [EpilogueOps(scale=0.5), EpilogueOps(bias="column"), EpilogueOps(bias="row"), EpilogueOps(residual=True),
         EpilogueOps(activation="relu"), EpilogueOps(activation="silu")]
TOGETHER = [EpilogueOps(scale=2.0, bias="column", residual=True, activation=a)
            for a in ("relu", "gelu", "gelu_tanh", "silu")]


def fusion_with(ops, out_dtype, config=WIDE):
    return shape_class_fusion("K", "K", out_dtype, config, ops=ops)


def errors(report):
    return [f"{d.code}: {d.message}" for d in report.errors]


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("ops", ALONE, ids=repr)
def test_each_op_alone_verifies_in_both_paths(ops, out_dtype):
    report = tp.verify(fusion_with(ops, out_dtype), "sm_90a")
    assert report.ok, errors(report)


def each_in_one_dtype(ops_list):
    """(ops, out_dtype) pairs: each ops in one output dtype, the dtypes alternating (both paths are
    covered, and each case costs a verify of every configuration: CI's time)."""
    return [(ops, ("float32", "bfloat16")[k % 2]) for k, ops in enumerate(ops_list)]


# The configurations each case of TOGETHER verifies with the ops: one of each tile shape that
# epilogue_configs(ops) runs them on (the chain's code is per accumulator fragment: the tile shape is
# what changes it; each verify costs CI seconds), picked so that the four cases together take every
# configuration once at least (test_each_tile_shape_and_every_configuration_runs_the_ops_together).
TOGETHER_CONFIGS = {
    "relu": ("128x256_persistent_group_16_cluster_2", "128x128_split_k", "64x256_split_k_grid",
             "64x128_split_k_grid", "64x16_split_k_swapped"),
    "gelu": ("128x256_split_k", "128x128_persistent_group_16_cluster_2", "64x256_split_k",
             "64x128_persistent_group_2_cluster_2", "64x16_split_k_swapped"),
    "gelu_tanh": ("128x256_split_k", "128x128_split_k_grid", "64x256_split_k", "64x128_split_k_grid",
                  "64x16_split_k_swapped"),
    "silu": ("128x256_persistent_group_2_cluster_2", "128x128_persistent_group_16_cluster_2", "64x256_persistent",
             "64x128_split_k_grid", "64x16_split_k_swapped"),
}


def test_each_tile_shape_and_every_configuration_runs_the_ops_together():
    every = []
    for ops in TOGETHER:
        configs = epilogue_configs(ops)
        picked = [BY_NAME[name] for name in TOGETHER_CONFIGS[ops.activation]]
        assert set(picked) <= set(configs), ops
        assert sorted(c.tile for c in picked) == sorted({c.tile for c in configs}), ops  # one of each tile shape
        every += picked
    assert set(every) == set(CONFIGS + ONE_KERNEL_SPLIT_K)


@pytest.mark.parametrize("ops, out_dtype", each_in_one_dtype(TOGETHER), ids=repr)
def test_the_ops_together_verify_on_every_configuration_that_runs_them(ops, out_dtype):
    """Split-K's partials kernel takes no ops (its inputs are A and B alone); its sum fuses them;
    one-kernel split-K runs them after its grid combine. On TOGETHER_CONFIGS' configurations: one
    of each tile shape, and every configuration in some case. Split-K's sum kernel takes no
    configuration: it is split_k_sum(out_dtype, ops) for each tile, the very schedule (one
    fingerprint) that test_split_k_sums_with_the_ops_verify_compile_and_compute_the_formula
    verifies, compiles and simulates for these ops in this dtype."""
    configs = epilogue_configs(ops)
    assert any(c.split_k for c in configs) and any(not c.split_k for c in configs)
    for config in (BY_NAME[name] for name in TOGETHER_CONFIGS[ops.activation]):
        if config.grid_reduce:
            (fusion,) = config_fusions(config, "K", "K", out_dtype, splits=4, ops=ops)
        elif config.swap_ab:  # compiled at a shape only; its sum there is split_k_sum's at that shape
            partials, fusion = config_fusions(config, "K", "K", out_dtype, shape=(16, 264, 1040), splits=2, ops=ops)
            assert len(partials.inputs) == 2 and len(fusion.inputs) == 3
            want = split_k_sum(getattr(tp, out_dtype), (2, 16, 264), ops)
            assert fingerprint(fusion, "sm_90a") == fingerprint(want, "sm_90a")
            report = tp.verify(fusion, "sm_90a")
            assert report.ok, (config.name, errors(report))
            continue
        elif config.split_k:
            partials, fusion = config_fusions(config, "K", "K", out_dtype, ops=ops)
            assert len(partials.inputs) == 2 and len(fusion.inputs) == 3
            assert fingerprint(fusion, "sm_90a") == fingerprint(split_k_sum(getattr(tp, out_dtype), ops=ops), "sm_90a")
            assert (ops, out_dtype) in each_in_one_dtype(SPLIT_K_OPS)
            continue
        else:
            fusion = fusion_with(ops, out_dtype, config)
        report = tp.verify(fusion, "sm_90a")
        assert report.ok, (config.name, errors(report))


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh"])
def test_gelu_on_the_wide_tile_is_rejected_as_too_long_to_unroll(activation):
    """128 accumulators a thread x gelu's chain exceeds the unrolled statements' budget, which
    is why epilogue_configs keeps tiles of at most 128 columns for it."""
    ops = EpilogueOps(bias="column", residual=True, activation=activation)
    report = tp.verify(fusion_with(ops, "bfloat16"), "sm_90a")
    assert report.codes == ["UNROLL-LENGTH"], errors(report)
    assert WIDE not in epilogue_configs(ops) and BY_NAME["128x128_persistent_group_16_cluster_2"] in epilogue_configs(ops)


def test_at_a_shape_no_tile_divides_the_stmatrix_path_verifies():
    """M and N past the last tile: the chain runs at the holes on registers the TMA store clips."""
    ops = EpilogueOps(scale=0.25, bias="row", residual=True, activation="silu")
    params = config_params(WIDE, "K", "K", "bfloat16", shape=(200, 264, 1032), ops=ops)
    report = tp.verify(hopper_gemm(200, 264, 1032, params), "sm_90a")
    assert report.ok, errors(report)


@pytest.mark.parametrize("out_dtype, activation, call", [("float32", "gelu_tanh", "tanhf"), ("bfloat16", "gelu", "erff")])
def test_the_kernel_reads_bias_and_residual_and_computes_the_activation(out_dtype, activation, call):
    ops = EpilogueOps(scale=0.5, bias="column", residual=True, activation=activation)
    fusion = fusion_with(ops, out_dtype, BY_NAME["128x128_persistent_group_16_cluster_2"])
    kernel = tp.compile(fusion, "sm_90a")
    a, b, bias, residual = (g for g in kernel.ir.globals if g.is_input)
    assert (bias.dtype, residual.dtype) == (tp.float32, getattr(tp, out_dtype))
    source = kernel.cuda_source
    assert f"{call}(" in source and "0.5f" in source and "wgmma.mma_async" in source
    assert ("stmatrix" in source) == (out_dtype == "bfloat16")


SPLIT_K_OPS = ALONE + TOGETHER + [EpilogueOps(scale=0.25, bias="row", residual=True, activation="gelu")]
ACTIVATIONS = {None: lambda x: x, "relu": lambda x: np.maximum(x, 0.0), "silu": lambda x: x / (1 + np.exp(-x)),
               "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
               "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))}


def split_k_reference(p, ops, bias, residual):
    """activation(scale * sum_s P[s] + bias + residual) in float64, the order EpilogueOps documents."""
    x = p.sum(0) * (1.0 if ops.scale is None else ops.scale)
    x = x + (0.0 if bias is None else bias) + (0.0 if residual is None else residual)
    return ACTIVATIONS[ops.activation](x)


@pytest.mark.parametrize("ops, out_dtype", each_in_one_dtype(SPLIT_K_OPS), ids=repr)
def test_split_k_sums_with_the_ops_verify_compile_and_compute_the_formula(ops, out_dtype):
    """The symbolic sum kernel (one for every S, M, N) simulated at 3 x 5 x 40 (200 outputs: one
    block, its last 78 threads past the end), 2 x 24 x 48 (a block and a quarter) and 4 x 7 x 88
    (2 blocks, the second's run 26 past M N = 616)."""
    dtype = getattr(tp, out_dtype)
    fusion = split_k_sum(dtype, ops=ops)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, errors(report)
    assert tp.compile(fusion, "sm_90a").cubin[:4] == b"\x7fELF"
    ir = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    for s, m, n in ((3, 5, 40), (2, 24, 48), (4, 7, 88)):
        rng = np.random.default_rng(s * m * n)
        p = round_to(rng.standard_normal((s, m, n)), tp.float32)
        bias = {"column": (1, n), "row": (m, 1), None: None}[ops.bias]
        bias = None if bias is None else round_to(rng.standard_normal(bias), tp.float32)
        residual = round_to(rng.standard_normal((m, n)), dtype) if ops.residual else None
        (got,) = run_kernel(ir, fusion, [t for t in (p, bias, residual) if t is not None], {"S": s, "M": m, "N": n})
        want = split_k_reference(p, ops, bias, residual)
        rtol, atol = (1e-5, 1e-5) if dtype == tp.float32 else (2 ** -8, 1e-5)  # bfloat16: one rounding of the result
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol, err_msg=(s, m, n))


def test_split_k_at_a_shape_fuses_the_ops_and_is_chosen_again_with_them():
    """At a shape config_fusions gives the sum kernel its numbers and the ops' inputs; the
    heuristic picks split-K for few tiles and a long K with an epilogue as without one."""
    ops = EpilogueOps(scale=2.0, bias="column", residual=True, activation="gelu_tanh")
    _partials, total = config_fusions(BY_NAME["128x128_split_k"], "K", "MN", "bfloat16", shape=(200, 264, 4096),
                                      splits=4, ops=ops)
    assert [t.dtype for t in total.inputs] == [tp.float32, tp.float32, tp.bfloat16] and not total.symbols
    assert tp.verify(total, "sm_90a").ok
    residual = total.inputs[-1].name  # a thread's run of 4 bfloat16 residuals: one 8-byte load
    assert f"*reinterpret_cast<const uint2*>(&{residual}[" in tp.compile(total, "sm_90a").cuda_source
    shape = (256, 1024, 16384)
    assert choose(*shape).config.split_k
    assert choose(*shape, configs=epilogue_configs(ops)) == choose(*shape)


BAD_OPS = [
    (lambda: EpilogueOps(scale="2"), "EpilogueOps: scale must be a finite number or None, got '2'"),
    (lambda: EpilogueOps(scale=float("inf")), "EpilogueOps: scale must be a finite number or None, got inf"),
    (lambda: EpilogueOps(scale=True), "EpilogueOps: scale must be a finite number or None, got True"),
    (lambda: EpilogueOps(bias="columns"), "EpilogueOps: bias must be one of 'row', 'column', got 'columns'"),
    (lambda: EpilogueOps(residual=1), "EpilogueOps: residual must be True or False, got 1"),
    (lambda: EpilogueOps(activation="gelu_erf"),
     "EpilogueOps: activation must be one of 'relu', 'gelu', 'gelu_tanh', 'silu', got 'gelu_erf'"),
    (lambda: tp.recipes.Epilogue(ops="relu"), "Epilogue: ops must be a EpilogueOps, got 'relu'"),
    (lambda: split_k_sum(tp.bfloat16, ops="relu"), "split_k_sum: ops must be an EpilogueOps, got 'relu'"),
]


@pytest.mark.parametrize("build, message", BAD_OPS, ids=[m.split(" must")[0].split(":")[0] + f"-{i}"
                                                         for i, (_, m) in enumerate(BAD_OPS)])
def test_bad_epilogue_fields_are_refused(build, message):
    with pytest.raises(tp.ScheduleError) as raised:
        build()
    assert str(raised.value).startswith(message), str(raised.value)


def test_an_epilogue_prints_as_its_call_and_no_ops_is_the_plain_gemm():
    ops = EpilogueOps(bias="row", activation="relu")
    assert repr(ops) == "EpilogueOps(bias='row', activation='relu')" and ops.any and not EpilogueOps().any
    assert epilogue_configs(EpilogueOps()) == CONFIGS + ONE_KERNEL_SPLIT_K  # every configuration fuses no ops
    plain = tp.recipes.Epilogue(dtype=tp.bfloat16, stmatrix=True)
    assert dataclasses.replace(plain, ops=EpilogueOps()) == plain and "ops" not in repr(plain)


try:
    import torch
except ImportError:  # the verification above needs no PyTorch; the operands below do
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")


def operands(m=16, n=24, k=32):
    return torch.zeros(m, k, dtype=torch.bfloat16), torch.zeros(k, n, dtype=torch.bfloat16)


@needs_torch
def test_the_arguments_say_which_epilogue():
    bias_n, bias_m = torch.zeros(24), torch.zeros(16, 1)
    assert epilogue_of(bias_n) == EpilogueOps(bias="column") == epilogue_of(bias_n[None])
    assert epilogue_of(bias_m, torch.zeros(16, 24), 2, "silu") == \
        EpilogueOps(scale=2, bias="row", residual=True, activation="silu")
    with pytest.raises(tp.InputError, match=r"bias must be a tensor \[N\] or \[1, N\].*got \[2, 3\]"):
        epilogue_of(torch.zeros(2, 3))
    with pytest.raises(tp.InputError, match="matmul: EpilogueOps: activation must be one of"):
        epilogue_of(activation="tanh")


@needs_torch
def test_bad_bias_and_residual_are_named():
    a, b = operands()
    out = dict(out_dtype=torch.bfloat16)
    with pytest.raises(tp.InputError, match=r"a row bias must be \[16\] or \[16, 1\] \(one value a row, M = 16\), "
                                            r"got shape \[24\]"):
        Matmul(epilogue=EpilogueOps(bias="row"))(a, b, torch.zeros(24))
    with pytest.raises(tp.InputError, match=r"a column bias must be \[24\] or \[1, 24\].*got shape \[1, 16\]"):
        matmul(a, b, bias=torch.zeros(1, 16), **out)
    with pytest.raises(tp.InputError, match="bias must be float32 or the output's bfloat16, got float16"):
        matmul(a, b, bias=torch.zeros(24, dtype=torch.float16), **out)
    with pytest.raises(tp.InputError, match=r"bias has strides \[2\]; its 24 values must be contiguous"):
        matmul(a, b, bias=torch.zeros(48)[::2], **out)
    with pytest.raises(tp.InputError, match=r"bias is on meta and A on cpu"):
        matmul(a, b, bias=torch.zeros(24, device="meta"), **out)
    with pytest.raises(tp.InputError, match=r"residual must be \[M, N\] = \[16, 24\], got shape \[24, 16\]"):
        matmul(a, b, residual=torch.zeros(24, 16, dtype=torch.bfloat16), **out)
    with pytest.raises(tp.InputError, match="residual must be the output's bfloat16, got float32"):
        matmul(a, b, residual=torch.zeros(16, 24), **out)
    with pytest.raises(tp.InputError, match=r"residual \[M, N\] has strides \[1, 16\]; it must be row-major"):
        matmul(a, b, residual=torch.zeros(24, 16, dtype=torch.bfloat16).t(), **out)
    with pytest.raises(tp.InputError, match=r"takes 3 tensors \(a, b, residual\), got 2"):
        Matmul(epilogue=EpilogueOps(residual=True))(a, b)
    with pytest.raises(tp.InputError, match="configuration 128x256_persistent_group_16_cluster_2 does not fuse "
                                            "EpilogueOps"):
        matmul(a, b, activation="gelu", config=WIDE.name)
    with pytest.raises(tp.InputError, match="in cpu memory"):  # every check passed: run() names the device
        matmul(a, b, bias=torch.zeros(24, dtype=torch.bfloat16), residual=torch.zeros(16, 24, dtype=torch.bfloat16),
               scale=0.5, activation="relu", **out)


@needs_torch
def test_the_terms_bind_to_the_shape_class_kernel(monkeypatch):
    entry = Matmul(out_dtype=torch.float32, epilogue=EpilogueOps(bias="row", residual=True))
    assert entry.input_names == ("a", "b", "bias", "residual")
    a, b = operands()
    terms = entry.terms(a, b, (torch.zeros(16, dtype=torch.float32), torch.zeros(16, 24)))
    assert [list(t.shape) for t in terms] == [[16, 1], [16, 24]] and terms[0].dtype == torch.float32
    kernel = entry.kernel("K", "MN")
    monkeypatch.setattr(binding, "check_device", lambda g, info, position, device_id: 0)  # CPU tensors stand in
    bound = binding.bind(kernel.ir.globals, [a.unsqueeze(1), b.t().unsqueeze(0), *terms], None, {},
                         list(kernel.fusion.symbols), None)
    assert {s: bound.env[s] for s in "MNK"} == {"M": 16, "N": 24, "K": 32}


@needs_torch
def test_the_terms_bind_to_split_k_s_sum_after_the_partials(monkeypatch):
    entry = Matmul(config="128x128_split_k", specialize=False, epilogue=EpilogueOps(bias="column", residual=True))
    a, b = operands()
    terms = entry.terms(a, b, (torch.zeros(24, dtype=torch.bfloat16), torch.zeros(16, 24, dtype=torch.bfloat16)))
    _partials, total = entry.kernels(BY_NAME["128x128_split_k"], "K", "K")
    monkeypatch.setattr(binding, "check_device", lambda g, info, position, device_id: 0)  # CPU tensors stand in
    bound = binding.bind(total.ir.globals, [torch.zeros(4, 16, 24), *terms], None, {}, list(total.fusion.symbols), None)
    assert {s: bound.env[s] for s in "SMN"} == {"S": 4, "M": 16, "N": 24}


@needs_torch
def test_the_fake_implementation_gives_the_output():
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = tp.as_torch_op(Matmul(out_dtype=torch.bfloat16, epilogue=EpilogueOps(bias="column", activation="gelu")),
                        name="tileproof_test::matmul_bias_gelu")
    with FakeTensorMode():
        a, b = operands(40, 48, 64)
        d = op(a, b, torch.zeros(48, dtype=torch.bfloat16))
    assert tuple(d.shape) == (40, 48) and d.dtype == torch.bfloat16


@pytest.mark.parametrize("out_dtype, used", [("float32", None), ("bfloat16", "50%")])
def test_the_residual_is_read_a_column_pair_at_a_time(out_dtype, used):
    """D's fragment holds pairs of adjacent columns: the residual's reader loads each pair as one
    vector, so a warp's load uses every byte it moves (float32: 8 rows of 4 threads x 8 bytes) or
    half (bfloat16: 16 of a sector's 32 bytes a row), not a quarter."""
    fusion = fusion_with(EpilogueOps(residual=True), out_dtype)
    residual = fusion.inputs[-1]
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, errors(report)
    warned = [d.message for d in report.diagnostics if d.code == "GLOBAL-COALESCING"
              and f"from {residual.name} " in d.message]
    assert [used in m for m in warned] == ([True] if used else [])
    source = tp.compile(fusion, "sm_90a").cuda_source
    vector = "unsigned int" if out_dtype == "bfloat16" else "uint2"
    assert f"*reinterpret_cast<const {vector}*>(&{residual.name}[" in source
