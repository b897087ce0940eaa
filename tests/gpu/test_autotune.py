"""tp.autotune on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device): a small space of
the Hopper GEMM recipe at one shape is verified by worker processes, its proved candidates (only)
compiled and timed; the winner's kernel is right against torch, it is cached on disk and a second
sweep returns it without verifying or timing; matmul_tuning tunes matmul's problem on natural
operands; and, where Ray is installed, the same sweep on a local Ray instance times on its GPU
(one task per GPU) and proves the same set."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes import HopperGemmTuning, matmul_tuning  # noqa: E402
from tileproof.recipes.gemm_tuning import operands  # noqa: E402
from tileproof.tuning import local  # noqa: E402

pytestmark = pytest.mark.gpu
# 12 candidates, one block per output tile: 256 x 128 is rejected (WS-REGISTERS), the rest proved
SPACE = {"tile": [(128, 128), (128, 256), (256, 128)], "stages": [3, 4], "cluster": [1, 2], "persistent": [False],
         "group": [8]}
M, N, K = 2048, 2048, 1024


def reference(a, b):
    """A [M, 1, K] @ B [1, N, K] in float32."""
    return a.squeeze(1).float() @ b.squeeze(0).float().t()


def test_the_winner_is_proved_timed_right_cached_and_reused(tmp_path, monkeypatch):
    recipe = HopperGemmTuning(M, N, K)
    result = tp.autotune(recipe, SPACE, cache_dir=tmp_path, iterations=20, warmup=3)
    print(result.summary())
    assert not result.cached and result.config in result.proved
    rejected = {v.index for v in result.rejected}
    assert rejected and all(v.codes for v in result.rejected)
    assert not rejected & set(result.timings)  # never compiled or timed
    assert set(result.timings) == {v.index for v in result.candidates if v.proved}
    assert all(t.seconds and t.seconds > 0 and t.device == result.device for t in result.timings.values())
    assert result.seconds == min(t.seconds for t in result.timings.values())

    a, b = recipe.inputs()
    (d,) = result.kernel.run(a, b)
    torch.testing.assert_close(d.float(), reference(a, b), atol=5e-2, rtol=2e-2)

    monkeypatch.setattr(local.ProcessRunner, "verify", lambda *args: pytest.fail("a cached sweep verified"))
    again = tp.autotune(recipe, SPACE, cache_dir=tmp_path)
    assert again.cached and again.config == result.config and again.seconds == result.seconds
    assert again.kernel.cuda_source == result.kernel.cuda_source
    (d2,) = again.kernel.run(a, b)
    torch.testing.assert_close(d2, d, atol=0, rtol=0)


def test_matmul_tuning_tunes_matmuls_problem_on_natural_operands(tmp_path):
    a = (torch.randn(1024, 512, device="cuda") / 8).to(torch.bfloat16)
    w = (torch.randn(768, 512, device="cuda") / 8).to(torch.bfloat16)  # a @ w.T: B K-major
    space = [{"tile": (128, 128), "stages": 4, "cluster": 1, "persistent": False, "group": 1},
             {"tile": (128, 256), "stages": 4, "cluster": 2, "persistent": False, "group": 8}]
    result = tp.autotune(matmul_tuning(a, w.t(), out_dtype="float32"), space, cache_dir=tmp_path)
    assert len(result.proved) == 2 and len(result.timings) == 2
    (d,) = result.kernel.run(*operands(a, w.t()))
    assert d.shape == (1024, 768) and d.dtype == torch.float32
    torch.testing.assert_close(d, a.float() @ w.float().t(), atol=2e-3, rtol=2e-3)


def test_a_ray_sweep_times_on_the_gpu_and_proves_what_the_processes_prove(tmp_path):
    ray = pytest.importorskip("ray")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        recipe = HopperGemmTuning(M, N, K)
        on_ray = tp.autotune(recipe, SPACE, executor="ray", cache_dir=tmp_path / "ray", iterations=20, warmup=3)
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    here = tp.autotune(recipe, SPACE, time=False)
    assert on_ray.proved == here.proved and set(on_ray.timings) == {v.index for v in here.candidates if v.proved}
    assert on_ray.device == torch.cuda.get_device_name() and on_ray.config in on_ray.proved
    a, b = recipe.inputs()
    (d,) = on_ray.kernel.run(a, b)
    torch.testing.assert_close(d.float(), reference(a, b), atol=5e-2, rtol=2e-2)
