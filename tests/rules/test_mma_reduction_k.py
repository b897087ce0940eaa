"""REDUCTION-K and the zero paths it accepts (execution/zero_padding.py): which tensors run past K,
why a path is not one, the reads past K that find no zeros, and a cp.async vector across K."""

from __future__ import annotations

import tileproof as tp
from tileproof.execution.statements import CondKind, tensor_execution
from tileproof.execution.indexing import block_dims
from tileproof.execution.zero_padding import zero_padded, zero_path
from tileproof.recipes import (CpAsyncPipeline, HopperGemmParams, HopperTile, MmaGemmParams, TmaPipeline, hopper_gemm,
                               mma_gemm, tile_multiples)

from support.examples import example_module  # noqa: E402

LS = tp.LoadStoreOpType


def _invalid():
    return example_module("invalid", "mma")


def _tuned(k_multiple=None):
    fusion = mma_gemm("M", "N", "K", MmaGemmParams(dtype=tp.bfloat16, pipeline=CpAsyncPipeline(stages=2)))
    for a in ("M % 128 == 0", "N % 128 == 0") + ((f"K % {k_multiple} == 0",) if k_multiple else ()):
        fusion.assume(a)
    return fusion


def test_the_tuned_operands_run_past_k_from_their_cp_async_to_the_mma():
    fusion = _tuned(8)
    d = next(t for t in fusion.tensors if t.definition is not None and t.definition.macro is not None)
    padded = zero_padded(fusion)
    assert set(padded) == {t.name for t in fusion.tensors if t.definition is not None}  # D, 2 x (shared, fragment)
    for k in (0, 1):
        path, why = zero_path(d, k)
        assert why is None and [t.definition.op_type for t, _ in path] == [LS.LdMatrix, LS.CpAsync]
    launch = block_dims(fusion)
    for t in fusion.tensors:
        if t.definition is None:
            continue
        ex = tensor_execution(t, launch)
        assert len(ex.padding) == 1 and ex.padding[0].kind is CondKind.PADDING  # the bound of K, lifted
        assert not [c for c in ex.conds if "past K" in c.why]


def test_a_plain_copy_from_global_memory_is_no_zero_path():
    fusion = _invalid().k_of_100_without_zero_fill()
    assert zero_padded(fusion) == {}
    d = next(t for t in fusion.tensors if t.definition is not None and t.definition.macro is not None)
    _, why = zero_path(d, 0)
    assert "reads global memory with a copy that skips the elements past K" in why
    found = [x for x in tp.verify(fusion, "sm_90a").errors if x.code == "REDUCTION-K"]
    assert found and found[0].counterexample["index"] == 100
    assert any("no zero path for A" in n for n in found[0].notes)
    assert "cp.async" in found[0].hint


def test_a_read_past_the_producers_tiles_is_rejected_with_its_k_index():
    found = [x for x in tp.verify(_invalid().k_tail(100, 4), "sm_90a").errors if x.code == "REDUCTION-K"]
    assert len(found) == 1
    assert found[0].counterexample["index"] == 100 and found[0].counterexample["extent"] == 100
    assert found[0].message.startswith("T5 reads T3 at K index 100 (K = 100)")
    assert tp.verify(_invalid().k_tail(100, 8), "sm_90a").ok


def test_a_cp_async_vector_across_the_end_of_k_is_rejected():
    """Without K % 8 == 0, a 16-byte bfloat16 copy can hold elements on both sides of K: one
    src-size cannot zero only its part past K."""
    found = [x for x in tp.verify(_tuned(), "sm_90a").errors if x.code == "SPLIT-DIVISIBILITY"]
    assert len(found) == 2 and all("straddles the end of K" in x.message for x in found)
    ce = found[0].counterexample
    assert ce["index"] < ce["extent"] <= ce["other index"] or ce["other index"] < ce["extent"] <= ce["index"]
    assert tp.verify(_tuned(8), "sm_90a").ok


def test_the_cp_async_past_k_is_lowered_with_src_size_0_and_the_mma_unpredicated():
    from tileproof.codegen.ir import CpAsyncCopy, MmaIssue
    from support.lowering import lowered

    nodes = []

    def walk(body):
        for node in body:
            nodes.append(node)
            walk(getattr(node, "body", []))

    walk(lowered(_tuned(8), "sm_90a").kernel.body)
    copies = [n for n in nodes if isinstance(n, CpAsyncCopy)]
    assert len(copies) == 4  # A's and B's copies, in the prologue and the loop
    assert all([c.kind for c in n.zero_fill] == [CondKind.PADDING] for n in copies)
    issues = [n for n in nodes if isinstance(n, MmaIssue)]
    assert issues and not any(c.kind in (CondKind.HOLE, CondKind.PADDING) for n in issues for c in n.conds)
    src = tp.compile(_tuned(8), "sm_90a").cuda_source
    assert src.count("const bool tp_in = ") == 4 and "< s_K;" in src


def test_tma_loaded_wgmma_operands_run_past_k_on_the_tma_zeros():
    """K only a multiple of 8: the TMA box of the last K tile reaches past K, whose coordinates are
    out of its tensor map's bounds (zeros), and the wgmma reads them from shared memory."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256), pipeline=TmaPipeline(stages=4, prefetch=2))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 8, n_multiple=256)
    d = next(t for t in fusion.tensors if t.definition is not None and t.definition.macro is not None)
    for k in (0, 1):
        path, why = zero_path(d, k)
        assert why is None and [t.definition.op_type for t, _ in path] == [LS.TMA]
    assert set(zero_padded(fusion)) == {d.name, "T4", "T5"}
    assert tp.verify(fusion, "sm_90a").ok
    fusion.assume("K % 16 == 0")  # not needed, and no different
    assert tp.verify(fusion, "sm_90a").ok


def test_a_tma_whose_k_is_merged_into_another_dimension_is_no_zero_path():
    """A [M, 1, K] loaded as one TMA dimension of M * K elements: past K lie the next row's
    elements, not zeros, so REDUCTION-K finds no zero path for A."""
    from tileproof.hw.tma import infer_tma

    with tp.Fusion("merged_k") as fusion:
        a = tp.make_contig_concrete_tensor([16, 1, 100], dtype=tp.bfloat16); fusion.add_input(a)
        b = tp.make_contig_concrete_tensor([1, 8, 100], dtype=tp.bfloat16); fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1]); fusion.add_output(d)
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_16)
    d.split(2, 16).reorder({2: 0})  # [K loop, 16, 8, 16]
    for i in (1, 2, 3):
        d.axis(i).parallelize(tp.ParallelType.Mma)
    sa = a.cache_after(LS.TMA)
    sa.set_memory_type(tp.MemoryType.Shared)
    sa.reorder({1: 0}).merge(1).split(1, 64)  # [1, ceil(M * K / 64), 64]
    sa.axis(2).parallelize(tp.ParallelType.Bulk)
    info = infer_tma(sa.definition).info
    assert len(info.dims) == 1 and info.dims[0].size == 1600  # M and K in one dimension: no bound at K
    path, why = zero_path(d, 0)
    assert path == [] and f"{sa.name}'s TMA does not have K" in why
