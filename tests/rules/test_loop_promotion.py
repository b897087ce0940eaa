"""Loop promotion through merges (execution/promotion.py): a persistent grid splits D's merged tile index
by the number of SMs, and A's and B's shared tiles merge their broadcast axis the same way. Their
loops then iterate D's tiles: each TMA load fetches the operand's tile of D's tile, its loops run
over D's extents, and its holes are D's. The verifier proves what the code generator emits, and
refutes the indexing without promotion."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution import indexing
from tileproof.execution.statements import tensor_execution
from tileproof.model.expr import evaluate, var as tp_var
from tileproof.execution.indexing import block_dims
from tileproof.execution.loops import loop_groups
from tileproof.execution.promotion import loop_extents, promotion
from tileproof.recipes import GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm
from tileproof.recipes.gemm_blocks import permute

P = tp.ParallelType
WS = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
M, N, K, SMS, GROUP = 1000, 5000, 200, 132, 8  # 8 x 20 tiles (partial in M and N): 160 > 132 blocks


def _persistent(m=M, n=N, k=K, sms=SMS):
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=GROUP, persistent=sms))
    return hopper_gemm(m, n, k, params)


def _tiles(fusion):
    return {t.name: t for t in fusion.tensors}


def _d_tile(tile: int) -> tuple[int, int]:
    """(Mo, No) of tile index `tile` in the grouped order [Mo / 8, No, 8]."""
    no = -(-N // 256)
    rest, g = divmod(tile, GROUP)
    return (rest // no) * GROUP + g, rest % no


def test_the_operand_tiles_share_the_consumers_loops_and_extents():
    t = _tiles(_persistent())
    d, sa, sb = t["T2"], t["T4"], t["T5"]
    assert sa.compute_at == sb.compute_at == 3
    groups = loop_groups(d.fusion)
    assert not groups.unmapped and not groups.mismatched
    for k in range(2):
        g = groups.of[(d.name, k)]
        assert groups.of[(sa.name, k)] is g and groups.of[(sb.name, k)] is g
        assert g.extent == d.loop[k].extent_expr  # D's tile count, not A's M tiles
    assert loop_extents(sa)[0] == d.loop[0].extent_expr != sa.loop[0].extent_expr
    assert promotion(d) is None and promotion(t["T3"]) is None


@pytest.mark.parametrize("name, axis, scale", [("T4", 0, 128), ("T5", 1, 256)])
def test_each_load_fetches_the_operand_tile_of_the_consumers_tile(name, axis, scale):
    """At every loop point (t, blockIdx.x) the operand's statement, at its issuing thread, writes rows
    of its tile of D's tile t * 132 + blockIdx.x, and runs exactly where D's tile exists."""
    fusion = _persistent()
    tv = _tiles(fusion)[name]
    ex = tensor_execution(tv, block_dims(fusion))
    written = ex.written_logical()
    tiles = -(-M // 128 // GROUP) * GROUP * -(-N // 256)
    for t in range(2):
        for b in (0, 1, 7, 8, 131):
            tile = t * SMS + b
            env = {v: 0 for v in ex.ranges}
            env.update({ex.env[tv.loop[0].uid].value: t, "blockIdx.x": b})
            for c in ex.conds:  # at the issuing thread (the producer's first, warp-specialized)
                if c.op == "==" and str(c.lhs).startswith("threadIdx."):
                    env[str(c.lhs)] = evaluate(c.rhs, env)
            runs = all(evaluate(c.lhs, env) < evaluate(c.rhs, env) if c.op == "<" else
                       evaluate(c.lhs, env) == evaluate(c.rhs, env) for c in ex.conds)
            mo, no = _d_tile(tile)
            assert runs == (tile < tiles and mo < -(-M // 128)), (t, b)
            if runs:
                assert evaluate(written[axis], env) == (mo, no)[axis] * scale


def test_the_verifier_accepts_the_persistent_schedule_with_partial_tiles():
    report = tp.verify(_persistent())
    assert report.ok, report.diagnostics


def test_without_promotion_the_indexing_is_refuted(monkeypatch):
    """A's tile indexed through its own merge (Mo = tile index, as if the broadcast's extent 1 were
    the loop's): the blocks would load A's tiles of other D tiles, and the verifier says so."""
    fusion = _persistent()
    monkeypatch.setattr(indexing, "promotion", lambda tv: None)
    report = tp.verify(fusion)
    assert not report.ok
    assert {"SMEM-BLOCK-VISIBILITY", "TMA-COORD-RANGE", "WGMMA-SMEM-LAYOUT"} & {d.code for d in report.errors}


def test_an_operand_merged_in_another_order_is_not_inlined():
    """A's tile merges (broadcast, M tiles) where D merges (M tiles, N tiles): not D's iteration."""
    with tp.Fusion("mm") as fusion:
        a = tp.make_tensor([256, 1, 64], dtype=tp.bfloat16)
        b = tp.make_tensor([1, 512, 64], dtype=tp.bfloat16)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        fusion.add_output(d)
    d.definition.set_macro(tp.MmaMacro.Hopper_64_256_16)
    sa = a.cache_after(tp.LoadStoreOpType.TMA)
    d.split(1, 256).split(0, 128)  # [Mo, 128, No, 256, K]
    permute(d, [0, 2, 1, 3, 4])
    d.merge(0)  # [Mo * No, ..]
    sa.split(0, 128)  # [Mo, 128, 1, K]
    permute(sa, [2, 0, 1, 3])  # [1, Mo, 128, K]
    sa.merge(0)  # [1 * Mo, 128, K]
    with pytest.raises(tp.ScheduleError, match="does not map to T2's axis 0"):
        sa.inline_at(1)


def test_a_broadcast_merge_into_a_plain_consumer_is_promoted():
    """Promotion is not only for a tensor-core op's operands (nvFuser's loop promotion): x2's merge
    of I0 with its broadcast runs over z's merged loop, and x2's I0 is z's (flat / 32)."""
    with tp.Fusion("add") as fusion:
        x = tp.make_tensor([64, 1], dtype=tp.float32)
        y = tp.make_tensor([64, 32], dtype=tp.float32)
        fusion.add_input(x)
        fusion.add_input(y)
        x2 = tp.set(x)
        z = tp.add(x2, y)
        fusion.add_output(z)
    x2.merge(0)
    z.merge(0)
    x2.inline_at(1)
    assert promotion(x2).consumer is z and loop_extents(x2)[0] == z.loop[0].extent_expr
    index = indexing.indices_from_loop(x2, {x2.loop[0].uid: tp_var("flat")})[x2.logical[0].uid]
    assert all(evaluate(index, {"flat": f}) == f // 32 for f in range(0, 2048, 7))
    assert tp.verify(fusion).ok
