"""Generated kernels on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device).

Copies must reproduce their inputs bit for bit, into outputs poisoned with NaN before the
launch; arithmetic is compared with the float64 reference of codegen/runtime/reference.py, which
rounds each tensor to its dtype as the kernel stores it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.codegen.runtime.reference import reference, tolerance  # noqa: E402
from tileproof.schedule_files import discover  # noqa: E402

from support import codegen_schedules as cs  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "float64": torch.float64}
GSG = discover([str(ROOT / "examples" / "valid" / "gsg_copy.py")])


def randn(*shape, dtype="float32"):
    return torch.randn(*shape, device="cuda").to(TORCH_DTYPES[dtype])


def poisoned_like(x, shape=None):
    return torch.full(shape or x.shape, float("nan"), dtype=x.dtype, device="cuda")


def check_reference(fusion, inputs, outputs):
    """outputs (torch) against the float64 reference of the fusion on inputs."""
    torch.cuda.synchronize()
    host = [x.float().cpu().numpy() if x.dtype == torch.bfloat16 else x.cpu().numpy() for x in inputs]
    for t, got, want in zip(fusion.outputs, outputs, reference(fusion, host)):
        rtol, atol = tolerance(t.dtype)
        want = torch.from_numpy(want).to(got.device)
        scale = float(want.nan_to_num(0).abs().max()) if want.numel() else 0.0
        # an op computed in float may land one storage ulp off the reference: judge that
        # against the tensor's scale, not against a sum that happens to cancel
        torch.testing.assert_close(got.double(), want, rtol=rtol, atol=max(atol, rtol * scale), equal_nan=True)


@pytest.mark.parametrize("case", GSG, ids=lambda c: c.name)
def test_gsg_copy_reproduces_fresh_inputs_into_poisoned_outputs(case):
    kernel = tp.compile(case.build(), target="sm_90a")
    assert kernel.launch_params.shared_memory_bytes == case.expect.allocations["T1"]["bytes"]  # the seed's size
    for _ in range(3):
        x = randn(2, 4)
        out = poisoned_like(x)
        (result,) = kernel.run(x, out=[out])
        torch.cuda.synchronize()
        assert result is out
        assert torch.equal(out, x)


@pytest.mark.parametrize("case", GSG[:2], ids=lambda c: c.name)
def test_run_allocates_torch_outputs(case):
    kernel = tp.compile(case.build())
    x = randn(2, 4)
    (out,) = kernel.run(x)
    torch.cuda.synchronize()
    assert isinstance(out, torch.Tensor) and out.device == x.device and torch.equal(out, x)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_pointwise_add_with_symbolic_sizes(dtype):
    fusion = cs.pointwise_add(dtype)
    kernel = tp.compile(fusion)
    for m, n in [(37, 129), (1, 1), (64, 128)]:
        a, b = randn(m, n, dtype=dtype), randn(m, n, dtype=dtype)
        out = poisoned_like(a)
        kernel.run(a, b, out=[out])
        check_reference(fusion, [a, b], [out])


def test_every_unary_and_binary_op():
    fusion = cs.binary_ops()
    kernel = tp.compile(fusion)
    a, b = randn(1000), randn(1000)
    one = torch.ones(1000, device="cuda")
    (out,) = kernel.run(a, b, one)
    check_reference(fusion, [a, b, one], [out])


def test_maximum_minimum_and_relu_propagate_nan():
    """As numpy and PyTorch do; CUDA's fmax / fmin return the number (relu(sqrt(-1)) was 0)."""
    fusion = cs.binary_ops()
    kernel = tp.compile(fusion)
    a, b = randn(1000), randn(1000)
    a[::7] = float("nan")
    b[3::11] = float("nan")
    one = torch.ones(1000, device="cuda")
    (out,) = kernel.run(a, b, one)
    check_reference(fusion, [a, b, one], [out])
    assert out.isnan().sum() >= 1000 // 7


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_integer_ops(dtype):
    fusion = cs.integer_ops(dtype)
    kernel = tp.compile(fusion)
    a = torch.randint(-10, 10, (777,), device="cuda", dtype=getattr(torch, dtype))
    b = torch.randint(-10, 10, (777,), device="cuda", dtype=getattr(torch, dtype))
    (out,) = kernel.run(a, b)
    want = torch.minimum(torch.maximum((a - b).abs(), (a * b).clamp(min=0)), -a + b)
    torch.cuda.synchronize()
    assert torch.equal(out, want)


@pytest.mark.parametrize("dtype,vector,m,n", [("float32", 4, 33, 256), ("float16", 8, 7, 64), ("float32", 4, 1, 4)])
def test_vectorized_copy_is_exact(dtype, vector, m, n):
    kernel = tp.compile(cs.vectorized_copy(dtype, vector))
    x = randn(m, n, dtype=dtype)
    out = poisoned_like(x)
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x)


def test_vector_access_needs_an_aligned_array():
    kernel = tp.compile(cs.vectorized_copy())
    x = torch.randn(8 * 64 + 1, device="cuda")[1:].view(8, 64)
    with pytest.raises(tp.InputError, match="aligned"):
        kernel.run(x)


@pytest.mark.parametrize("n", [4 * 64 * 5, 4 * 64 * 5 + 4, 4])
def test_a_vector_before_the_thread_axis_is_one_access_and_exact(n):
    """[BIDx, Vectorize{4}, TIDx]: a thread's 4 consecutive elements as one 16-byte access, as nvFuser
    vectorizes it (tileproof once moved them one at a time); N symbolic, a last block past N."""
    with tp.Fusion("vector_before_threads") as fusion:
        t0 = tp.make_contig_tensor(1, dtype=tp.float32); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    fusion.assume(f"{t0.axis(0).extent} % 4 == 0")
    t1.split(0, 4).split(0, 64).reorder([0, 2, 1])
    t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    t1.axis(2).parallelize(tp.ParallelType.TIDx)
    kernel = tp.compile(fusion)
    assert "uint4" in kernel.cuda_source
    x = randn(n)
    out = poisoned_like(x)
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x)


def test_merged_vector_copy_is_exact():
    kernel = tp.compile(cs.merged_vector_copy())
    x = randn(64, 256)
    (out,) = kernel.run(x)
    torch.cuda.synchronize()
    assert torch.equal(out, x)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("m,n", [(100, 70), (32, 32), (1, 65)])
def test_transpose_through_shared_memory(dtype, m, n):
    kernel = tp.compile(cs.smem_transpose(dtype))
    x = randn(m, n, dtype=dtype)
    out = poisoned_like(x, (n, m))
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x.t())


def test_broadcast_add():
    fusion = cs.broadcast_add()
    kernel = tp.compile(fusion)
    a, bias = randn(5, 200), randn(200)
    (out,) = kernel.run(a, bias)
    check_reference(fusion, [a, bias], [out])


def test_indivisible_split_writes_exactly_the_valid_items():
    kernel = tp.compile(cs.indivisible_split())
    x = randn(1000)
    out = poisoned_like(x)
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, -x)


def test_discontiguous_rows_bind_their_stride():
    kernel = tp.compile(cs.strided_input())
    base = randn(16, 64)
    for x in (base[:, :48], base[:, 8:56], randn(16, 48)):
        (out,) = kernel.run(x)
        torch.cuda.synchronize()
        assert torch.equal(out, x)


@pytest.mark.parametrize("builder", [cs.partial_threads, cs.serial_smem_reuse])
def test_shared_memory_copies_with_barriers(builder):
    fusion = builder()
    kernel = tp.compile(fusion)
    shape = [i.static_extent for i in fusion.inputs[0].logical]
    for _ in range(3):
        x = randn(*shape)
        out = poisoned_like(x)
        kernel.run(x, out=[out])
        torch.cuda.synchronize()
        assert torch.equal(out, x)


def test_two_outputs_share_an_inlined_register_tensor():
    fusion = cs.two_outputs()
    kernel = tp.compile(fusion)
    a, b = randn(1000), randn(1000)
    o1, o2 = poisoned_like(a), poisoned_like(a)
    r1, r2 = kernel.run(a, b, out=[o1, o2])
    assert r1 is o1 and r2 is o2
    check_reference(fusion, [a, b], [o1, o2])


def test_more_than_48k_of_shared_memory():
    kernel = tp.compile(cs.big_smem_copy())
    assert kernel.launch_params.shared_memory_bytes > 48 * 1024
    x = randn(3, 128, 128)
    out = poisoned_like(x)
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x)


def test_input_errors_on_the_gpu():
    kernel = tp.compile(GSG[0].build())
    with pytest.raises(tp.InputError, match="cpu memory"):
        kernel.run(torch.randn(2, 4))
    x = randn(2, 4)
    with pytest.raises(tp.InputError, match="same memory"):
        kernel.run(x, out=[x])
    with pytest.raises(tp.InputError, match="expected dtype float32, got float16"):
        kernel.run(x.half())


def test_benchmark_times_the_launch():
    kernel = tp.compile(cs.vectorized_copy())
    seconds = kernel.benchmark(randn(1024, 1024), iterations=20)
    assert 0 < seconds < 0.1


def test_cli_run_check_and_bench(capsys):
    from tileproof.cli import main

    assert main(["run", str(ROOT / "examples" / "valid" / "gsg_copy.py"), "--check", "--bench",
                 "--iterations", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == len(GSG) and "GB/s" in out


def test_cli_run_lays_inputs_out_as_their_allocation_domains(capsys):
    """`tileproof run --check` on attention, whose V [Z, 1, 1, Dv, N] is allocated row-major [Z, N, Dv]:
    the random V is laid out so (it was refused at launch, "axis 3 has stride 1000, expected 1"),
    and the output matches the reference."""
    from tileproof.cli import main

    path = ROOT / "examples" / "valid" / "attention.py"
    assert main(["run", f"{path}::three_consumer_warpgroups_at_head_dim_64", "--check"]) == 0
    assert "PASS three_consumer_warpgroups_at_head_dim_64" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["split_by_declared_symbol", "tma_load_from_one_thread"])
def test_cli_run_picks_and_passes_its_sizes(name, capsys):
    """`tileproof run --check` on a split by a declared symbol F, which no input's shape sets (run
    passes F, 1024 by default, to the launch, which refused it before: "extent(s) F are not set"),
    and on a schedule whose assumptions refuse 1024 (K <= 32: run picks 32, where it stopped with
    the assumption's error before)."""
    from tileproof.cli import main

    path = ROOT / "examples" / "valid" / "lowering.py"
    assert main(["run", f"{path}::{name}", "--check"]) == 0
    assert f"PASS {name}" in capsys.readouterr().out
