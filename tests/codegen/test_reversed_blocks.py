"""Fusion.reversed_blocks: the kernel reads a block index reversed (gridDim.x - 1 - blockIdx.x), so the
GPU, which starts blocks in the order of their numbers, starts the highest index's work first. A
relabelling of the blocks: the proofs are those of the forward order, the kernel names the index."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tileproof as tp
from tileproof.model.fingerprint import fingerprint
from tileproof.recipes.attention import AttentionTile, attention
from support.reduction_sim import run_kernel

P = tp.ParallelType


def blocks_of_rows(reversed_blocks=()):
    with tp.Fusion("rows") as fusion:
        t0 = tp.make_contig_tensor(1, dtype=tp.float32); fusion.add_input(t0)
        t1 = tp.neg(t0); fusion.add_output(t1)
    t1.split(0, 128)
    t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.TIDx)
    fusion.reversed_blocks = reversed_blocks
    return fusion


def code_lines(source: str) -> list[str]:
    return [re.sub(r"//.*", "", line) for line in source.splitlines()]


def test_a_reversed_block_index_is_named_once_and_read_by_that_name():
    kernel = tp.compile(blocks_of_rows((P.BIDx,)))
    lines = code_lines(kernel.cuda_source)
    (defined,) = [line for line in lines if "blockIdx.x" in line]
    assert "tp_block_x = gridDim.x - 1u - blockIdx.x" in defined
    assert sum("tp_block_x" in line for line in lines) > 1
    x = np.arange(1000, dtype=np.float32)  # the IR is the forward order's: the relabelling is C++'s alone
    (out,) = run_kernel(kernel.ir, kernel.fusion, [x], {"T0_0": 1000})
    np.testing.assert_array_equal(out, -x)


def test_the_forward_order_is_unchanged_and_the_fingerprints_differ():
    forward = tp.compile(blocks_of_rows())
    assert "tp_block" not in forward.cuda_source
    assert fingerprint(blocks_of_rows(), "sm_90a") != fingerprint(blocks_of_rows((P.BIDx,)), "sm_90a")


def test_only_block_types_can_be_reversed():
    fusion = blocks_of_rows()
    with pytest.raises(tp.ScheduleError, match="tuple of block types"):
        fusion.reversed_blocks = (P.TIDx,)
    with pytest.raises(tp.ScheduleError, match="tuple of block types"):
        fusion.reversed_blocks = P.BIDx


def test_reversed_blocks_in_clusters_are_refused_with_the_reason():
    fusion = blocks_of_rows((P.BIDx,))
    fusion.assume("T0_0 % 256 == 0")
    fusion.cluster_dims = (2, 1, 1)
    (d,) = [d for d in tp.verify(fusion).errors if d.code == "LOWERING-SUPPORTED"]
    assert "ranks are the GPU's numbering" in d.message and d.counterexample == {"cluster_blocks": 2}


def test_heaviest_first_attention_reverses_its_row_tiles_only_without_a_persistent_grid():
    tile = AttentionTile(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=2, causal=True)
    options = dict(warpgroups=2, stages=2, producer=True, registers=(24, 240))
    fusion = attention(tile, heaviest_first=True, **options)
    assert fusion.reversed_blocks == (P.BIDx,)
    kernel = tp.compile(fusion)
    assert not [line for line in code_lines(kernel.cuda_source) if "blockIdx.x" in line and "tp_block_x =" not in line]
    with pytest.raises(tp.ScheduleError, match="persistent"):
        attention(tile, heaviest_first=True, persistent=4, **options)
    assert attention(tile, **options).reversed_blocks == (P.BIDx,)  # a causal tile's default
    assert attention(tile, persistent=4, **options).reversed_blocks == ()
    assert attention(tile, heaviest_first=False, **options).reversed_blocks == ()
    plain = AttentionTile(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=2)
    assert attention(plain, **options).reversed_blocks == ()
