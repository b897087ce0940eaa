"""attention(fused_softmax=True): each thread's scale, shift, exp2, P's cast and its part of
the row sum in one loop over its elements (the chain inlined into the row sum's loop, the fragments'
element digits kept apart by schedule_mma_fragment(split_elements=True)). Verified and compiled here;
the GPU runs compare it with fused_softmax=False bit for bit (tests/gpu/test_attention.py)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention

OV = dict(warpgroups=2, stages=3, producer=True, registers=(24, 240), in_place=True, overlap=True)


def _loop_around(source: str, needle: str) -> str:
    """The text of the innermost `for` loop around the first line holding `needle`."""
    lines = source.splitlines()
    at = next(k for k, line in enumerate(lines) if needle in line)
    depth = 0
    for start in range(at, -1, -1):  # back to the `for` whose brace is still open at `needle`
        depth += lines[start].count("}") - lines[start].count("{")
        if depth < 0 and "for (" in lines[start]:
            break
    depth, end = 0, start
    for end in range(start, len(lines)):
        depth += lines[end].count("{") - lines[end].count("}")
        if depth == 0:
            break
    return "\n".join(lines[start:end + 1])


@pytest.mark.parametrize("tile, options", [
    (AttentionTile(rows=4096, keys=4096, key_tile=128, head_dim=128, value_dim=128, batch=128), {**OV, "persistent": 128}),
    (AttentionTile(rows=300, keys=500, key_tile=64, batch=2, group=2, masked=True), {"stages": 2}),
    (AttentionTile(rows=200, keys=500, key_tile=128, head_dim=128, value_dim=128, causal=True), {**OV, "lse": True}),
], ids=["persistent_overlap", "masked", "causal_lse"])
@pytest.mark.filterwarnings("ignore::tileproof.PerformanceWarning")  # causal_lse spills 16-24 bytes either way
def test_the_exponentials_cast_and_row_sum_share_one_loop(tile, options):
    fused = tp.compile(attention(tile, fused_softmax=True, **options), "sm_90a")
    body = _loop_around(fused.cuda_source, "= exp2f(")
    assert "__float2bfloat16_rn(" in body and "= sum(" in body  # P's cast and the row sum's part, beside exp2
    separate = tp.compile(attention(tile, fused_softmax=False, **options), "sm_90a")
    alone = _loop_around(separate.cuda_source, "= exp2f(")
    assert "__float2bfloat16_rn(" not in alone and "= sum(" not in alone
    # no register cost beyond a spilled pair (causal_lse: ptxas spills 24 bytes fused, 16 apart, since K's
    # stage is released at the top of the rotated loop; 8 and 8 before)
    assert fused.resources.spill_store_bytes <= separate.resources.spill_store_bytes + 8


def test_the_row_sum_keeps_the_element_digits_in_the_fragments_order():
    fusion = attention(AttentionTile(rows=128, keys=256, key_tile=128, head_dim=128, value_dim=128), **OV,
                       fused_softmax=True)
    (part,) = [t for t in fusion.tensors if t.definition is not None and t.definition.name == "sum"
               and t.get_loop_domain()[-1].is_reduction]  # the tile's in-thread part of the row sum
    axes = [(a.static_extent, a.is_reduction) for a in part.get_loop_domain()[-3:]]
    assert axes == [(16, True), (2, False), (2, True)]  # [rv4, v2, rv1]: the exp2's loops, in its order


@pytest.mark.parametrize("key_tile, options, fused", [
    (128, OV, True), (256, dict(warpgroups=2, stages=2, producer=True, in_place=True), True),
    (64, OV, False),  # 64-key tiles: slower fused on an H200
    (128, dict(warpgroups=2, stages=2, producer=True), False),  # a tile's O added: slower fused
])
def test_the_default_fuses_where_o_is_in_place_over_key_tiles_of_128_or_more(key_tile, options, fused):
    tile = AttentionTile(rows=128, keys=512, key_tile=key_tile)
    source = tp.compile(attention(tile, **options), "sm_90a").cuda_source
    assert ("__float2bfloat16_rn(" in _loop_around(source, "= exp2f(")) is fused


def test_a_bad_fused_softmax_or_split_elements_is_refused():
    tile = AttentionTile(rows=128, keys=256, key_tile=128)
    with pytest.raises(tp.ScheduleError, match="fused_softmax must be True, False or None"):
        attention(tile, fused_softmax="yes")
    with tp.Fusion("f"):
        t = tp.make_contig_concrete_tensor([64, 64], dtype=tp.float32)
    with pytest.raises(tp.ScheduleError, match="split_elements must be True or False"):
        tp.schedule_mma_fragment(t, tp.MmaMacro.Hopper_64_64_16, "C", quads=True, split_elements=1)
