"""codegen/lower/whole_tile.py: an unrolled nest's hole predicates are dropped only under a
block-uniform guard that implies them at every thread and point of the nest; the pass puts the nest
twice into a WholeTile node, which the emitter prints as if / else."""

from __future__ import annotations

import random

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.ir import Compute, Loop, LoopKind, MatrixCopy, WholeTile, walk
from tileproof.codegen.lower import lower
from tileproof.codegen.lower.whole_tile import whole_tile_guard
from tileproof.execution.statements import CondKind
from tileproof.model.expr import evaluate
from tileproof.model.types import OpKind
from tileproof.recipes import Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm


WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))


def _fusion(m, n):
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=16, persistent=128), cluster=Cluster(size=2),
                              epilogue=Epilogue(dtype=tp.bfloat16))
    return hopper_gemm(m, n, 8192, params)


def _epilogue(m, n):
    """The 128 x 256 kernel at m x n x 8192 lowered up to the whole-tile pass, whose epilogue stores
    the accumulators from registers (a stmatrix + TMA store epilogue has no hole predicates:
    execution/clipped_holes.py), its unrolled store loop, the C++ names around it that are the same for
    the whole block, and the extents of the thread loops around it."""
    ir = lower(_fusion(m, n).snapshot(), tp.get_target("sm_90a"), until="signature").kernel

    def find(nodes, around, threads):
        for node in nodes:
            if isinstance(node, Loop):
                if node.kind is LoopKind.UNROLL and any(isinstance(x, Compute) and x.out.tensor == "T3"
                                                        for x in walk(node.body)):
                    return node, around, threads
                inner = around + ([node.var] if node.kind in (LoopKind.SERIAL, LoopKind.UNROLL) else [])
                found = find(node.body, inner, {**threads, node.var: node.extent.value}
                             if node.kind is LoopKind.THREAD else threads)
                if found:
                    return found
            elif hasattr(node, "body"):
                found = find(node.body, around, threads)
                if found:
                    return found
        return None

    nest, around, threads = find(ir.body, [], {})
    uniform = frozenset({"blockIdx.x", "blockIdx.y", "blockIdx.z", *around, *(p.name for p in ir.params)})
    return ir, nest, uniform, threads


def _points(nest):
    out = {}
    for node in walk([nest]):
        if isinstance(node, Loop) and node.kind is not LoopKind.THREAD:
            out[node.var] = node.extent.value
    return out


def test_the_guard_implies_every_dropped_predicate_and_is_block_uniform():
    ir, nest, uniform, threads = _epilogue(8000, 8000)
    whole = whole_tile_guard(nest, uniform, ir, threads)
    assert whole is not None and len(whole.conds) == 2 and len(whole.implied) == 2  # rows and columns
    for g in whole.conds:
        assert not g.lhs.free_vars() & {"threadIdx.x", "threadIdx.y", "threadIdx.z"}
    loops = _points(nest)
    names = {ir.names.get(v, v): v for c in whole.implied for v in c.lhs.free_vars()}
    block = [v for v in names.values() if ir.names.get(v, v) in uniform]
    rng = random.Random(7)
    held = failed = 0
    for _ in range(400):
        tile = {v: rng.randrange(16) if ir.names.get(v, v) != "blockIdx.x" else rng.randrange(128) for v in block}
        if not all(evaluate(g.lhs, tile) < evaluate(g.rhs, tile) for g in whole.conds):
            failed += 1
            continue
        held += 1
        for _ in range(50):
            env = dict(tile, **{"threadIdx.x": rng.randrange(128), "threadIdx.y": rng.randrange(2)})
            env.update({v: rng.randrange(loops[ir.names.get(v, v)]) for v in names.values()
                        if ir.names.get(v, v) in loops})
            for c in whole.implied:
                assert evaluate(c.lhs, env) < evaluate(c.rhs, env), (c, env)
    assert held > 300 and failed > 0  # most tiles are whole; those at M's or N's end are not


def test_a_tile_at_the_edge_keeps_its_predicates():
    """Column tile 31 starts at 7936: 7936 + 255 >= 8000, so the guard fails there, and row tile
    62 (7936 + 127 >= 8000) too; tile (61, 30) is whole. The rows are the two consumer
    warpgroups' (threadIdx.y < 2), not the block's three (191)."""
    ir, nest, uniform, threads = _epilogue(8000, 8000)
    whole = whole_tile_guard(nest, uniform, ir, threads)
    tops = sorted(evaluate(g.lhs, {v: 0 for v in g.lhs.free_vars()}) for g in whole.conds)
    assert tops == [127, 255]  # 64 x 2 consumer warpgroups' rows - 1 (not the producer's); 256 columns - 1


def test_no_guard_where_the_tiles_divide():
    ir, nest, uniform, threads = _epilogue(8192, 8192)
    assert whole_tile_guard(nest, uniform, ir, threads) is None  # no hole predicates at all


def _holes(nest) -> int:
    return sum(c.kind is CondKind.HOLE for n in walk([nest]) if type(n) in (Compute, MatrixCopy) for c in n.conds)


def test_the_pass_puts_the_nest_twice_under_the_guard():
    """The lowered kernel holds the epilogue nest as a WholeTile: the guard the analysis finds, the
    nest without the predicates it implies, and the nest as lowered; the C++ tests the guard once."""
    _, nest, uniform, threads = _epilogue(8000, 8000)
    st = lower(_fusion(8000, 8000).snapshot(), tp.get_target("sm_90a"), until="whole-tile")
    (split,) = [n for n in walk(st.kernel.body) if isinstance(n, WholeTile)]
    assert split.guard == whole_tile_guard(nest, uniform, st.kernel, threads).conds
    assert _holes(split.lowered) == _holes(nest) > 0 and _holes(split.whole) == 0
    assert [type(n) for n in walk([split.whole])] == [type(n) for n in walk([nest])]  # the same nest otherwise
    source = emit(lower(_fusion(8000, 8000).snapshot(), tp.get_target("sm_90a")).kernel, cuda_headers=False)
    assert source.count("// a whole tile: no hole predicates") == 1 and "} else {" in source


def test_no_whole_tile_node_where_the_tiles_divide():
    ir = lower(_fusion(8192, 8192).snapshot(), tp.get_target("sm_90a")).kernel
    assert not any(isinstance(n, WholeTile) for n in walk(ir.body))


def test_a_reductions_serial_loops_over_a_fragment_and_a_zero_select_run_unpredicated_where_the_key_tile_is_whole():
    """Attention at 300 rows and keys: the row max's loops over the scores' fragment are serial (as
    scheduled), register statements alone, so they are split too; under the guard (the key tile
    whole) the max tests nothing and P's copy reads its value without the zero select past the keys,
    which the other version keeps. The rows past M test nothing in either (reduced_at_holes)."""
    from tileproof.recipes.attention import AttentionTile, attention

    tile = AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128)
    fusion = attention(tile, warpgroups=2, stages=2, producer=True, registers=(24, 240), in_place=True)
    ir = lower(fusion.snapshot(), tp.get_target("sm_90a")).kernel
    tiles = [n for n in walk(ir.body) if isinstance(n, WholeTile)]

    def computes(loop):
        return [c for c in walk([loop]) if type(c) is Compute]

    reductions = [w for w in tiles if w.whole.kind is LoopKind.SERIAL
                  and any(c.kind is OpKind.REDUCTION for c in computes(w.whole))]
    assert reductions, "the row max's serial nest is not split"
    for w in reductions:
        assert all(not c.conds for c in computes(w.whole))
        assert any(c.conds for c in computes(w.lowered))
        assert all("threadIdx" not in str(g.lhs) for g in w.guard)  # the same in every thread of the block
    selects = [w for w in tiles if any(c.zero_unless for c in computes(w.lowered))]
    assert selects and all(not c.zero_unless for w in selects for c in computes(w.whole))
    source = emit(ir, cuda_headers=False)
    assert source.count("< 300U) ? ") == len(selects)  # each select once: in the version past the keys


def test_a_serial_loop_holding_more_than_register_statements_is_not_split():
    """The cp.async K loop of k_loop_sum_cg_16_bytes holds copies, a wait and barriers: its add's
    unrolled-free nest inside is split on its own, the loop itself is not."""
    from pathlib import Path

    from tileproof.schedule_files import discover

    root = Path(__file__).resolve().parents[2]
    [case] = [c for c in discover([str(root / "examples" / "valid" / "cp_async.py")])
              if c.name == "k_loop_sum_cg_16_bytes"]
    ir = lower(case.build().snapshot(), tp.get_target("sm_90a")).kernel
    tiles = [n for n in walk(ir.body) if isinstance(n, WholeTile)]
    assert len(tiles) == 1 and tiles[0].whole.label.startswith("T4 axis 2")
    assert not any(isinstance(x, WholeTile) for x in walk(tiles[0].whole.body))
