"""ONLINE-SKIP and skip_masked (model/online.py, execution/skip.py): an online max's loop over tiles
that a block ends at its trip count, where the mask drops every later tile. The exact count (and a
larger one, clamped to the loop) is proved; a count one tile short, a block with no iteration, a
mask that is not a comparison of indices, a masked value that is not -inf and terms that are not 0
there are refused, the z3 ones with a counterexample; so is an unmasked count (the iterations computed
without the mask) one tile past the diagonal. tests/codegen/test_codegen_online_skip.py
runs the kernels on the CPU; tests/recipes/test_causal_attention.py the causal attention recipe."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.model.expr import var
from tileproof.model.fingerprint import fingerprint
from tileproof.rule_examples import masked_logsumexp

CODE = "ONLINE-SKIP"
# masked_logsumexp's defaults: 96 queries, the last of 256 keys (offset 160), 32 rows a block, tiles of 64
LAST_ROW = 31 + 160


def _skipping(name: str, extra: int = 1, unmasked: int | None = None, **kwargs):
    """masked_logsumexp whose loop ends after the tile of block bx's last row's last kept key, plus `extra` - 1;
    with `unmasked`, the tiles before the one of block bx's first row's last kept key, plus `unmasked`, are
    computed without the mask."""
    fusion, x, keep, m, l, lse = masked_logsumexp(name, **kwargs)
    m.skip_masked(keep, lambda bx, by, bz: (bx * 32 + LAST_ROW) // 64 + extra,
                  unmasked=None if unmasked is None else lambda bx, by, bz: (bx * 32 + 161) // 64 + unmasked)
    return fusion


def _errors(fusion):
    report = tp.verify(fusion)
    return [d for d in report.errors if d.code == CODE], report


def test_the_exact_trip_count_is_proved_and_bounds_the_loop_per_block():
    fusion = _skipping("exact")
    errors, report = _errors(fusion)
    assert report.ok, [d.message for d in report.errors]
    source = tp.compile(fusion).cuda_source
    loop = next(line for line in source.splitlines() if "for (" in line and "T14 axis 2" in line)
    assert "blockIdx.x" in loop and "min(" in loop and "max(" not in loop  # min(4, the block's count), from blockIdx.x


def test_a_trip_count_one_tile_short_is_refused_with_the_point_the_mask_keeps():
    (e,), _ = _errors(_skipping("short", extra=0))
    assert "a score the fusion keeps is dropped" in e.message
    v = e.counterexample
    row, key = v["T5 axis 0"], v["T5 axis 1"]
    assert key <= row + 160  # the mask keeps it
    assert key // 64 == v["iteration"] >= v["trip count"] == (v["blockIdx.x"] * 32 + LAST_ROW) // 64
    assert row // 32 == v["blockIdx.x"]


def test_a_trip_count_past_the_loop_is_clamped_to_it():
    fusion = _skipping("loose", extra=3)
    assert tp.verify(fusion).ok
    assert "4U" in next(line for line in tp.compile(fusion).cuda_source.splitlines() if "T14 axis 2" in line)


def test_the_unmasked_count_is_proved_and_versions_the_mask_s_statements():
    fusion = _skipping("unmasked", unmasked=0)
    errors, report = _errors(fusion)
    assert report.ok, [d.message for d in report.errors]
    body = tp.compile(fusion).cuda_source.split('extern "C"')[1]
    assert body.count("// a key tile the mask keeps whole: no mask") == 1  # one switch of versions a tile
    assert body.count(" = where(") == 2 and body.count("the mask keeps this tile whole") == 1  # the where, its copy


def test_an_unmasked_count_one_tile_past_the_diagonal_is_refused_with_the_point_the_mask_drops():
    (e,), _ = _errors(_skipping("unmasked_long", unmasked=1))
    assert "a score the fusion masks is kept" in e.message
    v = e.counterexample
    row, key = v["T5 axis 0"], v["T5 axis 1"]
    assert key > row + 160  # the mask drops it
    assert key // 64 == v["iteration"] < v["unmasked"] == (v["blockIdx.x"] * 32 + 161) // 64 + 1
    assert row // 32 == v["blockIdx.x"]


def test_an_unmasked_count_below_zero_is_refused_it_would_wrap_past_every_iteration():
    """(b 32 + 161) // 64 - 3 is -1 for block 0: unsigned, the kernel's count would be 2^64 - 1."""
    (e,), _ = _errors(_skipping("unmasked_negative", unmasked=-3))
    assert "unsigned integers" in e.message and e.counterexample["unmasked"] < 0
    assert e.counterexample["blockIdx.x"] == 0


def test_a_block_that_runs_no_iteration_is_refused():
    (e,), _ = _errors(_skipping("none", extra=-2))
    assert "runs no iteration" in e.message and e.counterexample["trip count"] <= 0


def test_a_mask_read_from_data_is_refused():
    (e,), _ = _errors(_skipping("data_mask", keep=lambda key_b, query_b, x: tp.gt(x, 0.0)))
    assert "no affine comparison of indices" in e.message and "is a fusion input" in e.message


def test_a_masked_value_that_is_not_minus_inf_is_refused():
    (e,), _ = _errors(_skipping("zero_fill", fill=0.0))
    assert "is not where(" in e.message and "could have grown the max" in e.message


def test_terms_that_are_not_zero_where_the_scores_are_minus_inf_are_refused():
    # exp(s - m) s: ONLINE-RESCALE's form (exp2(a m) times a value m does not change), but 0 x -inf is NaN
    (e,), report = _errors(_skipping("times_score", term=lambda s, m_b: tp.mul(tp.exp(tp.sub(s, m_b)), s)))
    assert report.codes == [CODE]
    assert "are not 0 where" in e.message and "through 2 operands" in e.message


def test_skip_masked_checks_its_arguments():
    fusion, x, keep, m, l, lse = masked_logsumexp("arguments")
    with pytest.raises(tp.ScheduleError, match="not an online max"):
        l.skip_masked(keep, lambda bx, by, bz: 1)
    with pytest.raises(tp.ScheduleError, match="must be a bool tensor"):
        m.skip_masked(x, lambda bx, by, bz: 1)
    with pytest.raises(tp.ScheduleError, match="must be a function of the block indices"):
        m.skip_masked(keep, 3)
    with pytest.raises(tp.ScheduleError, match="reads threadIdx.x"):
        m.skip_masked(keep, lambda bx, by, bz: var("threadIdx.x") + 1)
    with pytest.raises(tp.ScheduleError, match="unmasked must be a function of the block indices"):
        m.skip_masked(keep, lambda bx, by, bz: bx + 1, unmasked=2)
    m.skip_masked(keep, lambda bx, by, bz: bx + 1)
    with pytest.raises(tp.ScheduleError, match="already"):
        m.skip_masked(keep, lambda bx, by, bz: bx + 1)


def test_the_trip_count_is_part_of_the_fingerprint():
    assert fingerprint(_skipping("a"), "sm_90a") != fingerprint(_skipping("a", extra=2), "sm_90a")
    assert fingerprint(_skipping("a"), "sm_90a") != fingerprint(masked_logsumexp("a")[0], "sm_90a")
    assert fingerprint(_skipping("a"), "sm_90a") != fingerprint(_skipping("a", unmasked=0), "sm_90a")


def test_a_count_that_divides_a_negative_number_is_refused():
    """The kernel divides unsigned integers, z3 as floor: a negative dividend would differ."""
    fusion, x, keep, m, l, lse = masked_logsumexp("negative")
    m.skip_masked(keep, lambda bx, by, bz: (bx * 32 - 40) // 64 + 4)  # -40 // 64 + 4 = 3 for block 0
    (e,), _ = _errors(fusion)
    assert "divides a negative number" in e.message and e.counterexample["blockIdx.x"] <= 1
