"""The tensor-core layout probe without a GPU (codegen/emit/mma_probe.py, emit/mma.py): each
mma.sync probe compiles with NVRTC for sm_90a (ptxas checks the inline PTX), its indices are
the fragment maps rendered, and its source, run lane by lane on the CPU with the PTX ISA's
register semantics (tests/support/mma_probe_emulator.py), computes A B + C."""

from __future__ import annotations

import numpy as np
import pytest
import tileproof as tp
from tileproof.codegen.emit import mma as emit_mma
from tileproof.codegen.emit.cuda_expr import to_cuda
from tileproof.codegen.emit.mma_probe import element_offset, probe_kernel
from tileproof.codegen.runtime.nvrtc import compile_to_cubin
from tileproof.hw import mma

from support import mma_probe_emulator

INSTRUCTIONS = mma.mma_sync_instructions()
IDS = [i.name for i in INSTRUCTIONS]


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("inst", INSTRUCTIONS, ids=IDS)
def test_probe_compiles_for_sm_90a(inst):
    probe = probe_kernel(inst)
    cubin = compile_to_cubin(probe.source, "sm_90a")
    assert cubin[:4] == b"\x7fELF" and probe.name.encode() in cubin


@pytest.mark.parametrize("inst", INSTRUCTIONS, ids=IDS)
def test_probe_indices_are_the_rendered_fragment_maps(inst):
    src = probe_kernel(inst).source
    assert src.count(f'asm volatile("{inst.ptx} ') == 1
    assert src.count("cvt.rna.tf32.f32") == (inst.a.registers + inst.b.registers if inst.converts_to_tf32 else 0)
    for f, array in ((inst.a, "a"), (inst.b, "b"), (inst.c, "c"), (inst.c, "d")):
        for v in range(f.elements):
            assert f"{array}[{to_cuda(element_offset(f, v), cast=False, bits=32)}]" in src, (array, v)


@pytest.mark.parametrize("inst", INSTRUCTIONS, ids=IDS)
def test_probe_source_computes_the_product_under_ptx_semantics(inst):
    rng = np.random.default_rng(3)
    a = rng.integers(-8, 8, (inst.m, inst.k)).astype(np.float64)
    b = rng.integers(-8, 8, (inst.k, inst.n)).astype(np.float64)
    c = rng.integers(-100, 100, (inst.m, inst.n)).astype(np.float64)
    d = mma_probe_emulator.run(probe_kernel(inst).source, a, b, c)
    np.testing.assert_array_equal(d, a @ b + c)


def test_the_emulator_catches_a_probe_built_with_a_wrong_map():
    """A tf32 probe built from the 16-bit A map (the bf16 order used for tf32) is wrong under
    the PTX semantics."""
    good = mma.MMA_M16N8K8_TF32
    wrong_a = mma.MMA_M16N8K8["bfloat16"].a
    bad = mma.MmaInstruction(good.ptx, good.m, good.n, good.k, good.input_type, good.threads,
                             mma.Fragment("A", 16, 8, 32, 4, 32, wrong_a.position_map, wrong_a.holder_map),
                             good.b, good.c)
    a, b, c = np.arange(128.0).reshape(16, 8), np.eye(8), np.zeros((16, 8))
    d = mma_probe_emulator.run(probe_kernel(bad).source, a, b, c)
    assert not np.array_equal(d, a @ b + c)


def test_mma_sync_asm_numbers_the_operands_in_ptx_order():
    line = emit_mma.mma_sync(mma.MMA_M16N8K8["float16"], ["d0", "d1", "d2", "d3"], ["a0", "a1"], ["b0"],
                             ["c0", "c1", "c2", "c3"])
    assert line == ('asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, '
                    '{%6}, {%7, %8, %9, %10};" : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3) : "r"(a0), "r"(a1), '
                    '"r"(b0), "f"(c0), "f"(c1), "f"(c2), "f"(c3));')
    assert emit_mma.to_tf32("x", "y") == 'asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(x) : "f"(y));'
    assert emit_mma.pack_16bit("r", "lo", "hi") == "r = (unsigned)(lo) | ((unsigned)(hi) << 16);"


def test_mma_sync_refuses_wrong_register_counts_and_wgmma():
    inst = mma.MMA_M16N8K16["bfloat16"]
    with pytest.raises(tp.InternalError, match="takes 4 a registers, got 2"):
        emit_mma.mma_sync(inst, ["d"] * 4, ["a"] * 2, ["b"] * 2, ["c"] * 4)
    with pytest.raises(tp.InternalError, match="is not an mma.sync"):
        emit_mma.mma_sync(mma.wgmma(8, "bfloat16"), [], [], [], [])
