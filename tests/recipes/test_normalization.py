"""recipes/normalization.py on the CPU: every op's fusion verifies and compiles (NVRTC, no GPU)
for symbolic row lengths, its kernel simulated (tests/support/reduction_sim.py) computes the op
against numpy at float64, the row classes, and the entries' InputErrors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.ir import BlockReduce, Compute, walk
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime.reference import reference, round_to, tolerance
from tileproof.model.targets import get_target
from tileproof.recipes import normalization as N

from support.reduction_sim import run_kernel

TARGET = get_target("sm_90a")
EPS = 1e-5


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _layer_norm(x, w, b):
    mean = x.mean(1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(1, keepdims=True) + EPS) * w + b


def _rms_norm(x, w):
    return x / np.sqrt((x * x).mean(1, keepdims=True) + EPS) * w


def _cross_entropy(x, p):
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1, keepdims=True)) + m
    return (p * (lse - x)).sum(1)


OPS = {  # name: (fusion builder, inputs (rows [M, N] or weights [N]), numpy at float64)
    "softmax": (lambda r: N.softmax_fusion(r), "x", _softmax),
    "log_softmax": (lambda r: N.softmax_fusion(r, log=True), "x", lambda x: np.log(_softmax(x))),
    "layer_norm": (lambda r: N.layer_norm_fusion(r, EPS), "xwb", _layer_norm),
    "rms_norm": (lambda r: N.rms_norm_fusion(r, EPS), "xw", _rms_norm),
    # F.layer_norm's and F.rms_norm's None weight or bias: kernels without those inputs
    "layer_norm_no_bias": (lambda r: N.layer_norm_fusion(r, EPS, bias=False), "xw", lambda x, w: _layer_norm(x, w, 0)),
    "layer_norm_no_affine": (lambda r: N.layer_norm_fusion(r, EPS, weight=False, bias=False), "x",
                             lambda x: _layer_norm(x, 1, 0)),
    "rms_norm_no_weight": (lambda r: N.rms_norm_fusion(r, EPS, weight=False), "x", lambda x: _rms_norm(x, 1)),
    "cross_entropy": (lambda r: N.cross_entropy_fusion(r), "xp", _cross_entropy),
}


def _inputs(kinds, m, n, dtype, rng):
    out = []
    for k in kinds:
        if k == "p":
            p = rng.random((m, n))
            out.append(p / p.sum(1, keepdims=True))
        else:
            out.append(rng.standard_normal((m, n) if k == "x" else (n,)) * (2.0 if k == "x" else 1.0))
    return [round_to(a, getattr(tp, dtype)) for a in out]


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("rows", [N.RowClass("bfloat16", 8, 1), N.RowClass("bfloat16", 8, 4),
                                  N.RowClass("float32", 4, 2), N.RowClass("bfloat16", 8, 8),
                                  N.RowClass("bfloat16", 8, 4, 32, 4)], ids=str)
def test_the_fusion_verifies_and_compiles_for_every_row_length_of_its_class(op, rows):
    fusion = OPS[op][0](rows)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [(d.code, d.message) for d in report.errors]
    kernel = tp.compile(fusion, "sm_90a")
    assert kernel.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype, vector, n, rows, whole, serial", [
    ("float32", 4, 48, 1, True, 1), ("float32", 4, 40, 1, True, 1), ("bfloat16", 8, 64, 1, True, 1),
    ("float32", 4, 40, 2, True, 1), ("float32", 4, 44, 1, False, 1), ("float32", 4, 48, 1, True, 2),
    ("float32", 4, 44, 2, False, 2)])
def test_the_simulated_kernel_computes_the_op(op, dtype, vector, n, rows, whole, serial):
    """Rows of n elements over threads of 2 vectors each (not whole, n = 44: the last thread's
    second vector past the row), 3 rows (with 2 rows a block: the second block's second row past
    M; with 2 serial steps a block, their rows in a register circular buffer of 2 stages, the
    next step's loaded while this one computes: the last step past M); against numpy at float64
    and the fusion's float64 reference."""
    build, kinds, numpy_op = OPS[op]
    fusion = build(N.RowClass(dtype, vector, 2, 512, rows, serial=serial, whole=whole))
    ir = lower(fusion.snapshot(), TARGET).kernel
    m = 3
    inputs = _inputs(kinds, m, n, dtype, np.random.default_rng(n))
    (got,) = run_kernel(ir, fusion, inputs, {"M": m, "N": n})
    got = np.asarray(got, dtype=np.float64)
    (want,) = reference(fusion, inputs)
    rtol, atol = tolerance(fusion.outputs[0].dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(got, numpy_op(*inputs), rtol=max(rtol, 1e-5), atol=max(atol, 1e-5))


@pytest.mark.parametrize("n, dtype, expected", [
    (1024, "bfloat16", N.RowClass("bfloat16", 8, 4, 32)), (4096, "bfloat16", N.RowClass("bfloat16", 8, 4, 128)),
    (8192, "bfloat16", N.RowClass("bfloat16", 8, 4, 256)),
    (16384, "bfloat16", N.RowClass("bfloat16", 8, 2, 512, looped=True, staged=True)),
    (32768, "bfloat16", N.RowClass("bfloat16", 8, 2, 512, looped=True, staged=True)),
    (65536, "bfloat16", N.RowClass("bfloat16", 8, 2, 512, looped=True, staged=True)),
    (1000, "bfloat16", N.RowClass("bfloat16", 8, 1, 128)), (1002, "bfloat16", N.RowClass("bfloat16", 2, 1, 512)),
    (4096, "float32", N.RowClass("float32", 4, 4, 256)), (64, "bfloat16", N.RowClass("bfloat16", 8, 4, 32)),
    (8200, "bfloat16", N.RowClass("bfloat16", 8, 2, 1024, whole=False)),  # 1025 vectors: none whole fits
])
def test_row_class(n, dtype, expected):
    rows = N.row_class(n, dtype)
    assert rows == expected
    assert rows.admits(n) and rows.threads(n) <= rows.max_threads


@pytest.mark.parametrize("n, expected", [
    (8192, N.RowClass("bfloat16", 8, 4, 256)),  # below LONG_ROW: held in registers
    (16384, N.RowClass("bfloat16", 8, 4, 256, looped=True, staged=True)),
    (65536, N.RowClass("bfloat16", 8, 4, 256, looped=True, staged=True)),  # 128 KiB of shared memory
    (20000, N.RowClass("bfloat16", 8, 4, 256, looped=True, staged=True, whole=False)),  # a partial last step
    (65536 + 8, N.RowClass("bfloat16", 8, 1, 512, looped=True, whole=False)),  # past STAGED_BYTES: looped
    (1 << 20, N.RowClass("bfloat16", 8, 1, 512, looped=True)),
])
def test_long_rows_are_staged_in_shared_memory_or_looped(n, expected):
    rows = N.row_class(n, "bfloat16", long_shape=(4, 256))
    assert rows == expected and rows.admits(n)
    assert N.Softmax.long_shape == N.CrossEntropy.long_shape == (2, 256)
    assert N.RMSNorm.long_shape == N.LONG_SHAPE and N.LayerNorm.long_shape == (1, 512)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("staged", [False, True], ids=["looped", "staged"])
@pytest.mark.parametrize("dtype, vector, n, whole", [("float32", 4, 96, True), ("float32", 4, 84, False),
                                                     ("bfloat16", 8, 64, True)])
def test_the_simulated_looped_kernel_computes_the_op(op, dtype, vector, n, whole, staged):
    """A looped class (steps of 2 vectors over 4 threads; each use of the row reads it in a loop of
    its own, from global memory or, staged, from the block's copy in shared memory): 96 = 3 whole
    steps, 84 = 2 steps and a partial one; against numpy at float64 and the fusion's float64
    reference."""
    build, kinds, numpy_op = OPS[op]
    fusion = build(N.RowClass(dtype, vector, 2, 4, looped=True, staged=staged, whole=whole))
    assert tp.verify(fusion, "sm_90a").ok
    ir = lower(fusion.snapshot(), TARGET).kernel
    inputs = _inputs(kinds, 3, n, dtype, np.random.default_rng(n))
    (got,) = run_kernel(ir, fusion, inputs, {"M": 3, "N": n})
    got = np.asarray(got, dtype=np.float64)
    (want,) = reference(fusion, inputs)
    rtol, atol = tolerance(fusion.outputs[0].dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(got, numpy_op(*inputs), rtol=max(rtol, 1e-5), atol=max(atol, 1e-5))


def test_the_entries_kept_are_bounded():
    """Each distinct eps makes an entry holding its kernels: the calls keep the latest few."""
    N._entries.clear()
    for k in range(N.ENTRY_CACHE_SIZE + 5):
        N._entry(N.RMSNorm, 1e-6 * (k + 1), "sm_90a")
    assert len(N._entries) == N.ENTRY_CACHE_SIZE
    first = next(iter(N._entries))
    N._entry(*first)  # a hit moves to the end: the next miss drops another
    N._entry(N.RMSNorm, 1.0, "sm_90a")
    assert first in N._entries
    N._entries.clear()


def test_rows_longer_than_a_block_holds_are_looped():
    assert N.row_class(1 << 17) == N.RowClass("bfloat16", 8, 1, 512, looped=True)


def test_row_class_checks_its_fields():
    with pytest.raises(tp.ScheduleError, match="vector must be a positive power of two, got 3"):
        N.RowClass("bfloat16", 3, 1)
    with pytest.raises(tp.ScheduleError, match="vector 16 of bfloat16 is more than 16 bytes"):
        N.RowClass("bfloat16", 16, 1)
    with pytest.raises(tp.ScheduleError, match="dtype must be one of"):
        N.RowClass("int8", 8, 1)


def test_entries_refuse_bad_inputs_with_one_clear_error():
    torch = pytest.importorskip("torch")
    x = torch.zeros(4, 64, dtype=torch.bfloat16)
    with pytest.raises(tp.InputError, match="softmax: x must be one of bfloat16, float16, float32, got int32"):
        N.softmax(torch.zeros(4, 64, dtype=torch.int32))
    with pytest.raises(tp.InputError, match="only dim=-1"):
        N.softmax(x, dim=0)
    with pytest.raises(tp.InputError, match="must be contiguous"):
        N.softmax(x.t())
    with pytest.raises(tp.InputError, match=r"layer_norm: weight must have shape \[64\], got \[32\]"):
        N.layer_norm(x, torch.zeros(32, dtype=torch.bfloat16), torch.zeros(64, dtype=torch.bfloat16))
    with pytest.raises(tp.InputError, match="rms_norm: weight is float32 but x is bfloat16"):
        N.rms_norm(x, torch.zeros(64))
    with pytest.raises(tp.InputError, match="eps must be a non-negative number"):
        N.rms_norm(x, torch.zeros(64, dtype=torch.bfloat16), eps=-1.0)
    with pytest.raises(tp.InputError, match=r"cross_entropy: target must have shape \[4, 64\]"):
        N.cross_entropy(x, torch.zeros(4, 32, dtype=torch.bfloat16))


def test_fake_outputs_have_the_ops_shapes_and_dtypes():
    torch = pytest.importorskip("torch")
    x = torch.zeros(2, 3, 64, dtype=torch.bfloat16, device="meta")
    w = torch.zeros(64, dtype=torch.bfloat16, device="meta")
    assert N.Softmax().fake(x).shape == (2, 3, 64)
    assert N.RMSNorm().fake(x, w).dtype == torch.bfloat16
    loss = N.CrossEntropy().fake(x, x)
    assert loss.shape == (2, 3) and loss.dtype == torch.float32


def test_fake_outputs_never_read_an_address():
    """torch.compile calls the fake implementation on FakeTensors, whose data_ptr raises there (and
    warns here): the alignment checks belong to the real call only (found on the H200)."""
    torch = pytest.importorskip("torch")
    fake_tensor = pytest.importorskip("torch._subclasses.fake_tensor")
    with fake_tensor.FakeTensorMode(), warnings.catch_warnings():
        warnings.simplefilter("error")
        x = torch.empty(4, 1024, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(1024, dtype=torch.bfloat16, device="cuda")
        assert N.RMSNorm().fake(x, w).shape == (4, 1024)
        assert N.LayerNorm().fake(x, w, w).shape == (4, 1024)
        assert N.CrossEntropy().fake(x, x).shape == (4,)


@pytest.mark.parametrize("n", [1000, 8200, 20000, 100008])  # whole, predicated, staged, looped rows
def test_layer_norm_is_two_passes_as_nvfusers_segmenter_translates_its_welford(n):
    """The row's mean, then the sum of squared deviations from it (two sum combines, no division per
    element: nvFuser's TranslateApplicableWelford for a row one kernel holds); the row (global, or
    the staged copy in shared memory) is read for the mean, the deviations and the output, where a
    held row is read once in all."""
    rows = N.row_class(n)
    fusion = N.layer_norm_fusion(rows)
    assert [op.name for op in fusion.exprs if op.kind.value == "reduction"] == ["sum", "sum"]
    ir = lower(fusion.snapshot(), TARGET).kernel
    combines = [c for c in walk(ir.body) if isinstance(c, BlockReduce)]
    assert [c.combine for c in combines] == ["add", "add"]
    staged = [t.name for t in fusion.tensors if t.memory_type is tp.MemoryType.Shared]
    row = staged[0] if staged else fusion.inputs[0].name
    readers = {c.out.tensor for c in walk(ir.body) if isinstance(c, Compute) and any(o.tensor == row for o in c.ins)}
    assert len(readers) == (3 if rows.looped else 1), readers


def test_each_op_holds_at_most_its_measured_vectors_a_thread():
    """RMSNorm's rows of 1024-8192 run in classes of two vectors a thread (measured faster than
    four on the H200), the other ops' in four below 8192 and softmax's and LayerNorm's in eight
    from there (wide_from); long rows take each op's staged shape, LayerNorm's from 32768 on."""
    assert N.RMSNorm().row_class(8192).batch == 2 and N.Softmax().row_class(4096).batch == 4
    assert N.Softmax().row_class(8192) == N.RowClass("bfloat16", 8, 8, 128)
    assert N.row_class(8192, wide_from=8192) == N.Softmax().row_class(8192)
    assert N.LayerNorm().row_class(16384) == N.RowClass("bfloat16", 8, 8, 256)  # in registers, not staged
    assert N.LayerNorm().row_class(8200) == N.row_class(8200)  # 8200 = 8 x 1025: no class is whole, the fewest fit
    assert N.LayerNorm().row_class(32768) == N.RowClass("bfloat16", 8, 1, 512, looped=True, staged=True)
    assert N.Softmax().row_class(16384) == N.RowClass("bfloat16", 8, 2, 256, looped=True, staged=True)
    assert N.RMSNorm().row_class(1000).batch == N.row_class(1000, most_vectors=2).batch == 1  # 1000 = 8 x 125
    assert N.RMSNorm().row_class(1 << 15) == N.row_class(1 << 15, long_shape=N.RMSNorm.long_shape)


def test_entries_without_weights_take_fewer_inputs_and_say_which():
    """F.layer_norm(x, shape, None, None) and F.rms_norm(x, shape, None): entries whose kernels
    have no such inputs, named in the kernel and the operator's schema."""
    entry = N.LayerNorm(weight=False, bias=False)
    assert entry.input_names == ("x",) and entry.weights == ()
    assert N.LayerNorm(bias=False).input_names == ("x", "weight")
    assert N.RMSNorm(weight=False).input_names == ("x",)
    assert N.LayerNorm().input_names == ("x", "weight", "bias")  # the class's own names stay
    rows = N.RowClass("bfloat16", 8, 4, 128)
    assert entry.fusion(rows).name == f"layer_norm_no_weight_no_bias_{rows.tag}"
    assert [t.name for t in N.RMSNorm(weight=False).fusion(rows).inputs] == ["T0"]
    with pytest.raises(tp.InputError, match="layer_norm: weight must be True or False, got 1"):
        N.LayerNorm(weight=1)
    with pytest.raises(tp.ScheduleError, match="rms_norm_fusion: weight must be True or False"):
        N.rms_norm_fusion(rows, weight=None)
