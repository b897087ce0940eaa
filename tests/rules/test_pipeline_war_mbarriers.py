"""Pipelined(uses_mbarrier_for_war=True) (execution/pipeline.py): one group of threads loads and reads
a TMA circular buffer, and a stage is refilled after each warpgroup released it on an empty
mbarrier (after its wgmma.wait_group; each thread after its reads where threads read it) instead
of after a __syncthreads. PIPELINE-RAW and
PIPELINE-WAR prove it as a warp-specialized protocol whose producer is the issuing thread, and
refute the mutations that break it."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.codegen.ir import walk
from tileproof.execution.barriers import Async, Sync, TmaWait, statement_paths
from tileproof.execution.pipeline import Prefetched, Prologue, timeline
from tileproof.execution.warp_roles import StageEmptyWait, StageRelease
from tileproof.execution.barriers import WgmmaWait
from tileproof.recipes import GridOrder, HopperGemmParams, HopperTile, Operand, TmaPipeline, hopper_gemm, tile_multiples
from tileproof.execution.nest import placed_nest
from tileproof.verifier.analysis.pipeline import prove_complete, prove_free
from tileproof.verifier.solver import Verdict

from support.tma_exp_tiles import exp_tiles as tma_exp_tiles


P = tp.ParallelType


def _fusion(stages=4, prefetch=2, block=(128, 256)):
    params = HopperGemmParams(tile=HopperTile(m=block[0], n=block[1]),
                              pipeline=TmaPipeline(stages=stages, prefetch=prefetch, war_mbarriers=True))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=block[1])


def _nest(**kw):
    return placed_nest(_fusion(**kw).snapshot())


def _loop(nest):
    return next(n for n in walk(nest.tree) if any(isinstance(c, Prefetched) for c in getattr(n, "body", ())))


def _timelines(nest, specialized=True):
    stmts = statement_paths(nest.tree, nest.hazards)
    out = {}
    for _, wa, wp in stmts:
        if wa.kind is Async.TMA_LOAD and not any(isinstance(s[k], Prologue) for s, k in wp):
            for _, ra, rp in stmts:
                if wa.writes in ra.reads:
                    out[wa.writes] = timeline(wa.writes, "T2", wp, rp, nest.hazards, wa.barrier)
    assert set(out) == {"T4", "T5"} and all(t.specialized == specialized for t in out.values())
    return out


@pytest.mark.parametrize("stages, prefetch, lag", [(4, 2, 1), (4, 3, 0), (2, 1, 0), (4, 0, 1)])
def test_the_refill_waits_for_the_release_instead_of_a_barrier(stages, prefetch, lag):
    nest = _nest(stages=stages, prefetch=prefetch, block=(128, 128))
    body = _loop(nest).body
    assert not [n for n in walk(nest.tree) if isinstance(n, Sync)]  # no __syncthreads in or after the loop
    refill = next(n for n in body if isinstance(n, Prefetched))
    assert isinstance(refill.body[0], StageEmptyWait) and refill.body[0].barrier == "tp_empty_T4"
    prologue = next(n for n in walk(nest.tree) if isinstance(n, Prologue))
    assert isinstance(prologue.body[0], StageEmptyWait)  # the prologue's loads count their stages' phases too
    kinds = [type(n).__name__ for n in body]
    assert kinds[-2:] == ["WgmmaWait", "StageRelease"] and body[-1].lag == lag
    # without prefetch the refill (of this very iteration) comes before its own full wait
    assert (kinds.index("Prefetched") < kinds.index("TmaWait")) == (prefetch == 0)
    assert [w.pending for w in walk(body) if isinstance(w, WgmmaWait)] == [lag]
    for tl in _timelines(nest).values():
        assert prove_complete(tl).proved and prove_free(tl).proved


def test_a_refill_without_its_empty_wait_is_refuted():
    nest = _nest()
    refill = next(n for n in _loop(nest).body if isinstance(n, Prefetched))
    refill.body[:] = [n for n in refill.body if not isinstance(n, StageEmptyWait)]
    for tl in _timelines(nest, specialized=False).values():  # a plain TMA pipeline, with no barrier either
        out = prove_free(tl)
        assert out.status is Verdict.COUNTEREXAMPLE and out.model["read iteration"] == 0


def test_a_prologue_load_without_its_empty_wait_is_refuted():
    """Its stage's first refill would then wait for the phase the skipped wait was for, which has
    already passed: the refill would overwrite a stage still read."""
    nest = _nest()
    prologue = next(n for n in walk(nest.tree) if isinstance(n, Prologue))
    prologue.body[:] = [n for n in prologue.body if not isinstance(n, StageEmptyWait)]
    for tl in _timelines(nest).values():
        assert prove_free(tl).status is Verdict.COUNTEREXAMPLE


def test_a_release_before_the_wgmma_wait_is_refuted():
    nest = _nest()
    body = _loop(nest).body
    release = next(n for n in body if isinstance(n, StageRelease))
    body.remove(release)
    body.insert(next(k for k, n in enumerate(body) if isinstance(n, WgmmaWait)), release)
    for tl in _timelines(nest).values():
        out = prove_free(tl)
        assert out.status is Verdict.COUNTEREXAMPLE and out.values["reads done at"] > out.values["release position"]


def test_a_read_before_the_full_wait_is_refuted():
    nest = _nest()
    body = _loop(nest).body
    body[:] = [n for n in body if not isinstance(n, TmaWait)]
    for tl in _timelines(nest).values():
        assert prove_complete(tl).status is Verdict.COUNTEREXAMPLE


def test_the_schedule_verifies_and_lowers_without_barriers_in_the_loop():
    from tileproof.codegen.lower import lower
    from tileproof.codegen.emit import emit

    fusion = _fusion()
    assert tp.verify(fusion).ok
    src = emit(lower(fusion.snapshot(), tp.get_target("sm_90a")).kernel, cuda_headers=False)
    k = re.search(r"for \(unsigned (?:long long )?(i\d+) = 0; \1 < \(\(s_K", src)
    loop = src[k.start():src.index("tp_wgmma_wait<0>")]
    assert "__syncthreads" not in loop and "bar.sync" not in loop
    assert "tp_mbar_init(&tp_empty_T4[s], 2u);" in src  # one arrival per warpgroup
    refill = loop[loop.index("// the copies of iteration"):loop.index("// T4 = TMA(T0)")]
    assert "if ((threadIdx.x == 0ULL && threadIdx.y == 0ULL)) {" in refill  # the issuing thread waits, alone
    assert "tp_mbar_wait(&tp_empty_T4[tp_s]" in refill and f"(unsigned)(({k.group(1)} + 2) % 4)" in refill


def test_the_issuing_thread_alone_waits_where_the_copies_sit_in_a_loop_of_their_own():
    """A's boxes of 8 rows made a serial loop of 16 copies inside the circular loop: the empty
    wait before them is still the issuing thread's, and the full mbarrier counts 16 arrivals."""
    from tileproof.codegen.lower import lower

    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, war_mbarriers=True), grid=GridOrder(group=8))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)
    next(t for t in fusion.tensors if t.name == "T4").axis(4).parallelize(P.Serial)  # Bulk{16} -> 16 copies
    assert tp.verify(fusion).ok
    st = lower(fusion.snapshot(), tp.get_target("sm_90a"))
    assert {b.name: b.count for b in st.mbarriers} == {"tp_bar_T4": 16, "tp_bar_T5": 1, "tp_empty_T4": 2}
    waits = [n for n in walk(st.kernel.body) if isinstance(n, StageEmptyWait)]
    assert waits and all(len(w.guard) == 1 and w.guard[0] for w in waits)


def test_mbarrier_war_refuses_a_stage_read_by_wgmma_and_threads():
    """A's tile also copied out by threads: a warpgroup releases a stage after its wgmma.wait_group,
    a thread after its own reads; one release cannot be both."""
    fusion = _fusion()
    sa = next(t for t in fusion.tensors if t.name == "T4")
    with fusion:
        extra = tp.set(sa)
        fusion.add_output(extra)
    report = tp.verify(fusion, rules=["LOWERING-SUPPORTED"])
    assert report.codes == ["LOWERING-SUPPORTED"]
    assert "T4 is circular-buffered with Pipelined(uses_mbarrier_for_war=True), but T2 reads it with a wgmma and T6 " \
           "with threads" in report.errors[0].message


def test_a_refill_of_mn_major_boxes_is_one_issue_after_its_empty_wait():
    """An MN-major tile is loaded as a loop of boxes: that loop is the refill the empty wait
    guards (benchmarks/fuzz.py seed 18, case 170: the loop was not counted as an issue, and
    PIPELINE-RAW, PIPELINE-WAR and PIPELINE-PHASE rejected the schedule)."""
    params = HopperGemmParams(tile=HopperTile(m=64, n=128),
                              pipeline=TmaPipeline(stages=2, prefetch=1, war_mbarriers=True), a=Operand(major="MN"),
                              b=Operand(major="MN"))
    fusion = hopper_gemm(248, 320, 680, params)
    nest = placed_nest(fusion.snapshot())
    for tl in _timelines(nest).values():
        assert [e.step.value for e in tl.producer] == ["empty wait", "issue", "issue"]  # A's and B's boxes
        assert prove_complete(tl).proved and prove_free(tl).proved
    assert tp.verify(fusion, "sm_90a").ok


# -- read by threads -------------------------------------------------------------------------------------------

def exp_tiles(stages=4, prefetch=0, *, threads_outside=False):
    """nvFuser's TmaCircularBufferingTest.SingleDim with PipelinedMBarrierForWAR (support/tma_exp_tiles.py)."""
    war = tp.Pipelined(uses_mbarrier_for_war=True)
    return tma_exp_tiles(lambda s: s.circular_buffer(stages, prefetch, war), threads_outside=threads_outside)


@pytest.mark.parametrize("stages, prefetch", [(4, 0), (4, 2), (2, 1)])
def test_threads_reading_a_stage_each_release_it_after_their_reads(stages, prefetch):
    """A stage read by threads (not a wgmma) is released by every thread right after its reads
    (lag 0: no wgmma batch in flight), and the empty mbarriers count every thread of the block."""
    fusion = exp_tiles(stages, prefetch)
    assert tp.verify(fusion).ok
    nest = placed_nest(fusion.snapshot())
    body = _loop(nest).body
    (release,) = [n for n in body if isinstance(n, StageRelease)]
    assert release.every_thread and release.lag == 0 and body[-1] is release
    kernel = tp.compile(fusion)
    empty = next(m for m in kernel.ir.mbarriers if m.empty)
    assert empty.count == 256
    assert re.search(r"\n\s*tp_mbar_arrive\(&tp_empty_T2\[", kernel.cuda_source)  # unguarded: every thread


def test_a_thread_release_before_the_reads_is_refuted(monkeypatch):
    """The release moved ahead of the reads: the refill may overwrite a stage some thread still
    reads (PIPELINE-WAR), with the iterations in the counterexample."""
    from tileproof.execution import nest as nest_module

    place = nest_module.place_syncs

    def early(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        for n in walk(tree):
            body = getattr(n, "body", None)
            if body and isinstance(body[-1], StageRelease):
                body.insert(0, body.pop())

    monkeypatch.setattr(nest_module, "place_syncs", early)
    report = tp.verify(exp_tiles(4, 2), rules=["PIPELINE-WAR"])
    assert report.codes == ["PIPELINE-WAR"]
    d = report.errors[0]
    assert d.counterexample["read iteration"] == 0 and "before their reads of it are done" in d.message
    assert "the read itself" in d.message


def test_threads_outside_the_circular_loop_cannot_all_release():
    """Every thread arrives on the empty mbarriers; a circular loop inside a thread axis of its own
    would leave the block's other threads out: LOWERING-SUPPORTED."""
    report = tp.verify(exp_tiles(threads_outside=True), rules=["LOWERING-SUPPORTED"])
    assert report.codes == ["LOWERING-SUPPORTED"] and "threads outside" in report.errors[0].message
