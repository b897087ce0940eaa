"""LOWERING-SUPPORTED refuses warp specialization in a kernel that uses tensor memory: the roles'
code would drop the tcgen05 fences around the consumers' barriers, and the barrier before
tcgen05.dealloc would wait for the producer, which returns after its loads. Each alone is lowered."""

from __future__ import annotations

import tileproof as tp
from tileproof.execution.conditions import lowering as conditions

from support.tma_exp_tiles import exp_tiles

P = tp.ParallelType
WS = tp.WarpSpecialized(P.TIDy)


def _with_a_tensor_memory_copy(circular):
    """exp_tiles, and beside it a copy b -> registers -> tensor memory -> registers -> out2."""
    fusion = exp_tiles(circular)
    with fusion:
        b = tp.make_contig_concrete_tensor([32, 2])
        fusion.add_input(b)
        t = tp.set(tp.set(b))
        out2 = tp.set(tp.set(t))
        fusion.add_output(out2)
    t.set_memory_type(tp.MemoryType.Tensor)
    return fusion


def _refusals(fusion):
    return [p for p in conditions.unsupported_features(fusion.snapshot()) if "tensor memory" in p.message
            and "warp-specialized" in p.message]


def test_warp_specialization_beside_tensor_memory_is_refused():
    fusion = _with_a_tensor_memory_copy(lambda s: s.circular_buffer(2, 1, WS))
    (problem,) = _refusals(fusion)
    assert problem.tensor == "T2" and "tcgen05" in problem.message and "Pipelined" in problem.hint
    report = tp.verify(fusion, "sm_100a")
    assert "LOWERING-SUPPORTED" in report.codes


def test_each_alone_is_not_refused_for_it():
    assert _refusals(_with_a_tensor_memory_copy(lambda s: s.circular_buffer(2, 1, tp.Pipelined()))) == []
    assert _refusals(exp_tiles(lambda s: s.circular_buffer(2, 1, WS))) == []
