"""Causal attention by predicate (recipes/attention.py, AttentionTile(causal=True); issue 36): the
scores are where(j <= i + N - M, S scale, -inf) with i and j two tp.iota laid out as the C
fragment's rows and columns, no Mask input. Every configuration benchmarks/attention.py runs
verifies (stages, a warp-specialized producer, two consumer warpgroups, O rescaled in place), at
sizes that are no multiple of the tiles, M != N and grouped-query heads too; the kernel compiles
with NVRTC for sm_90a, computes the key indices in the loop over key tiles and the query indices
once per block, and reads no mask. A block skips the key tiles its mask drops whole (skip_masked_tiles,
ONLINE-SKIP): its loop over key tiles ends at its trip count in every role, the count the number of
tiles one of its rows keeps a key of. tests/gpu/test_attention.py checks its values against SDPA.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.codegen.runtime import nvrtc
from tileproof.model.expr import evaluate
from tileproof.recipes.attention import AttentionTile, attention, one_tile_attention

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import attention as B  # noqa: E402 - benchmarks/attention.py


@contextlib.contextmanager
def _no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", tp.PerformanceWarning)
        yield


def _online_configs():
    """The benchmark's online configurations but those of a fixed persistent block count (a causal
    grid's count is a multiple of the heads: its per_head ones, tests/recipes/test_persistent_attention.py)."""
    return [(name, key_tile, options) for name, key_tile, options in B.CONFIGS
            if key_tile is not None and not options.get("persistent")]


@pytest.mark.parametrize("name, key_tile, options", _online_configs(), ids=[c[0] for c in _online_configs()])
def test_every_benchmark_configuration_verifies_causal(name, key_tile, options):
    """The benchmark's causal shapes (S = 4096, head dims 128 and 64): accepted at one at least, and
    where refused, only for the shared memory its K and V stages take (as unmasked)."""
    codes = []
    for d in (128, 64):
        tile = AttentionTile(rows=4096, keys=4096, head_dim=d, value_dim=d, batch=128, key_tile=key_tile, causal=True)
        fusion = attention(tile, **B.recipe_options(options, tile.batch * tile.group))
        assert _skipping(fusion) is not None  # the masked key tiles skipped, by default
        codes.append(tp.verify(fusion).codes)
        if not codes[-1]:
            break
    assert codes[-1] == [] and all(c in ([], ["SMEM-CAPACITY"]) for c in codes), (name, codes)


def _skipping(fusion):
    """The online max that skips masked key tiles, or None."""
    return next((t for t in fusion.tensors if t.skip is not None), None)


@pytest.mark.parametrize("rows, keys, key_tile, warpgroups", [(4096, 4096, 128, 2), (1000, 3000, 64, 1),
                                                              (77, 77, 64, 1), (200, 500, 64, 2)])
def test_each_block_runs_the_key_tiles_its_rows_keep_and_no_more(rows, keys, key_tile, warpgroups):
    """The trip count of block b, min(KT, (last row + N - M) // key_tile + 1), is the number of key tiles
    holding a key one of its rows keeps: each tile it skips is masked whole (ONLINE-SKIP proves it), and
    it skips every such tile of a whole block (the last block's rows past M count as rows)."""
    fusion = attention(AttentionTile(rows=rows, keys=keys, key_tile=key_tile, causal=True), warpgroups=warpgroups)
    m = _skipping(fusion)
    per_block, tiles = 64 * warpgroups, -(-keys // key_tile)
    for b in range(-(-rows // per_block)):
        trip = min(tiles, evaluate(m.skip[1], {"blockIdx.x": b, "blockIdx.y": 0, "blockIdx.z": 0}))
        needed = max(min(tiles, (r + keys - rows) // key_tile + 1) for r in range(b * per_block, (b + 1) * per_block))
        assert trip == needed >= 1, (b, trip, needed)
    full = sum(min(tiles, evaluate(m.skip[1], {"blockIdx.x": b, "blockIdx.y": 0, "blockIdx.z": 0}))
               for b in range(-(-rows // per_block)))
    if rows == keys == 4096:  # about half the tiles: (1 + 2 + ... + 32) of 32 x 32
        assert full == 32 * 33 // 2


@pytest.mark.parametrize("skip", [True, False])
def test_every_role_s_loop_over_key_tiles_ends_at_the_block_s_trip_count(skip):
    """With a producer, both roles' loops over the key tiles (the producer's loads, the consumers'
    products) run the count computed from blockIdx.x; skip_masked_tiles=False runs all of them."""
    tile = AttentionTile(rows=320, keys=384, key_tile=128, causal=True)  # no other test's (its compile is cached)
    fusion = attention(tile, stages=2, producer=True, skip_masked_tiles=skip, heaviest_first=False)
    assert (_skipping(fusion) is not None) is skip
    assert tp.verify(fusion).ok
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tp.PerformanceWarning)  # a producer without setmaxnreg may spill
        body = tp.compile(fusion, "sm_90a").cuda_source
    body = body[body.index('extern "C"'):]
    k_tile = next(t for t in fusion.tensors if t.definition is not None and t.definition.inputs == [fusion.inputs[1]])
    m = next(t for t in fusion.tensors if t.online is not None)
    loops = [line for line in body.splitlines() if line.lstrip().startswith("for (")
             and re.search(rf"\b{k_tile.name} axis \d+, .*\b{m.name} axis", line)]
    assert len(loops) == 2  # the producer's and the consumers'
    assert all(("blockIdx.x" in line) is skip for line in loops), loops
    if not skip:
        assert all(" < 3U;" in line for line in loops)


def test_skip_masked_tiles_is_checked():
    with pytest.raises(tp.ScheduleError, match="skip_masked_tiles must be True or False"):
        attention(AttentionTile(rows=64, keys=256, key_tile=64, causal=True), skip_masked_tiles=1)


@pytest.mark.parametrize("options, match", [
    (dict(warpgroups=2.0), "warpgroups must be 1 to 4"),  # found by the fuzzer: 2.0 == 2 passed, then a TypeError
    (dict(warpgroups=True), "warpgroups must be 1 to 4"),
    (dict(stages=2, producer=1), "producer must be True or False"),
    (dict(stages=2.0), "stages must be an int"),
])
def test_attention_options_are_checked_at_the_door(options, match):
    with pytest.raises(tp.ScheduleError, match=match):
        attention(AttentionTile(rows=128, keys=256, key_tile=64, causal=True), **options)


@pytest.mark.parametrize("keys", [dict(keys=64), dict(keys=1456, key_tile=208, causal=True)])
def test_a_tile_of_one_row_is_refused_at_the_door(keys):
    """Found by the fuzzer (seed 774, case 337): rows=1 makes Q's row axis a broadcast, and attention()
    failed in the row max's rfactor (one_tile_attention built a schedule the verifier rejects)."""
    with pytest.raises(tp.ScheduleError, match="rows must be at least 2"):
        AttentionTile(rows=1, **keys)
    assert AttentionTile(rows=2, **keys).rows == 2


@pytest.mark.parametrize("masked", [False, True])
def test_one_key_is_refused_at_the_door(masked):
    """Found by the fuzzer (seed 62, case 425, a generator error): keys=1 makes the key axis a broadcast,
    and attention() failed in the row max (tp.max over a broadcast axis)."""
    with pytest.raises(tp.ScheduleError, match="keys must be at least 2"):
        AttentionTile(rows=320, keys=1, key_tile=32, masked=masked)
    attention(AttentionTile(rows=320, keys=2, key_tile=32, masked=masked))


@pytest.mark.parametrize("tile, options", [
    (AttentionTile(rows=100, keys=300, key_tile=64, causal=True), {}),
    (AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2, causal=True),
     {"stages": 2, "producer": True}),
    (AttentionTile(rows=200, keys=500, key_tile=64, batch=3, group=4, causal=True),
     {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240), "in_place": True}),
    (AttentionTile(rows=77, keys=77, key_tile=64, causal=True), {"stages": 3, "lse": True}),
], ids=["tail", "gqa_ws", "wg2_ip", "lse"])
def test_causal_attention_with_tails_verifies_and_compiles_without_a_mask(tile, options):
    fusion = attention(tile, **options)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    assert [t.display_name for t in fusion.inputs] == ["Q", "K", "V"]
    with _no_warning():  # at tails too: the softmax's register arithmetic runs at its holes (unread_holes)
        source = tp.compile(fusion, "sm_90a").cuda_source
    assert nvrtc.compile_to_cubin(source, "sm_90a", nvrtc.cuda_include_dir())[:4] == b"\x7fELF"
    query, key = (t for t in fusion.tensors if t.definition is not None and not t.definition.inputs)
    assert f"= iota({tile.rows}, {tile.keys - tile.rows}, 1)" in source and f"= iota({tile.keys}, 0, 1)" in source
    body = source[source.index('extern "C"'):]
    k_tile = next(t for t in fusion.tensors if t.definition is not None and t.definition.inputs == [fusion.inputs[1]])
    loops = [k for k, line in enumerate(body.splitlines()) if line.lstrip().startswith("for (")
             and f"{k_tile.name} axis" in line]  # over the key tiles: the producer's first where it has one
    lines = [k for k, line in enumerate(body.splitlines()) if f"// {query.name} = iota(" in line
             or f"// {key.name} = iota(" in line]
    assert lines[0] < loops[-1] < lines[1]  # the queries before the consumers' loop over key tiles, the keys in it
    assert "(-__int_as_float(0x7f800000))" in body[body.index(" = where("):]  # -inf where j > i + N - M


def test_the_queries_are_the_fragment_s_rows_and_the_keys_its_columns():
    fusion = attention(AttentionTile(rows=128, keys=256, key_tile=128, causal=True), warpgroups=2)
    query, key = (t for t in fusion.tensors if t.definition is not None and not t.definition.inputs)
    assert [i.parallel_type.value for i in query.get_loop_domain()] == ["BIDx", "TIDz", "TIDy", "Serial"]
    assert [str(i.extent) for i in query.get_loop_domain()][-2:] == ["32", "2"]  # rows 16 w + 8 v2 + g
    assert [i.parallel_type.value for i in key.get_loop_domain()] == ["Serial", "TIDx", "Serial"]
    assert [str(i.extent) for i in key.get_loop_domain()] == ["2", "4", "32"]  # columns 8 v4 + 2 TIDx + v1


def test_a_key_index_in_the_wrong_threads_is_a_visibility_error(monkeypatch):
    """The verifier proves each thread computes the key indices it reads: the columns spread over
    TIDx{2} by twos (not the fragment's 2 TIDx + v1) are read in threads that did not write them."""
    import tileproof.recipes.attention as A

    def misplaced(query, key, n, warpgroups, per_head=None):
        A._fragment_rows(query, 0)
        query.axis(0).parallelize(tp.ParallelType.BIDx)
        key.split(0, n).split(1, 2).split(1, 4).merge(2).reorder({1: 2}).split(1, 4)
        key.axis(1).parallelize(tp.ParallelType.TIDx)
        query.inline_at(1)
        key.inline_at(1)
    monkeypatch.setattr(A, "_causal_indices", misplaced)
    report = tp.verify(A.attention(AttentionTile(rows=100, keys=200, key_tile=64, causal=True)))
    assert report.codes == ["THREAD-VISIBILITY"]


@pytest.mark.parametrize("bad, match", [
    (dict(rows=300, keys=200, key_tile=64, causal=True), "causal needs rows <= keys"),
    (dict(rows=64, keys=256, key_tile=64, causal=True, masked=True), "causal and masked exclude each other"),
    (dict(rows=64, keys=256, key_tile=64, causal=1), "causal must be True or False"),
])
def test_causal_tiles_refuse_what_the_recipe_cannot_run(bad, match):
    with pytest.raises(tp.ScheduleError, match=match):
        AttentionTile(**bad)


def test_one_tile_attention_refuses_a_causal_tile():
    with pytest.raises(tp.ScheduleError, match="causal"):
        one_tile_attention(AttentionTile(rows=64, keys=64, causal=True))
