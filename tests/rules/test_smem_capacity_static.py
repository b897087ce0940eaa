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


def test_a_plan_of_the_whole_limit_beside_mbarriers_is_refused_with_its_bytes():
    fusion = attention(TILE, warpgroups=2, stages=3, producer=True)  # Q 32 KiB, K and V 3 x 32 KiB, scratch 3 KiB
    (error,) = tp.verify(fusion).errors
    assert error.code == "SMEM-CAPACITY"
    assert error.counterexample["bytes"] == 232448 and error.counterexample["limit"] == 231424
    assert "beside the kernel's 104 bytes of mbarriers" in error.message


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
