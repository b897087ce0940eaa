"""emit/whole_tile.py: an unrolled nest's hole predicates are dropped only under a block-uniform
guard that implies them at every thread and point of the nest."""

from __future__ import annotations

import random

import tileproof as tp
from tileproof.codegen.emit.whole_tile import whole_tile
from tileproof.codegen.ir import Compute, Loop, LoopKind, walk
from tileproof.codegen.lower import lower
from tileproof.model.expr import evaluate
from tileproof.recipes import Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm


WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))


def _epilogue(m, n):
    """The lowered 128 x 256 kernel at m x n x 8192 whose epilogue stores the accumulators from
    registers (a stmatrix + TMA store epilogue has no hole predicates: model/clipped_holes.py),
    its unrolled store loop, the C++ names around it that are the same for the whole block, and
    the extents of the thread loops around it."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=16, persistent=128), cluster=Cluster(size=2),
                              epilogue=Epilogue(dtype=tp.bfloat16))
    fusion = hopper_gemm(m, n, 8192, params)
    ir = lower(fusion.snapshot(), tp.get_target("sm_90a")).kernel

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
    whole = whole_tile(nest, uniform, ir, threads)
    assert whole is not None and len(whole.guard) == 2 and len(whole.implied) == 2  # rows and columns
    for g in whole.guard:
        assert not g.lhs.free_vars() & {"threadIdx.x", "threadIdx.y", "threadIdx.z"}
    loops = _points(nest)
    names = {ir.names.get(v, v): v for c in whole.implied for v in c.lhs.free_vars()}
    block = [v for v in names.values() if ir.names.get(v, v) in uniform]
    rng = random.Random(7)
    held = failed = 0
    for _ in range(400):
        tile = {v: rng.randrange(16) if ir.names.get(v, v) != "blockIdx.x" else rng.randrange(128) for v in block}
        if not all(evaluate(g.lhs, tile) < evaluate(g.rhs, tile) for g in whole.guard):
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
    whole = whole_tile(nest, uniform, ir, threads)
    tops = sorted(evaluate(g.lhs, {v: 0 for v in g.lhs.free_vars()}) for g in whole.guard)
    assert tops == [127, 255]  # 64 x 2 consumer warpgroups' rows - 1 (not the producer's); 256 columns - 1


def test_no_guard_where_the_tiles_divide():
    ir, nest, uniform, threads = _epilogue(8192, 8192)
    assert whole_tile(nest, uniform, ir, threads) is None  # no hole predicates at all
