"""A plain copy of a fusion input with a tp.CacheOp loads it with ld.global.ca / .cg / .cs
(nvFuser's MemoryTest.LoadCache): the generated CUDA carries the qualifier in every word size
(1 to 16 bytes), NVRTC and ptxas accept it, and a cache op on a copy of
anything but a fusion input is rejected (LOWERING-SUPPORTED)."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from support.cached_loads import QUALIFIER, cached_copy

SIZES = [(tp.float32, 4), (tp.float32, 2), (tp.float32, 1), (tp.float16, 8), (tp.float16, 1), (tp.int8, 4),
         (tp.int8, 1), (tp.float64, 2)]


@pytest.mark.parametrize("cache_op", list(QUALIFIER))
@pytest.mark.parametrize("dtype,vector", SIZES)
def test_the_load_carries_the_cache_qualifier(cache_op, dtype, vector):
    fusion = cached_copy(cache_op, dtype, vector)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    source = tp.compile(fusion).cuda_source  # NVRTC, ptxas included: the inline PTX is accepted
    q, nbytes = QUALIFIER[cache_op], dtype.bytes * vector
    assert re.search(rf"tp_ld_global_{q}<{nbytes}>\(.*&T0\[", source), source
    assert f'"ld.global.{q}.' in source
    assert not any(f"tp_ld_global_{other}" in source for other in QUALIFIER.values() if other != q)


def test_a_load_into_shared_memory_carries_it_too():
    fusion = cached_copy(tp.CacheOp.Streaming, memory=tp.MemoryType.Shared)
    assert tp.verify(fusion).ok
    assert "tp_ld_global_cs<16>(&T1[" in tp.compile(fusion).cuda_source


def test_without_a_cache_op_the_load_is_plain():
    source = tp.compile(cached_copy(tp.CacheOp.Unspecified)).cuda_source
    assert "tp_ld_global" not in source and "ld.global" not in source


def test_a_cache_op_on_a_copy_of_an_intermediate_is_rejected():
    with tp.Fusion("cached_intermediate") as fusion:
        t0 = tp.make_contig_concrete_tensor([256])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, cache_op=tp.CacheOp.AllLevels)
        fusion.add_output(t2)
    report = tp.verify(fusion)
    assert "LOWERING-SUPPORTED" in report.codes
    message = next(d.message for d in report.errors if d.code == "LOWERING-SUPPORTED")
    assert "not a fusion input" in message and "ld.global.ca" in message


def test_the_cache_op_is_part_of_the_fingerprint():
    sources = {tp.compile(cached_copy(c)).cuda_source for c in QUALIFIER}
    assert len(sources) == 3
