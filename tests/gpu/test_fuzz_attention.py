"""The fuzzer's attention family on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): every accepted draw of tests/support/attention_gen.py over a fixed seed range, mutated or
not, computes softmax(Q K^T scale + Mask) V (a masked tile's Mask as its case names it; a causal
tile against SDPA's is_causal where M == N, the bottom-right aligned mask where M != N; the lse
output against logsumexp), judged as
benchmarks/fuzz.py --families attention --run judges it (benchmarks/gpu_check.run_attention_and_judge:
random Q, K, V through attention_views, a NaN-poisoned output with guard elements, float64 within
bfloat16's tolerance). A rejected draw
is skipped with its codes. The judge itself must tell a kernel judged at the wrong scale.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes.attention import AttentionTile, one_tile_attention  # noqa: E402

from gpu_check import run_attention_and_judge  # noqa: E402  (benchmarks/gpu_check.py)
from support.attention_gen import attention_case  # noqa: E402

pytestmark = pytest.mark.gpu
SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_accepted_attention_draw_computes_softmax_attention(seed):
    case = attention_case(seed)
    report = tp.verify(case.fusion, case.target)
    if not report.ok:
        pytest.skip(f"rejected: {', '.join(report.codes)}")
    result = run_attention_and_judge(tp.compile(case.fusion, case.target), case.tile, case.mask, seed)
    assert result["outcome"] == "ran correctly", (result, repr(case))


def test_the_judge_tells_a_wrong_scale():
    tile = AttentionTile(rows=128, keys=64)
    kernel = tp.compile(one_tile_attention(tile), "sm_90a")
    assert run_attention_and_judge(kernel, tile)["outcome"] == "ran correctly"
    judged_wrong = run_attention_and_judge(kernel, dataclasses.replace(tile, scale=4 * tile.softmax_scale))
    assert judged_wrong["outcome"] == "wrong output", judged_wrong
