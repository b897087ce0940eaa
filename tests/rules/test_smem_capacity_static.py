"""SMEM-CAPACITY counts the static shared memory beside the dynamic plan (execution/smem_plan.py
static_bytes, dynamic_limit): a block's mbarriers push the dynamic base to the next multiple of
1024, so a plan of exactly the opt-in maximum with mbarriers does not launch (it was accepted once
and failed in cuFuncSetAttribute on an H200: attention with three K / V stages of 128 keys).
tests/gpu/test_static_shared_limit.py measures the limit on the GPU."""

from __future__ import annotations

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.execution.smem_plan import dynamic_limit, static_bytes
from tileproof.model.targets import get_target
from tileproof.recipes.attention import AttentionTile, attention

TILE = AttentionTile(rows=256, keys=1024, key_tile=128, head_dim=128, value_dim=128)


def _full_box(rows: int) -> tp.Fusion:
    """A TMA box of rows x 256 float32 into shared memory (one mbarrier), read back by TIDx."""
    with tp.Fusion("full_box") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, rows, 256])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.axis(0).parallelize(tp.ParallelType.BIDx)
    for i in (1, 2):
        t1.axis(i).parallelize(tp.ParallelType.Bulk)
    t2.axis(2).parallelize(tp.ParallelType.TIDx)
    return fusion


def test_a_plan_of_the_whole_limit_beside_mbarriers_is_refused_with_its_bytes():
    assert tp.verify(_full_box(226)).ok  # 231424 bytes: the dynamic base at 1024 leaves exactly that
    (error,) = tp.verify(_full_box(227)).errors  # 232448: the opt-in maximum, 1024 more than fits beside it
    assert error.code == "SMEM-CAPACITY"
    assert error.counterexample["bytes"] == 232448 and error.counterexample["limit"] == 231424
    assert "beside the kernel's 8 bytes of mbarriers" in error.message


def test_three_stages_of_128_keys_fit_once_the_quads_combine_by_shuffles():
    # Q 32 KiB, K and V 3 x 32 KiB: 229376 bytes; the row max and sum over a quad's TIDx{4} need no scratch
    # (execution/reduction.py combines_in_shared), which once made it 232448 and refused
    fusion = attention(TILE, warpgroups=2, stages=3, producer=True)
    assert tp.verify(fusion).ok
    assert "tp_scratch" not in tp.compile(fusion).cuda_source


def test_two_stages_fit_and_the_kernel_declares_no_more_static_bytes_than_counted():
    fusion = attention(TILE, warpgroups=2, stages=2, producer=True)
    assert tp.verify(fusion).ok
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    # full barriers: Q, and K and V per stage; empty: one per stage for the pipelined loop
    assert kernel.static_smem_bytes == 8 * (1 + 2 + 2 + 2) <= static_bytes(fusion)
    assert dynamic_limit(fusion, 232448) == 232448 - 1024


def test_without_static_shared_memory_the_whole_limit_is_dynamic():
    with tp.Fusion("plain") as fusion:
        x = tp.make_contig_concrete_tensor([128, 64])
        fusion.add_input(x)
        y = tp.set(x)
        fusion.add_output(tp.set(y))
    y.set_memory_type(tp.MemoryType.Shared)
    assert static_bytes(fusion) == 0 and dynamic_limit(fusion, 232448) == 232448
