"""Warp specialization (execution/warp_roles.py): a producer warpgroup loads each stage after the
consumers released it, the consumers wait for each stage's data and release it after their wgmma
reads. PIPELINE-RAW and PIPELINE-WAR prove the protocol on the rewritten nest, and refute each
mutation that breaks it with the datum; WS-ROLES and WS-REGISTERS check the schedule's side."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.ir import walk
from tileproof.execution.barriers import Async, TmaWait, statement_paths
from tileproof.execution.pipeline import specialized_timeline
from tileproof.execution.warp_roles import Role, StageEmptyWait, StageRelease, WarpRoles, register_pool
from tileproof.execution.barriers import WgmmaWait
from tileproof.recipes import HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm, tile_multiples
from tileproof.execution.nest import placed_nest
from tileproof.verifier.analysis.pipeline import prove_complete, prove_free
from tileproof.verifier.solver import Verdict

from support.row_sums import row_sums
from support.tma_exp_tiles import exp_tiles as tma_exp_tiles


P = tp.ParallelType
WS = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))


def _fusion(stages=4, prefetch=2, spec=WS, block=(128, 256)):
    params = HopperGemmParams(tile=HopperTile(m=block[0], n=block[1]),
                              pipeline=TmaPipeline(stages=stages, prefetch=prefetch, warp_specialized=spec))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=block[1])


def _nest(**kw):
    return placed_nest(_fusion(**kw).snapshot())


def _nodes(nodes, kind):
    return [n for n in walk(nodes) if isinstance(n, kind)]


def _timelines(nest):
    stmts = statement_paths(nest.tree, nest.hazards)
    out = {}
    for _, wa, wp in stmts:
        if wa.kind is Async.TMA_LOAD:
            for _, ra, rp in stmts:
                if wa.writes in ra.reads:
                    out[wa.writes] = specialized_timeline(wa.writes, "T2", wp, rp, nest.hazards, wa.barrier)
    assert set(out) == {"T4", "T5"} and all(t is not None and t.specialized for t in out.values())
    return out


def _consumer_loop(nest):
    roles = nest.tree[0]
    assert isinstance(roles, WarpRoles)
    return roles.loops[0][1]


def test_the_nest_splits_into_a_producer_and_consumers():
    nest = _nest()
    roles = nest.tree[0]
    assert len(nest.tree) == 1 and isinstance(roles, WarpRoles) and roles.spec == WS
    producer, consumer = roles.body
    assert isinstance(producer, Role) and producer.producer and not consumer.producer
    made, loop, empty, lag = roles.loops[0]
    assert empty == "tp_empty_T4" and lag == 1
    assert isinstance(made.body[0], StageEmptyWait) and len(made.body) == 3  # the wait, then both loads
    kinds = [type(n).__name__ for n in loop.body]
    assert kinds[:2] == ["TmaWait", "TmaWait"] and kinds[-2:] == ["WgmmaWait", "StageRelease"]
    assert [w.pending for w in _nodes(loop.body, WgmmaWait)] == [1]
    tail = [n for n in _nodes(consumer.body, StageRelease) if n.tail]
    assert len(tail) == 1 and tail[0].lag == 1
    for tl in _timelines(nest).values():
        assert tl.describe() == ("producer loop xceil(K / 64): [empty wait, issue]; consumer loop xceil(K / 64): "
                                 "[wait, read, wgmma wait 1, release of iteration i - 1]; then [wgmma wait, "
                                 "release of iteration i - 1]")
        assert prove_complete(tl).status is Verdict.PROVED and prove_free(tl).status is Verdict.PROVED


@pytest.mark.parametrize("stages, prefetch, lag", [(4, 2, 1), (4, 3, 0), (2, 1, 0), (3, 1, 1)])
def test_a_consumer_keeps_a_datum_one_iteration_where_the_stages_leave_room(stages, prefetch, lag):
    nest = _nest(stages=stages, prefetch=prefetch, block=(128, 128))
    assert nest.tree[0].loops[0][3] == lag
    assert [w.pending for w in _nodes(_consumer_loop(nest).body, WgmmaWait)] == [lag]
    assert all(prove_free(tl).proved and prove_complete(tl).proved for tl in _timelines(nest).values())


def test_a_release_before_the_wgmma_wait_is_refuted():
    """nvFuser issue 3561's family: the stage released while the tensor cores still read it."""
    nest = _nest()
    body = _consumer_loop(nest).body
    release = next(n for n in body if isinstance(n, StageRelease))
    body.remove(release)
    body.insert(next(k for k, n in enumerate(body) if isinstance(n, WgmmaWait)), release)
    for tl in _timelines(nest).values():
        out = prove_free(tl)
        assert out.status is Verdict.COUNTEREXAMPLE and out.model["read iteration"] == 0
        assert out.values["reads done at"] > out.values["release position"] >= 0


def test_a_release_of_the_current_datum_with_a_batch_in_flight_is_refuted():
    nest = _nest()
    for n in _nodes(_consumer_loop(nest).body, StageRelease):
        n.lag = 0
    for tl in _timelines(nest).values():
        out = prove_free(tl)
        assert out.status is Verdict.COUNTEREXAMPLE
        # datum 0 is released in iteration 0, its batch waited for in iteration 1
        assert out.model["read iteration"] == 0 and out.values["released"] == 2  # and again by the tail


def test_a_missing_final_release_is_refuted():
    """Without it the last datum's stage is never released: the producer's next run waits forever."""
    nest = _nest()
    consumer = nest.tree[0].body[1]
    for scope in [consumer.body] + [n.body for n in _nodes(consumer.body, object) if hasattr(n, "body")]:
        scope[:] = [n for n in scope if not (isinstance(n, StageRelease) and n.tail)]
    for tl in _timelines(nest).values():
        out = prove_free(tl)
        assert out.status is Verdict.COUNTEREXAMPLE and out.values["released"] == 0
        assert out.model["read iteration"] == out.model["extent"] - 1


def test_a_producer_that_does_not_wait_for_the_release_is_refuted():
    nest = _nest()
    made = nest.tree[0].loops[0][0]
    made.body[:] = [n for n in made.body if not isinstance(n, StageEmptyWait)]
    for tl in _timelines(nest).values():
        out = prove_free(tl)
        assert out.status is Verdict.COUNTEREXAMPLE and out.values["refill waits for the release"] == 0


def test_a_read_before_the_full_wait_is_refuted():
    nest = _nest()
    body = _consumer_loop(nest).body
    waits = [n for n in body if isinstance(n, TmaWait)]
    body[:] = [n for n in body if not isinstance(n, TmaWait)] + waits
    for tl in _timelines(nest).values():
        out = prove_complete(tl)
        assert out.status is Verdict.COUNTEREXAMPLE and out.model["iteration"] == 0


def test_the_block_has_one_more_warpgroup_on_the_specialized_axis():
    report = tp.verify(_fusion(), "sm_90a")
    assert report.ok, [d.message for d in report.errors]
    assert report.launch["TIDy"] == "3" and report.launch["TIDx"] == "128"


def test_the_register_pool_of_two_consumer_warpgroups():
    assert register_pool(128, 2) == {"threads": 384, "producer": 128, "entry": 168}  # __launch_bounds__(384, 1)
    assert register_pool(128, 1) == {"threads": 256, "producer": 128, "entry": 248}
    assert register_pool(1, 256, 128) == {"threads": 384, "producer": 128, "entry": 168}  # TIDx 256 + 128


@pytest.mark.parametrize("regs, message", [
    ((40, 240), "40 x 128 + 240 x 256 = 66560 registers, more than the 168 x 384 = 64512"),
    ((44, 232), "a multiple of 8 from 24 to 256"),
    ((16, 232), "a multiple of 8 from 24 to 256"),
    ((232, 40), "gives the producer more registers than the consumers"),
    ((176, 232), "must lie on either side of 168"),
])
def test_setmaxnreg_counts_are_checked(regs, message):
    report = tp.verify(_fusion(spec=tp.WarpSpecialized(P.TIDy, num_registers=regs)), "sm_90a")
    found = [d for d in report.errors if d.code == "WS-REGISTERS"]
    assert found and any(message in d.message for d in found), [d.message for d in report.errors]
    assert all(d.counterexample and d.hint for d in found)


def test_roles_are_checked():
    """TIDx under two TIDy rows of warpgroups: nvFuser pads TIDx by 128 / 2, a producer of two
    halves, one in each row, not a warpgroup of its own."""
    report = tp.verify(_fusion(spec=tp.WarpSpecialized(P.TIDx)), "sm_90a")
    roles = [d for d in report.errors if d.code == "WS-ROLES"]
    assert [d.message for d in roles if "above it" in d.message and "the last 64 TIDx indices" in d.message]
    assert report.launch["TIDx"] == "192"


def test_a_warp_specialized_buffer_must_be_a_tma_load():
    from support.examples import example_module

    fusion = example_module("valid", "cp_async").k_loop_sum_double_buffered()
    for t in fusion.tensors:
        if t.circular is not None:
            t.circular_buffer(2, 1, tp.WarpSpecialized(P.TIDy))
    report = tp.verify(fusion, "sm_90a")
    assert any(d.code == "LOWERING-SUPPORTED" and "producer warpgroup issues TMA loads only" in d.message
               for d in report.errors), [d.message for d in report.errors]


def exp_tiles(stages=4, prefetch=2):
    """nvFuser's TmaCircularBufferingTest.SingleDim warp-specialized on TIDy (support/tma_exp_tiles.py):
    256 consumer threads read the tiles; the producer is threadIdx.y == 1."""
    return tma_exp_tiles(lambda s: s.circular_buffer(stages, prefetch, tp.WarpSpecialized(P.TIDy)))


def tidx_tiles(stages=4, prefetch=2, num_registers=None, **kw):
    """exp_tiles warp-specialized on TIDx: 256 consumer threads, the producer 128 more (nvFuser's padding)."""
    return tma_exp_tiles(lambda s: s.circular_buffer(stages, prefetch, tp.WarpSpecialized(P.TIDx, num_registers)),
                         **kw)


def test_a_producer_on_tidx_is_128_threads_after_the_consumers():
    fusion = tidx_tiles()
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [d.message for d in report.errors]
    assert report.launch["TIDx"] == "384"  # 256 + 128
    nest = placed_nest(fusion.snapshot())
    stmts = statement_paths(nest.tree, nest.hazards)
    (load,) = [(a, p) for _, a, p in stmts if a.kind is Async.TMA_LOAD]
    (read,) = [p for _, a, p in stmts if load[0].writes in a.reads]
    tl = specialized_timeline(load[0].writes, "T2", load[1], read, nest.hazards, load[0].barrier)
    assert tl.specialized and prove_complete(tl).proved and prove_free(tl).proved
    kernel = tp.compile(fusion, "sm_90a")
    src = kernel.cuda_source
    assert "__launch_bounds__(384)" in src
    assert "if (threadIdx.x >= 256" in src  # the producer: threads 256 to 383
    assert "if (threadIdx.x == 256" in src  # its first thread issues the loads
    assert "bar.sync" not in src or "bar.sync 1, 256;" in src
    assert next(m for m in kernel.ir.mbarriers if m.empty).count == 256  # each consumer thread releases


def test_a_producer_on_tidx_shares_registers_out():
    assert tp.verify(tidx_tiles(num_registers=(64, 192)), "sm_90a").ok
    report = tp.verify(tidx_tiles(num_registers=(64, 232)), "sm_90a")
    (e,) = [d for d in report.errors if d.code == "WS-REGISTERS"]
    assert "64 x 128 + 232 x 256 = 67584 registers, more than the 168 x 384 = 64512" in e.message
    assert e.counterexample["registers needed"] == 67584


def test_tidx_consumers_of_no_whole_warpgroups_are_refused():
    """192 consumer threads: the producer's warpgroup would start in the middle of a warpgroup."""
    report = tp.verify(tidx_tiles(tile=192), "sm_90a")
    assert report.codes == ["WS-ROLES"], [d.message for d in report.errors]
    (e,) = report.errors
    assert "192 threads, not whole warpgroups of 128" in e.message
    assert e.counterexample == {"consumer threads": 192, "warpgroup": 128} and e.hint
    assert tp.verify(tidx_tiles(tile=128), "sm_90a").ok


def test_tidx_under_a_tidy_axis_is_refused():
    """TIDx 256 under TIDy 2: the producer would be 64 threads at the end of each TIDy row."""
    report = tp.verify(tidx_tiles(threads_outside=True), "sm_90a")
    roles = [d for d in report.errors if d.code == "WS-ROLES"]
    assert roles and "above it: the producer (the last 64 TIDx indices of each of its rows)" in roles[0].message
    assert roles[0].counterexample and roles[0].hint == "warp-specialize on the outermost thread axis the block uses (TIDy)"
    assert tp.verify(tidx_tiles(), "sm_90a").ok  # the same rows on TIDx alone


def test_a_block_reduction_of_tidx_consumers_spans_their_role():
    """tp_block_reduce after the producer returned: the consumers' 256 threads and their named
    barrier, not blockDim.x (384) and __syncthreads (which would wait for the producer)."""
    fusion = row_sums(lambda s: s.circular_buffer(4, 2, tp.WarpSpecialized(P.TIDx)))
    assert tp.verify(fusion, "sm_90a").ok
    src = tp.compile(fusion, "sm_90a").cuda_source
    helper = src[src.index("tp_block_reduce(T (&acc)"):src.index("extern \"C\"")]
    assert "const unsigned bx = 256u, by = 1u, bz = 1u;" in helper and "blockDim" not in helper
    assert "__syncthreads" not in helper and helper.count('bar.sync 1, 256;') == 2


def test_consumer_threads_reading_a_stage_each_release_it():
    """Threads (not a wgmma) read the stages: each consumer thread releases a stage right after its
    reads (lag 0), and the empty mbarriers count every consumer thread."""
    fusion = exp_tiles()
    assert tp.verify(fusion, "sm_90a").ok
    (release,) = [n for n in _walk(placed_nest(fusion.snapshot()).tree) if isinstance(n, StageRelease)]
    assert release.every_thread and release.lag == 0
    kernel = tp.compile(fusion, "sm_90a")
    empty = next(m for m in kernel.ir.mbarriers if m.empty)
    assert empty.count == 256


def test_a_consumer_thread_releasing_before_its_reads_is_refuted(monkeypatch):
    from tileproof.execution import nest as nest_module

    place = nest_module.place_syncs

    def early(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        for n in _walk(tree):
            body = getattr(n, "body", None)
            if body and isinstance(body[-1], StageRelease):
                body.insert(1, body.pop())  # after the full wait, before the reads

    monkeypatch.setattr(nest_module, "place_syncs", early)
    for fusion in (exp_tiles(), tidx_tiles()):
        report = tp.verify(fusion, "sm_90a", rules=["PIPELINE-WAR"])
        assert report.codes == ["PIPELINE-WAR"] and "the read itself" in report.errors[0].message
        assert report.errors[0].counterexample


def test_a_stage_read_by_wgmma_and_by_threads_is_refused():
    fusion = _fusion()
    sa = next(t for t in fusion.tensors if t.circular is not None)
    with fusion:
        extra = tp.set(sa)
        fusion.add_output(extra)
    report = tp.verify(fusion, "sm_90a", rules=["WS-ROLES"])
    assert report.codes == ["WS-ROLES"] and "with a wgmma and" in report.errors[0].message


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(getattr(n, "body", []))


def test_compile_refuses_a_rejected_warp_specialization():
    with pytest.raises(tp.ScheduleRejected):
        tp.compile(_fusion(spec=tp.WarpSpecialized(P.TIDx)), "sm_90a")


@pytest.mark.parametrize("bad, message", [
    (dict(on="TIDy"), "`on` must be a thread axis"),
    (dict(on=P.BIDx), "`on` must be a thread axis"),
    (dict(on=P.TIDy, num_registers=(40,)), "a tuple of two ints"),
    (dict(on=P.TIDy, num_registers=[40, 232]), "a tuple of two ints"),
])
def test_bad_arguments_are_refused_at_the_door(bad, message):
    with pytest.raises(tp.ScheduleError, match=message):
        tp.WarpSpecialized(**bad)


@pytest.mark.parametrize("spec", [tp.WarpSpecialized(P.TIDy), tp.WarpSpecialized(P.TIDy, num_registers=(24, 160))])
def test_three_consumer_warpgroups_of_64_x_256_do_not_compile(spec):
    """WGMMA-INSTRUCTION-REGISTERS: one m64n256 wgmma needs 128 + 26 registers a thread, and ptxas
    compiles four warpgroups for 128, whatever the consumers' setmaxnreg count. The warning is
    not repeated for the same tile."""
    params = HopperGemmParams(tile=HopperTile(m=192, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=spec))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, m_multiple=192, n_multiple=256)
    report = tp.verify(fusion, "sm_90a")
    assert report.codes == ["WGMMA-INSTRUCTION-REGISTERS"]
    (e,) = report.errors
    assert e.counterexample == {"registers needed": 154, "registers per thread": 128, "accumulators": 128}
    assert "65536 registers over the block's 512 threads" in e.message
    assert "launch at most 3 warpgroups per block (a thread then gets 168 registers)" in e.hint
    assert not [d for d in report.warnings if d.code == "MMA-REGISTER-PRESSURE"]


@pytest.mark.parametrize("spec, warned", [(tp.WarpSpecialized(P.TIDy), True),
                                          (tp.WarpSpecialized(P.TIDy, num_registers=(40, 232)), False)])
def test_two_wgmmas_a_consumer_spill_unless_it_gets_more_registers(spec, warned):
    """MMA-REGISTER-PRESSURE: two consumers of two m64n192 wgmmas each (192 accumulators a
    thread) get 168 registers (384 threads; ptxas spills 1600 bytes a thread), or 232 after
    setmaxnreg (nothing spills). One wgmma (96 + 26) fits either way: not an error."""
    params = HopperGemmParams(tile=HopperTile(m=256, n=192, warpgroup_rows=128),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=spec))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, m_multiple=256, n_multiple=192)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [d.message for d in report.errors]
    pressure = [d for d in report.warnings if d.code == "MMA-REGISTER-PRESSURE"]
    assert bool(pressure) == warned
    if warned:
        assert pressure[0].counterexample["registers needed"] == 222
        assert pressure[0].counterexample["registers per thread"] == 168


def test_two_consumer_warpgroups_fit():
    report = tp.verify(_fusion(), "sm_90a")
    assert not [d for d in report.warnings if d.code == "MMA-REGISTER-PRESSURE"]


def test_three_consumer_warpgroups_past_the_register_file_are_refused_with_the_sum():
    """examples/valid/attention.py's three consumer warpgroups (recipes.sdpa's head dim 64 form) at 168
    registers each instead of 160: 24 x 128 + 168 x 384 = 67584 of the 65536 a 512-thread block
    launches with, so the consumers' setmaxnreg.inc would wait forever; the report shows the sum."""
    from tileproof.recipes.attention import AttentionTile, attention

    tile = AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=64, value_dim=64, batch=1, group=2)
    options = dict(stages=2, producer=True, warpgroups=3, in_place=True, overlap=True, persistent=4, q_stages=2)
    assert tp.verify(attention(tile, registers=(24, 160), **options)).ok
    report = tp.verify(attention(tile, registers=(24, 168), **options))
    assert report.codes == ["WS-REGISTERS"]
    assert "24 x 128 + 168 x 384 = 67584 registers" in str(report)
    assert report.errors[0].counterexample["registers needed"] == 67584
