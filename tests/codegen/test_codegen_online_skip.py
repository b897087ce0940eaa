"""Skipped masked iterations (TensorView.skip_masked, execution/skip.py) in the kernel: the loop over
tiles runs min(extent, trip count) iterations a block, the count computed from blockIdx. The
causally masked log-sum-exp compiles with NVRTC for sm_90a, and the CPU simulator running the lowered
kernel gives the float64 reference with the exact count and with one past the loop; one tile short
(lowered without the proof) it does not, which is what ONLINE-SKIP refuses. With the scores' tiles
in a cp.async circular buffer of three stages, the prologue and the prefetches read the block's
count too: a block of one iteration (fewer than the stages) still gives the reference. With an unmasked
count (the tiles below the diagonal computed without the mask, codegen/lower/peel.py) the simulated
kernel gives the reference; one tile past the diagonal (lowered without the proof) it does not."""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.runtime.reference import reference
from tileproof.model.targets import get_target
from tileproof.rule_examples import masked_logsumexp

from support.reduction_sim import run_kernel

TARGET = get_target("sm_90a")
P = tp.ParallelType


def _skipping(extra: int, rows: int = 96, keys: int = 256, tile: int = 64, unmasked: int | None = None):
    fusion, x, keep, m, l, lse = masked_logsumexp(f"skip_{extra + 1}", rows, keys, tile)
    m.skip_masked(keep, lambda bx, by, bz: (bx * 32 + 31 + keys - rows) // tile + extra,
                  unmasked=None if unmasked is None else lambda bx, by, bz: (bx * 32 + 1 + keys - rows) // tile + unmasked)
    return fusion


def _simulated(fusion, rows: int, keys: int):
    report = tp.verify(fusion, target="sm_90a")
    kernel = lower(fusion.snapshot(), TARGET, report.decisions).kernel
    x = np.random.default_rng(7).standard_normal((rows, keys))
    (got,) = run_kernel(kernel, fusion, [x], {})
    (want,) = reference(fusion, [x])
    return report, kernel, np.asarray(got, dtype=np.float64), want


@pytest.mark.parametrize("rows, keys, tile", [(96, 256, 64), (70, 200, 32)])
@pytest.mark.parametrize("extra", [1, 4])
def test_the_proved_count_gives_the_reference(rows, keys, tile, extra):
    fusion = _skipping(extra, rows, keys, tile)
    report, kernel, got, want = _simulated(fusion, rows, keys)
    assert report.ok, report.codes
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_one_tile_short_gives_other_values_and_is_refused():
    fusion = _skipping(0)
    report, kernel, got, want = _simulated(fusion, 96, 256)
    assert report.codes == ["ONLINE-SKIP"]
    assert np.max(np.abs(got - want)) > 0.1


@pytest.mark.parametrize("rows, keys, tile", [(96, 256, 64), (70, 200, 32)])
def test_the_tiles_computed_without_the_mask_give_the_reference(rows, keys, tile):
    fusion = _skipping(1, rows, keys, tile, unmasked=0)
    report, kernel, got, want = _simulated(fusion, rows, keys)
    assert report.ok, report.codes
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_an_unmasked_tile_past_the_diagonal_gives_other_values_and_is_refused():
    fusion = _skipping(1, unmasked=1)
    report, kernel, got, want = _simulated(fusion, 96, 256)
    assert report.codes == ["ONLINE-SKIP"]
    assert np.max(np.abs(got - want)) > 0.1


def test_the_kernel_compiles_for_sm_90a():
    fusion = _skipping(1)
    report = tp.verify(fusion, target="sm_90a")
    source = emit(lower(fusion.snapshot(), TARGET, report.decisions).kernel, cuda_headers=True)
    assert nvrtc.compile_to_cubin(source, "sm_90a", nvrtc.cuda_include_dir())[:4] == b"\x7fELF"


def _pipelined(rows: int, keys: int, tile: int = 64, block: int = 32, stages: int = 3):
    """masked_logsumexp with x's tiles copied by cp.async into shared memory, a circular buffer of
    `stages` over the loop over tiles, and the exact trip count."""
    with tp.Fusion("skip_pipelined") as fusion:
        x = tp.make_contig_concrete_tensor([rows, keys])
        fusion.add_input(x)
        query, key = tp.iota(rows, keys - rows, 1, tp.int32), tp.iota(keys, 0, 1, tp.int32)
        keep = tp.le(tp.broadcast(key, [True, False]), tp.broadcast(query, [False, True]))
        s = tp.where(keep, x, float("-inf"))
        m = tp.max(s, 1)
        l = tp.sum(tp.exp(tp.sub(s, tp.broadcast(m, [False, True]))), 1)
        fusion.add_output(tp.add(tp.log(l), m))
    staged = x.cache_after(tp.LoadStoreOpType.CpAsync)
    staged.set_memory_type(tp.MemoryType.Shared)
    parts = [r.split(1, tile).split(0, block).rfactor([3]) for r in (m, l)]
    tiles = [t for t in fusion.tensors if t.definition is not None and len(t.logical) == 2 and t not in (m, l)
             and not t.logical[1].is_reduction]
    for t in tiles:
        t.split(1, tile).split(0, block)
    for t in fusion.tensors:
        if t.definition is not None and len(t.logical) == 1 and t not in (key, m, l):
            t.split(0, block)
    key.split(0, tile)
    for t in fusion.tensors:
        if t.definition is not None and t is not key:
            for axis, kind in zip(t.get_loop_domain()[:2], (P.BIDx, P.TIDx)):
                if not axis.is_broadcast:
                    axis.parallelize(kind)
    m.set_online(rescale=[l])
    m.skip_masked(keep, lambda bx, by, bz: (bx * block + block - 1 + keys - rows) // tile + 1)
    for t in parts + tiles:
        t.inline_at(3)
    for t in (m, l):
        t.inline_at(2)
    key.inline_at(1)
    staged.circular_buffer(stages)
    return fusion


@pytest.mark.parametrize("rows, keys", [(256, 256), (100, 300)])
def test_a_circular_buffer_s_prologue_and_prefetches_read_the_block_s_count(rows, keys):
    fusion = _pipelined(rows, keys)
    report, kernel, got, want = _simulated(fusion, rows, keys)
    assert report.ok, report.codes
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    source = emit(kernel, cuda_headers=True)
    prefetch = next(line for line in source.splitlines() if "// the copies of iteration" in line)
    assert "blockIdx.x" in prefetch  # i + 2 below the block's count, not the loop's extent
    assert nvrtc.compile_to_cubin(source, "sm_90a", nvrtc.cuda_include_dir())[:4] == b"\x7fELF"
