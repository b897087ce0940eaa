"""The fuzzer's attention family (tests/support/attention_gen.py): its draws are reproducible and
cover every mutation and out-of-range parameter, parameters out of range are refused with
tp.ScheduleError, both verdicts occur, every rejection names its rule with a counterexample, and
the accepted draws compile for sm_90a (the GPU run: benchmarks/fuzz.py --families attention --run,
and tests/gpu/test_fuzz_attention.py)."""

from __future__ import annotations

import dataclasses
import re

import fuzz  # benchmarks/fuzz.py (benchmarks/ is on pytest's pythonpath)
import pytest
import tileproof as tp
from support import attention_gen
from support.forked import forked_map
from support.attention_gen import MUTATIONS, RECIPES, Parameter, Recipe, attention_case
from tileproof.recipes.attention import AttentionTile, attention, one_tile_attention

DRAWS = range(90)  # enough to draw every mutation once, and causal tiles with row and key tails
VERIFIED = range(24)  # verified, and compiled where accepted: the CI budget
UNDECIDED = "could not prove "  # verifier/findings.undecided: no model, so no counterexample


def test_draws_are_reproducible_and_cover_the_mutations():
    cases = [attention_case(seed) for seed in DRAWS]
    assert [repr(c) for c in cases] == [repr(attention_case(seed)) for seed in DRAWS]
    assert not [c.api_bugs for c in cases if c.api_bugs]
    drawn = {m for c in cases for m in c.mutations}
    assert drawn == set(MUTATIONS), sorted(set(MUTATIONS) - drawn)
    assert {c.recipe for c in cases} == set(RECIPES)
    joined = " ".join(repr(c) for c in cases)
    for part in ("head_dim=128", "scale=None", "group=2", "key_tile=", "stages=3", "stages=4", "producer=True",
                 "registers=(", "warpgroups=2", "masked=True", "mask causal", "mask random", "mask bias",
                 "causal=True", "skip_masked_tiles=False", "lse=True", "in_place=True", "head_dim=256"):
        assert part in joined, part
    causal = [c.tile for c in cases if c.tile.causal]
    assert all(t.rows <= t.keys for t in causal) and any(t.rows == t.keys for t in causal)
    assert any(t.rows < t.keys for t in causal) and any(t.rows % 64 for t in causal)
    assert any(t.keys % t.key_tile for t in causal)
    assert any(c.tile.scale is not None for c in cases) and any(not c.mutations for c in cases)


def test_draws_include_the_intra_warpgroup_overlap():
    """overlap=True needs a producer and O in place (rarer draws): among the first 400, with and without
    causal masks and ping-pong, and more than one key tile."""
    wanted = {"causal": lambda c: c.tile.causal, "not causal": lambda c: not c.tile.causal,
              "key tiles": lambda c: c.tile.keys > c.tile.key_tile, "ping-pong": lambda c: "ping_pong=True" in repr(c),
              "no ping-pong": lambda c: "ping_pong=False" in repr(c)}
    for case in map(attention_case, range(400)):
        if "overlap=True" in repr(case):
            wanted = {name: f for name, f in wanted.items() if not f(case)}
        if not wanted:
            break
    assert not wanted, f"no overlap draw with: {', '.join(wanted)}"


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_every_parameter_and_option_out_of_range_is_refused(recipe, monkeypatch):
    monkeypatch.setattr(attention_gen, "OUT_OF_RANGE_RATE", 1.0)
    monkeypatch.setattr(attention_gen, "MUTATION_RATE", 0.0)
    cases = [attention_case(seed, recipe) for seed in range(160)]  # each of 18 parameters and options out of range
    assert not [c.api_bugs for c in cases if c.api_bugs]
    refused = {step.split("=")[0] for c in cases for step in c.steps[1:] if step.endswith("refused (ScheduleError)")}
    assert refused == {p.name for p in RECIPES[recipe].parameters + RECIPES[recipe].options}


def test_a_parameter_the_recipe_builds_though_drawn_out_of_range_is_an_api_bug(monkeypatch):
    """The harness itself: a range that says 128 rows are out of range, when the recipe builds them."""
    lenient = (Parameter("rows", lambda rng, _: 64, lambda rng, _: 128),)
    monkeypatch.setitem(attention_gen.RECIPES, "lenient", Recipe(one_tile_attention, AttentionTile, lenient))
    monkeypatch.setattr(attention_gen, "OUT_OF_RANGE_RATE", 1.0)
    monkeypatch.setattr(attention_gen, "_small_enough", lambda params: True)
    case = attention_case(0, "lenient")
    assert case.api_bugs and "rows=128" in case.api_bugs[0] and "did not raise" in case.api_bugs[0], case.api_bugs


def test_a_mutation_the_api_refuses_is_recorded_and_any_other_exception_is_an_api_bug(monkeypatch):
    def refused(rng, roles):
        raise tp.ScheduleError("split: factor must be a positive int")

    def crashed(rng, roles):
        raise KeyError("T3")

    monkeypatch.setattr(attention_gen, "MUTATION_RATE", 1.0)
    monkeypatch.setattr(attention_gen, "MUTATIONS", {"refused": refused})
    case = attention_case(0)
    assert case.mutations[0] == "refused" and "refused: refused (split: factor" in repr(case) and not case.api_bugs
    monkeypatch.setattr(attention_gen, "MUTATIONS", {"crashed": crashed})
    case = attention_case(0)
    assert case.api_bugs and "crashed raised KeyError" in case.api_bugs[0], case.api_bugs


def _verdict(seed: int):
    """(case, report, its kernel's CUDA source where accepted) of one draw; the case without its
    fusion, which stays in the process that verified and compiled it."""
    case = attention_case(seed)
    report = tp.verify(case.fusion, case.target)
    source = tp.compile(case.fusion, case.target).cuda_source if report.ok else None
    return dataclasses.replace(case, fusion=None), report, source


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """_verdict of each draw of VERIFIED, in two processes (CI's two cores)."""
    with pytest.MonkeyPatch.context() as mp:  # compile into a fresh cache, as fuzz.py does
        mp.setenv("TILEPROOF_CACHE_DIR", str(tmp_path_factory.mktemp("fuzz-attention-cache")))
        return forked_map(_verdict, VERIFIED)


def test_both_verdicts_occur_and_the_mutations_are_left_to_the_verifier(verdicts):
    accepted = [c for c, report, _ in verdicts if report.ok]
    rejected = [c for c, report, _ in verdicts if not report.ok]
    assert [c for c in accepted if c.mutations] and [c for c in rejected if c.mutations]
    assert {c.recipe for c in accepted if not c.mutations} == set(RECIPES)


def test_rejections_name_their_rule_with_a_counterexample(verdicts):
    for case, report, _ in verdicts:
        assert not [d for d in report.diagnostics if d.internal], repr(case)
        if report.ok:
            continue
        assert report.codes, repr(case)
        bare = [d.code for d in report.errors if not d.counterexample and not d.message.startswith(UNDECIDED)]
        assert not bare, (bare, repr(case))


def test_the_accepted_draws_compile_for_sm_90a(verdicts):
    for case, report, source in verdicts:
        if report.ok:
            assert source.count("wgmma.mma_async") >= 2, repr(case)  # both products


def test_the_fuzzer_draws_the_family_only_when_named():
    named = [fuzz.draw_case(0, i, ("attention",)) for i in range(3)]
    assert {family for family, _, _ in named} == {"attention"}
    assert all(isinstance(case, attention_gen.AttentionCase) and target == "sm_90a" for _, target, case in named)
    assert "attention" not in {fuzz.draw_case(0, i)[0] for i in range(40)}  # the default mix keeps its draws
    assert fuzz.results_variant(("attention",)) == "attention"
    assert fuzz.results_variant(("wgmma", "attention")) == "wgmma-attention"


@pytest.mark.parametrize("product", [0, 1], ids=["scores", "values"])
def test_an_mma_k_loop_on_tidz_is_rejected(product):
    """Found by the attention family's neighbourhood (accepted, then tp.compile raised an internal
    error): an MmaOp's K-step loop across warpgroups would need their accumulators combined."""
    fusion = one_tile_attention(AttentionTile(rows=64))
    mma = attention_gen.roles(fusion).products[product]  # [Z, G, Mo, K steps, 64, N, 16]
    assert mma.axis(3).is_reduction and mma.axis(3).static_extent == 4
    mma.axis(3).parallelize(tp.ParallelType.TIDz)  # the K steps across warpgroups
    errors = [d for d in tp.verify(fusion).errors if d.code == "REDUCTION-PARALLEL"]
    assert errors and "is an MmaOp" in errors[0].message and errors[0].tensor == mma.name


def test_p_inlined_into_the_second_products_instruction_is_rejected():
    """Found by the attention family's neighbourhood (accepted, then tp.compile raised an internal
    error): P's A fragment inlined at 6 shares the second product's instruction (Mma) loop."""
    fusion = attention(AttentionTile(rows=128, keys=128, key_tile=64))
    (p_a,) = attention_gen.roles(fusion).register_operands  # [Z, G, Mo, KT, K steps, 1, TIDy, TIDx, v]
    assert p_a.compute_at == 4
    p_a.inline_at(6)
    errors = [d for d in tp.verify(fusion).errors if d.code == "LOWERING-SUPPORTED"]
    assert errors and "instruction loop" in errors[0].message and errors[0].counterexample["axis"] == 5


class _Pick:
    """An rng whose choices are the named skip count, then the named unmasked count (the mutation
    draws one of _skip_counts' items, then one of _unmasked_counts')."""

    def __init__(self, *names):
        self.names = list(names)

    def choice(self, items):
        name = self.names.pop(0)
        return next(item for item in items if item[0] == name)


@pytest.mark.parametrize("count, rejected", [
    ("the recipe's", False), ("one tile more", False), ("every tile", False), ("one tile short", True),
    ("one warpgroup's rows", True), ("top-left aligned (no N - M)", True), ("the block's first row", True),
    ("none", True)])
def test_a_drawn_skip_count_is_accepted_exactly_when_it_covers_every_kept_key(count, rejected):
    """The skip_count mutation on a causal tile computing every tile: counts as long as the recipe's or
    longer are exact; a shorter one drops kept keys of some block and ONLINE-SKIP says where."""
    tile, options = AttentionTile(rows=200, keys=500, key_tile=64, causal=True), {"warpgroups": 2}
    _drawn_counts_verdict(tile, options, count, "no", rejected)


@pytest.mark.parametrize("count, rejected", [("the recipe's", False), ("one tile short", True),
                                             ("the block's first row", True), ("every tile", False)])
def test_a_drawn_skip_count_of_a_causal_persistent_grid_reads_the_row_tile_loop(count, rejected):
    """The same mutation on a causal persistent grid (2 heads, 4 blocks each over their 7 row tiles):
    the counts read the row-tile loop's index (TensorView.loop_index), the recipe's accepted, the
    short ones refused."""
    tile = AttentionTile(rows=800, keys=900, key_tile=128, head_dim=64, value_dim=64, group=2, causal=True)
    options = {"warpgroups": 1, "stages": 2, "producer": True, "persistent": 8}
    _drawn_counts_verdict(tile, options, count, "the recipe's unmasked", rejected)


@pytest.mark.parametrize("unmasked, rejected", [
    ("the recipe's unmasked", False), ("zero unmasked", False), ("one tile fewer unmasked", False),
    ("one tile past the diagonal unmasked", True), ("the last row's unmasked", True), ("every tile unmasked", True)])
def test_a_drawn_unmasked_count_is_accepted_exactly_when_the_mask_keeps_those_tiles_whole(unmasked, rejected):
    """The unmasked counts the skip_count mutation draws beside the recipe's trip count: the recipe's,
    0 and one tile fewer (4 - 1 for block 0 here, N - M = 300) are exact, and the longer ones compute
    without the mask a tile it does not keep whole; ONLINE-SKIP says where (a count below 0:
    tests/rules/test_online_skip.py)."""
    tile, options = AttentionTile(rows=200, keys=500, key_tile=64, causal=True), {"warpgroups": 2}
    _drawn_counts_verdict(tile, options, "the recipe's", unmasked, rejected)


def _drawn_counts_verdict(tile, options, count: str, unmasked: str, rejected: bool) -> None:
    """The skip_count mutation drawing the named trip and unmasked counts on a causal tile computing
    every tile: accepted, or refused by ONLINE-SKIP alone with a counterexample."""
    fusion = attention(tile, skip_masked_tiles=False, **options)
    done = MUTATIONS["skip_count"](_Pick(count, unmasked), attention_gen.roles(fusion, tile, options))
    assert count in done and unmasked in done
    report = tp.verify(fusion)
    assert report.ok is not rejected, (count, unmasked, report.codes)
    if rejected:
        assert report.codes == ["ONLINE-SKIP"] and report.errors[0].counterexample, report.errors[0].message


def test_draws_include_a_persistent_grid():
    """persistent=B among the first 100 draws, at several block counts, causal ones a multiple of the
    heads (each head's row tiles on B / heads blocks)."""
    drawn = [c for c in map(attention_case, range(100)) if re.search(r"persistent=\d", repr(c))]
    assert len({re.search(r"persistent=(\d+)", repr(c)).group(1) for c in drawn}) > 2
    causal = [c for c in drawn if c.tile.causal]
    built = [c for c in causal if c.fusion is not None]
    assert built and all(int(re.search(r"persistent=(\d+)", repr(c)).group(1)) % (c.tile.batch * c.tile.group) == 0
                         for c in built)
