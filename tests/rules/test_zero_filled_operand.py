"""A register operand computed in registers ends its zero path itself (execution/zero_padding.py
zero_filled): past K its statement writes 0 and reads nothing, so REDUCTION-K accepts a K tail
whose other operand is a TMA tile (zeros past K). Attention's P, the second product's A operand,
over keys that are not a whole number of key tiles: tests/gpu/test_attention.py runs them."""

from __future__ import annotations

import tileproof as tp
from tileproof.execution.statements import tensor_execution
from tileproof.execution.indexing import block_dims
from tileproof.execution.zero_padding import zero_filled, zero_padded
from tileproof.recipes.attention import AttentionTile, attention
from tileproof.rule_examples import mma_sync_tile


def _p_a(fusion):
    return next(t for t in fusion.tensors if t.definition is not None and t.definition.name == "broadcast"
                and t.dtype == tp.bfloat16)


def test_p_past_the_keys_is_written_zero_and_read_nowhere():
    fusion = attention(AttentionTile(rows=128, keys=1000, key_tile=64))
    report = tp.verify(fusion)
    assert report.ok, report.codes
    p_a = _p_a(fusion)
    assert zero_filled(fusion) == {p_a.name} and p_a.name in zero_padded(fusion)
    ex = tensor_execution(p_a, block_dims(fusion))
    assert ex.padding and not ex.reads_within().padding  # past K it runs; it reads within K only
    assert set(ex.reads_within().conds) == set(ex.conds) | set(ex.padding)
    source = tp.compile(fusion).cuda_source
    assert "< 1000U) ? " in source and ": __float2bfloat16_rn(0.0f));" in source


def test_whole_key_tiles_need_no_zeros():
    fusion = attention(AttentionTile(rows=128, keys=1024, key_tile=64))
    assert tp.verify(fusion).ok
    assert "__float2bfloat16_rn(0.0f)" not in tp.compile(fusion).cuda_source


def test_a_k_tail_read_from_global_memory_is_still_refused():
    """The operands of REDUCTION-K's example are loaded by plain copies, which skip the elements past K:
    no copy writes zeros there and no register statement computes them."""
    fusion, *_ = mma_sync_tile("k_tail", 100)
    assert "REDUCTION-K" in tp.verify(fusion).codes
    assert not zero_filled(fusion)
