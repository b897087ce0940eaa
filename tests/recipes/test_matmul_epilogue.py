"""Fused epilogues of the Hopper GEMM recipe without a GPU: out = cast(activation(scale * D + bias +
residual)) verifies in both output paths (float32 from the registers, a 16-bit output through
stmatrix and TMA stores) for each op alone and the ops together, on every configuration
recipes.matmul runs it on (epilogue_configs); the verifier rejects the long gelu chain on the
128 x 256 tile (UNROLL-LENGTH), which is why those configurations are left out; the kernel reads
the bias and residual in D's fragment layout and computes the activation; EpilogueOps refuses bad
fields; the entry refuses bad bias and residual tensors, split-K with an epilogue, and its fake
implementation gives the output. The values are checked on the GPU (tests/gpu/test_matmul_epilogue.py)."""

from __future__ import annotations

import dataclasses

import pytest

import tileproof as tp
from tileproof.codegen.runtime import binding
from tileproof.recipes import Matmul, matmul
from tileproof.recipes.hopper_gemm import hopper_gemm
from tileproof.recipes.matmul import config_params, epilogue_configs, epilogue_of, shape_class_fusion
from tileproof.recipes.matmul_heuristic import BY_NAME, CONFIGS, WIDE
from tileproof.recipes.params import EpilogueOps

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


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("ops", TOGETHER, ids=repr)
def test_the_ops_together_verify_on_every_configuration_that_runs_them(ops, out_dtype):
    configs = epilogue_configs(ops)
    assert configs and not any(c.split_k for c in configs)
    for config in configs:
        report = tp.verify(fusion_with(ops, out_dtype, config), "sm_90a")
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


BAD_OPS = [
    (lambda: EpilogueOps(scale="2"), "EpilogueOps: scale must be a finite number or None, got '2'"),
    (lambda: EpilogueOps(scale=float("inf")), "EpilogueOps: scale must be a finite number or None, got inf"),
    (lambda: EpilogueOps(scale=True), "EpilogueOps: scale must be a finite number or None, got True"),
    (lambda: EpilogueOps(bias="columns"), "EpilogueOps: bias must be one of 'row', 'column', got 'columns'"),
    (lambda: EpilogueOps(residual=1), "EpilogueOps: residual must be True or False, got 1"),
    (lambda: EpilogueOps(activation="gelu_erf"),
     "EpilogueOps: activation must be one of 'relu', 'gelu', 'gelu_tanh', 'silu', got 'gelu_erf'"),
    (lambda: tp.recipes.Epilogue(ops="relu"), "Epilogue: ops must be a EpilogueOps, got 'relu'"),
    (lambda: config_params(BY_NAME["128x256_split_k"], "K", "K", "bfloat16", ops=EpilogueOps(scale=2.0)),
     "config_params: 128x256_split_k is split-K, whose sum of the partials fuses no epilogue ops"),
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
    assert epilogue_configs(EpilogueOps()) == CONFIGS
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
    with pytest.raises(tp.InputError, match="configuration 128x256_split_k does not fuse EpilogueOps"):
        matmul(a, b, scale=2.0, config="128x256_split_k")
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
def test_the_fake_implementation_gives_the_output():
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = tp.as_torch_op(Matmul(out_dtype=torch.bfloat16, epilogue=EpilogueOps(bias="column", activation="gelu")),
                        name="tileproof_test::matmul_bias_gelu")
    with FakeTensorMode():
        a, b = operands(40, 48, 64)
        d = op(a, b, torch.zeros(48, dtype=torch.bfloat16))
    assert tuple(d.shape) == (40, 48) and d.dtype == torch.bfloat16
