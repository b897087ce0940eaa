"""WGMMA-INSTRUCTION-REGISTERS, accumulators held across a loop: attention's O, rescaled in place across the key tiles, and each tile's S
are in registers together; over the kernel's registers a thread ptxas refuses the kernel (found by
the fuzzer: benchmarks/fuzz.py --families attention --seed 62, case 466, verified and then refused by
ptxas with C7600). The shapes benchmarks/attention.py times stay accepted."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention
from tileproof.testing import compile_unverified

R240 = dict(stages=2, producer=True, warpgroups=2, registers=(24, 240), in_place=True)


@pytest.mark.parametrize("tile, options, refused", [
    (AttentionTile(rows=192, keys=512, key_tile=256, head_dim=64, value_dim=192), dict(warpgroups=3, in_place=True),
     True),
    # the fuzzer's shape (its case also shortened the causal trip count): ptxas compiles it, spilling (kilobytes
    # while the row max and sum tested their rows' holes, 80 bytes since they run there)
    (AttentionTile(rows=256, keys=256, head_dim=64, value_dim=192, group=3, scale=0.427, key_tile=256, causal=True),
     dict(warpgroups=3, in_place=True, skip_masked_tiles=False), False),
])
def test_o_in_place_and_a_wide_s_over_the_registers_are_refused(tile, options, refused):
    fusion = attention(tile, **options)
    report = tp.verify(fusion, "sm_90a")
    d = next(d for d in report.errors if d.code == "WGMMA-INSTRUCTION-REGISTERS")
    assert d.counterexample["registers needed"] == 96 + 128 > d.counterexample["registers per thread"] == 168
    if refused:  # what the rule keeps from being accepted
        with pytest.raises(tp.UnsupportedSchedule, match="ptxas rejected"):
            compile_unverified(fusion, "sm_90a")
    else:
        assert compile_unverified(fusion, "sm_90a").resources.spill_store_bytes > 0


@pytest.mark.parametrize("head_dim, value_dim, key_tile, options", [
    (128, 128, 128, R240), (256, 256, 64, R240), (64, 64, 256, R240), (64, 64, 128, dict(warpgroups=3, in_place=True)),
    (64, 64, 256, dict(warpgroups=3)),  # O summed outside the wgmma: no accumulator held across the loop
    # O 128 + S 80 = 208 over the 168 of the launch, within the consumers' setmaxnreg 224 (it compiles, spilling)
    (64, 256, 160, dict(stages=2, producer=True, registers=(56, 224), warpgroups=2, in_place=True)),
])
def test_the_timed_shapes_fit(head_dim, value_dim, key_tile, options):
    tile = AttentionTile(rows=1024, keys=1024, key_tile=key_tile, head_dim=head_dim, value_dim=value_dim)
    assert "WGMMA-INSTRUCTION-REGISTERS" not in tp.verify(attention(tile, **options), "sm_90a").codes
