"""ONLINE-RESCALE and set_online (model/online.py, execution/online.py): an online max's running value
read inside its loop, and the sums it rescales, mean what the fusion means. Failing schedules
carry a counterexample (a term at three maxima, or the coefficient); passing ones compile. The
numbers are checked by tests/differential/test_differential_online.py (CPU) and
tests/gpu/test_attention.py (the online attention kernel on the GPU)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention
from tileproof.rule_examples import online_logsumexp

CODE = "ONLINE-RESCALE"


def _errors(fusion, code=CODE):
    report = tp.verify(fusion)
    return [d for d in report.errors if d.code == code], report


def test_exp_of_x_minus_the_max_is_rescaled_and_compiles():
    fusion, *_ = online_logsumexp("online_lse")
    errors, report = _errors(fusion)
    assert report.ok, report.codes
    source = tp.compile(fusion).cuda_source
    assert "exp2f((-1.4426950408889634f) * " in source  # exp(x - m): a = -log2(e)
    assert "online_delta" not in source and "tp_delta_T" in source


def test_a_product_of_exponentials_adds_their_coefficients():
    fusion, *_ = online_logsumexp("twice", term=lambda x, m_b: tp.mul(tp.exp(tp.sub(x, m_b)),
                                                                      tp.exp2(tp.mul(tp.sub(x, m_b), 3.0))))
    assert tp.verify(fusion).ok
    assert "exp2f((-4.44269504088896" in tp.compile(fusion).cuda_source  # -(3 + log2(e))


def test_a_term_that_is_not_an_exponential_of_the_max_is_refused_with_its_values():
    fusion, *_ = online_logsumexp("shifted", term=lambda x, m_b: tp.sub(tp.exp(tp.sub(x, m_b)), 0.5))
    (e,), _ = _errors(fusion)
    assert "is not exp2(a" in e.message
    values = e.counterexample
    assert values["term at max 0"] == pytest.approx(2.718282 - 0.5, abs=1e-6)
    assert values["term at max 1"] == pytest.approx(0.5)
    # no one factor maps each to the next: 0.5 / 2.218 != -0.132 / 0.5
    assert values["term at max 1"] / values["term at max 0"] != pytest.approx(values["term at max 2"] / values["term at max 1"])


def test_terms_that_grow_with_the_max_are_refused():
    fusion, *_ = online_logsumexp("grows", term=lambda x, m_b: tp.exp(tp.sub(m_b, x)))
    (e,), _ = _errors(fusion)
    assert "grow with" in e.message
    assert e.counterexample["coefficient"] == pytest.approx(1.4426950408889634)


def test_a_value_at_the_running_max_must_not_escape():
    fusion, x, m, p, l, lse = online_logsumexp("escapes")
    with fusion:
        fusion.add_output(p)
    errors, _ = _errors(fusion)
    assert any("is a fusion output" in e.message and e.tensor == p.name for e in errors)


def _logsumexp(name: str):
    """log(sum(exp(x - m))) + m over rows of 256, unscheduled: (fusion, m, p, l)."""
    with tp.Fusion(name) as fusion:
        x = tp.make_contig_concrete_tensor([32, 256])
        fusion.add_input(x)
        m = tp.max(x, 1)
        p = tp.exp(tp.sub(x, tp.broadcast(m, [False, True])))
        l = tp.sum(p, 1)
        fusion.add_output(tp.add(tp.log(l), m))
    return fusion, m, p, l


def _unfactored(name: str):
    """The online log-sum-exp with the max's tile part not rfactored: m reduces two loop axes."""
    fusion, m, _, l = _logsumexp(name)
    m.split(1, 64)
    l.split(1, 64)
    l.rfactor([2])
    return fusion, m, l


def test_an_online_max_reduces_one_loop():
    fusion, m, l = _unfactored("unfactored")
    m.set_online(rescale=[l])
    errors, _ = _errors(fusion)
    assert any("reduces 2 loop axes" in e.message and e.tensor == m.name for e in errors)


def test_a_rescaled_sum_shares_the_max_s_loop():
    """Without x's register cache the tile's max and the terms read x from global memory apart:
    the max's loop and the sum's are two loops, and the sum would be rescaled after the max's."""
    fusion, m, _, l = _logsumexp("two_loops")
    parts = []
    for r in (m, l):
        r.split(1, 64)
        parts.append(r.rfactor([2]))
    between = [t for t in fusion.tensors if not t.is_fusion_input and t.definition.name in ("broadcast", "sub", "exp")]
    for t in between:
        t.split(1, 64)
    m.set_online(rescale=[l])
    for t in parts + between:
        t.inline_at(2)
    errors, _ = _errors(fusion)
    assert any("not the loop of online max" in e.message for e in errors), [e.message for e in errors]


def test_online_attention_verifies():
    report = tp.verify(attention(AttentionTile(rows=64, keys=256, key_tile=64)))
    assert report.ok, report.codes


@pytest.mark.parametrize("misuse, match", [
    (lambda m, l, p: l.set_online(rescale=[l]), "is not a tp.max"),
    (lambda m, l, p: m.set_online(rescale=[p]), "is not a sum"),
    (lambda m, l, p: m.set_online(rescale=l), "must be a list"),
    (lambda m, l, p: m.set_online(rescale=[l, l]), "twice"),
    (lambda m, l, p: (m.set_online(rescale=[l]), m.set_online(rescale=[l])), "online already"),
    (lambda m, l, p: (m.set_online(rescale=[l]), l.rfactor([1])), "rfactor before set_online"),
])
def test_set_online_misuse_is_a_schedule_error(misuse, match):
    _, m, p, l = _logsumexp("misuse")
    l.split(1, 64)
    with pytest.raises(tp.ScheduleError, match=match):
        misuse(m, l, p)


def test_a_sum_that_does_not_read_the_max_is_not_rescaled():
    with tp.Fusion("unrelated") as fusion:
        x = tp.make_contig_concrete_tensor([32, 256])
        fusion.add_input(x)
        m = tp.max(x, 1)
        s = tp.sum(x, 1)
        fusion.add_output(tp.add(s, m))
    with pytest.raises(tp.ScheduleError, match="do not read"):
        m.set_online(rescale=[s])


def test_masked_online_attention_verifies_with_the_mask_outside_the_exponent_s_max():
    """S scale + Mask: the mask does not depend on the max, so the terms are exp2(-log2(e) m) times an
    m-free value; one_tile_attention refuses a mask."""
    fusion = attention(AttentionTile(rows=100, keys=256, key_tile=64, masked=True))
    report = tp.verify(fusion)
    assert report.ok, report.codes
    assert [t.display_name for t in fusion.inputs][-1] == "Mask"
    assert "exp2f((-1.4426950216293335f) * " in tp.compile(fusion).cuda_source
    from tileproof.recipes.attention import one_tile_attention
    with pytest.raises(tp.ScheduleError, match="unmasked"):
        one_tile_attention(AttentionTile(rows=64, keys=64, masked=True))


def test_the_log_sum_exp_after_the_loop_reads_the_final_max_and_sum():
    """attention(lse=True): m scale + ln l is computed after the loop over key tiles (a consumer of the
    online max outside its loop reads its total), laid out as the fragment's rows."""
    fusion = attention(AttentionTile(rows=100, keys=1000, key_tile=64), lse=True)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    lse = fusion.outputs[1]
    assert [str(i) for i in lse.get_loop_domain()][-2].startswith("TIDy{32}") and lse.compute_at == 0
    with pytest.raises(tp.ScheduleError, match="lse must be"):
        attention(AttentionTile(rows=64, keys=128, key_tile=64), lse="yes")


def test_an_mma_rescaled_in_place_multiplies_its_accumulators_before_each_tile_s_products():
    """attention(in_place=True): O is one MmaOp over every key tile, rescaled in place (Phase.RESCALE)
    where the store would store each accumulator element, then the wgmma fence and the tile's
    products; rows past M (a last 64-row block of 300 rows) are not rescaled."""
    fusion = attention(AttentionTile(rows=300, keys=512, key_tile=128, head_dim=128, value_dim=128), in_place=True)
    assert tp.verify(fusion).ok
    source = tp.compile(fusion).cuda_source
    rescale = source.index("(rescale)")
    assert rescale < source.index("tp_wgmma_fence();", rescale) < source.index("m64n128k16", rescale)
    assert "< 300U) {" in source[rescale - 600:rescale + 1500]


def test_an_in_place_rescale_reads_the_max_in_the_thread_that_holds_the_row():
    """The running max's row half on TIDx (not a register of each quad thread): the thread holding an
    accumulator element of row 8 does not hold the max's row 8; the report names that row."""
    fusion = attention(AttentionTile(rows=128, keys=256, key_tile=64), in_place=True)
    m = next(t for t in fusion.tensors if t.online is not None)
    m.axis(-1).parallelize(tp.ParallelType.TIDx)
    errors, _ = _errors(fusion)
    (e,) = [e for e in errors if "does not hold" in e.message]
    assert e.counterexample[f"{m.name} logical 2"] % 16 >= 8 and e.counterexample["reader threadIdx.x"] == 0


@pytest.mark.parametrize("axis", [-3, -2, -1], ids=["M", "N", "K"])
def test_an_in_place_rescaled_mma_with_an_instruction_axis_unbound_is_refused_by_mma_shape(axis):
    """Found by the fuzzer's attention family (seed 773, case 311: ONLINE-RESCALE raised AttributeError,
    a tileproof bug): O's Mma axis made serial leaves no C fragment to prove the rescale's reads over;
    the rule leaves it to MMA-SHAPE and crashes on nothing."""
    fusion = attention(AttentionTile(rows=64, keys=512, key_tile=128, head_dim=128, value_dim=192, group=6,
                                     masked=True), warpgroups=3, in_place=True)
    o = next(t for t in fusion.tensors if t.definition is not None and t.definition.macro is not None
             and t.definition.rescale_max is not None)
    o.axis(axis).parallelize(tp.ParallelType.Serial)
    report = tp.verify(fusion)
    assert not [d for d in report.diagnostics if d.internal], [d.message for d in report.diagnostics if d.internal]
    assert "MMA-SHAPE" in report.codes


def test_a_tile_max_of_partial_maxes_shares_the_loop_of_the_online_max():
    """A row's tile reduced in independent chains (rfactored twice: chains of 8, then the tile's
    max of them): each partial is read inside the loop, as the tile's max is (model/unmappable.py);
    inline_at refused the chains' consumers before."""
    fusion, m, _, l = _logsumexp("chains")
    fusion.inputs[0].cache_after()
    parts = []
    for r in (m, l):  # [rows, r(keys / 64), r(8), r(8)]: chains of 8, their tile's part, the running value
        r.split(1, 64).split(2, 8)
        parts.append(r.rfactor([3]))
        parts.append(r.rfactor([2]))
    between = [t for t in fusion.tensors if not t.is_fusion_input and t not in (m, l) + tuple(parts)
               and len(t.logical) == 2 and not t.logical[1].is_reduction]
    for t in between:
        t.split(1, 64)
    for t in fusion.tensors:
        if not t.is_fusion_input:
            t.axis(0).parallelize(tp.ParallelType.TIDx)
    m.set_online(rescale=[l])
    for t in parts + between:
        t.inline_at(2)
    for t in (m, l):
        t.inline_at(1)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    source = tp.compile(fusion).cuda_source
    assert source.count("= tp_max(") >= 3  # the chains, the tile's max of them, the running max


def test_a_score_mma_of_the_wrong_shape_is_left_to_mma_shape():
    """Found by the fuzzer's attention family (seed 78, case 71: 28 s, the proof undecided): S = Q K^T
    given mma.sync's Ampere_16_8_16 macro in a Hopper recipe. The rescale's reads are proved over the
    accumulators' C fragments, which a shape MMA-SHAPE refuses does not have: MMA-SHAPE is the rule's
    premise, and the report holds that root cause alone, at once."""
    import time

    tile = AttentionTile(rows=640, keys=1152, head_dim=64, value_dim=64, batch=6, group=3, scale=0.107,
                         key_tile=144, masked=True)
    fusion = attention(tile, stages=2, producer=True, registers=(24, 256), lse=True, in_place=True, overlap=True,
                       persistent=7)
    s = next(t for t in fusion.tensors if t.definition is not None and t.definition.macro is not None
             and t.definition.rescale_max is None)
    s.definition.set_macro(tp.MmaMacro.Ampere_16_8_16)
    start = time.process_time()
    report = tp.verify(fusion)
    assert time.process_time() - start < 15
    assert "MMA-SHAPE" in report.codes and "ONLINE-RESCALE" not in report.codes, report.codes
    assert not [d for d in report.diagnostics if d.internal]
