"""wgmma lowered from the schedule (codegen/lower/mma.py, codegen/emit/mma.py): the descriptors the
kernel builds are the ones WGMMA-SMEM-LAYOUT proved (execution/wgmma_operands.py), the instruction names
every accumulator register of the warpgroup's D fragment, and a batch sits between a fence and
a commit + wait (execution/wgmma_order.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.codegen.emit import mma as emit_mma
from tileproof.codegen.ir import MmaIssue, WgmmaFence, WgmmaWait, walk
from support.host_descriptor import host_descriptors
from support.lowering import lowered
from tileproof.execution.clipped_holes import filled
from tileproof.model.expr import add, evaluate, floordiv, mod, mul, var
from tileproof.execution.indexing import block_dims
from tileproof.execution.conditions.mma import WGMMA_MARGIN
from tileproof.execution.wgmma_operands import wgmma_operand
from tileproof.hw.mma import macro_instruction
from tileproof.hw.wgmma import Descriptor, hardware_address
from tileproof.recipes import (Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, Operand, TmaPipeline,
                               hopper_gemm, tile_multiples)
from tileproof.testing import NotBuilt, compile_unverified


def _fusion(params=HopperGemmParams()):
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=params.tile.n)


def _issues(fusion):
    return [n for n in walk(lowered(fusion, "sm_90a").kernel.body) if isinstance(n, MmaIssue)]


@pytest.mark.parametrize("params", [HopperGemmParams(), HopperGemmParams(tile=HopperTile(m=128, n=256),
                                                                         pipeline=TmaPipeline(stages=4, prefetch=2))])
def test_the_kernel_builds_the_proved_descriptors(params):
    fusion = _fusion(params)
    (issue,) = _issues(fusion)
    d = fusion.tensors[2]
    for desc, role in zip(issue.descriptors, "AB"):
        model = wgmma_operand(d, block_dims(fusion), role)
        assert (desc.lbo, desc.sbo, desc.layout) == (model.lbo, model.sbo, model.swizzle.value) == (16, 1024, 1)
        assert desc.tensor == model.tensor.name
        # the emitted start, at every instance of one block: the model's start, and on a swizzle row 0
        names = sorted(desc.start.free_vars())
        for values in ((0,) * len(names), tuple(range(1, len(names) + 1))):
            env = dict(zip(names, values))
            start = evaluate(desc.start, env)
            assert start % 1024 in range(0, 128, 32)  # row 0 of a pattern, a K step of 32 bytes in
            assert Descriptor(start, desc.lbo, desc.sbo, model.swizzle).field_problems() == []
            # the hardware reads element (1, 3) one row and 6 bytes on, through the swizzle
            assert hardware_address(start, "K", model.swizzle, 2, 1, 3, desc.lbo, desc.sbo) == (start + 128 + 6) ^ (
                ((start + 128 + 6) // 128 % 8) * 16)


@pytest.mark.parametrize("n", [128, 256])
def test_the_instruction_names_every_accumulator_of_the_d_fragment(n):
    fusion = _fusion(HopperGemmParams(tile=HopperTile(m=128, n=n)))
    src = tp.compile(fusion, "sm_90a").cuda_source
    (asm,) = [line for line in src.splitlines() if "wgmma.mma_async" in line and "asm volatile" in line]
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16" in asm
    assert asm.count('"+f"(') == n // 2 and len(set(re.findall(r'"\+f"\(([^)]*)\)', asm))) == n // 2
    assert '"l"(tp_da), "l"(tp_db)' in asm
    with pytest.raises(Exception, match="d registers"):
        emit_mma.wgmma(macro_instruction(fusion.tensors[2].definition.macro, "bfloat16"), ["x"], "a", "b")


def test_a_batch_is_fenced_and_waited_for():
    nodes = list(walk(lowered(_fusion(), "sm_90a").kernel.body))
    kinds = [type(n) for n in nodes if isinstance(n, (WgmmaFence, MmaIssue, WgmmaWait))]
    assert kinds == [WgmmaFence, MmaIssue, WgmmaWait]


def test_hopper_macros_exist_on_sm_90a_only():
    report = tp.verify(_fusion(), "sm_100a")
    assert "MMA-TARGET" in report.codes


WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))


def _source(fusion):
    from tileproof.codegen.emit import emit

    return emit(lowered(fusion, "sm_90a").kernel, cuda_headers=False)


def _ptxas_report(src: str) -> str:
    """ptxas -v's report on the kernel `src` for sm_90a, through nvcc (the test skips without it)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc here: ptxas's report on the kernel is not available")
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "k.cu"
        cu.write_text(src)
        out = subprocess.run([nvcc, "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o", str(Path(tmp) / "k.cubin"), str(cu)],
                             capture_output=True, text=True, check=True)
    return out.stdout + out.stderr


def test_a_warp_specialized_kernel_splits_its_block_by_role():
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS))
    src = _source(_fusion(params))
    assert "__launch_bounds__(384, 1)" in src  # two consumer warpgroups and the producer
    assert "tp_mbar_init(&tp_empty_T4[s], 2u);" in src  # one arrival per consumer warpgroup
    assert "unsigned tp_empty_T4_phase = ~0u;" in src  # a fresh stage's first wait passes
    producer, consumer = src.split("  if (threadIdx.y == 2ULL) {  // the producer warpgroup", 1)[1].split("return;", 1)
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in producer and "if (threadIdx.x == 0ULL) {" in producer
    assert producer.count("tp_bulk_load_2d") == 2 and "tp_empty_T4[tp_s]" in producer and "wgmma" not in producer
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in consumer and "tp_bulk_load" not in consumer
    assert consumer.count("tp_mbar_arrive(&tp_empty_T4[") == 2  # in the loop (datum i - 1) and after it
    assert "threadIdx.y < 2" not in consumer  # implied by the role: no predicate varies by warpgroup
    assert "__syncthreads" not in consumer


def test_a_warp_specialized_producer_drains_before_it_exits():
    """After its loads the producer thread waits once more on every stage's empty mbarrier (the
    last release of each), so no consumer arrives on the mbarriers of a block that has left."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS))
    src = _source(_fusion(params))
    producer = src.split("// the producer warpgroup", 1)[1].split("return;", 1)[0]
    drain = producer[producer.rindex("for (unsigned tp_s = 0; tp_s < 4u; ++tp_s)"):]
    assert "tp_mbar_wait(&tp_empty_T4[tp_s], (tp_empty_T4_phase >> tp_s) & 1u);" in drain
    assert "tp_bulk_load" not in drain


def test_a_cluster_multicasts_b_and_releases_in_every_block():
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8),
                              cluster=Cluster(size=2))
    src = _source(_fusion(params))
    assert "__cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)" in src
    setup = src[src.index("tp_mbar_init(&tp_empty_T4[s]"):src.index("unsigned tp_bar_T4_phase")]
    assert "tp_mbar_init(&tp_empty_T4[s], 4u);" in setup  # two consumer warpgroups in each of two blocks
    assert "fence.mbarrier_init.release.cluster;" in setup and "barrier.cluster.arrive.release.aligned;" in setup
    assert "__syncthreads" not in setup
    producer, consumer = src.split("// the producer warpgroup", 1)[1].split("return;", 1)
    # A's tile: each block its own; B's: loaded by the cluster's first block into both, expected by both
    assert producer.count("tp_bulk_load_2d(") == 1 and producer.count("tp_bulk_load_multicast_2d(") == 1
    b = producer[producer.index("// T5 = TMA(T1)"):]
    assert b.index("tp_mbar_expect_tx(&tp_bar_T5") < b.index(
        "if (tp_cluster_ctaid_x() == (unsigned)(0ULL)) tp_bulk_load_multicast_2d")  # one box: the first block's
    assert "(unsigned short)(3u << (tp_cluster_ctarank() - tp_cluster_ctaid_x() * 1u))" in b
    assert consumer.count("tp_mbar_arrive_cluster(&tp_empty_T4[") == 2 and "tp_mbar_arrive(&tp_empty" not in consumer
    report = _ptxas_report(src)
    assert "Used" in report and "serialized" not in report, report


def test_a_spread_multicast_tile_is_loaded_a_box_by_each_block():
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8),
                              cluster=Cluster(size=2, spread=True))
    src = _source(_fusion(params))
    assert "tp_mbar_init(&tp_bar_T5[s], 2u);" in src  # both boxes arrive on each block's mbarrier
    b = src[src.index("// T5 = TMA(T1)"):]
    b = b[:b.index("}")]
    box = re.search(r"if \(tp_cluster_ctaid_x\(\) == \(unsigned\)\(\((i\d+) % 2ULL\)\)\) tp_bulk_load_multicast_2d", b)
    assert box, b  # box j by the block of rank j along x
    assert f"(blockIdx.y * 256ULL) + ({box.group(1)} * 128ULL)" in b  # its 128 rows of B
    assert "(unsigned short)(3u << (tp_cluster_ctarank() - tp_cluster_ctaid_x() * 1u))" in b


@pytest.mark.parametrize("pipeline", [TmaPipeline(stages=4, prefetch=2),
                                      TmaPipeline(stages=4, prefetch=2, warp_specialized=WS)])
def test_no_wgmma_is_guarded_by_a_predicate_that_varies_by_warpgroup(pipeline):
    """ptxas serializes every wgmma of a kernel (C7520) where one sits in a branch on threadIdx, and
    where a non-wgmma instruction sets an accumulator inside the pipeline (C7515): the wgmma runs
    unguarded (a tile past M computes rows no store reads) and the zeroed accumulators are pinned
    before the loop."""
    src = _source(_fusion(HopperGemmParams(tile=HopperTile(m=128, n=256), pipeline=pipeline, grid=GridOrder(group=8))))
    issue = src.index("wgmma.mma_async")
    guard = src.rfind("\n", 0, src.rfind("// T2 += T4 x T5", 0, issue))
    assert "threadIdx" not in src[guard:src.index("tp_wgmma_desc", guard)]
    assert 'asm volatile("" : "+f"(tp_acc_T2[k]) :: "memory");' in src
    report = _ptxas_report(src)
    assert "Used" in report and "serialized" not in report, report


def test_partial_tiles_keep_the_accumulators_in_registers():
    """With M and N not multiples of the tile, the copy of the accumulators into D's register tile
    is not predicated (rows past M hold values no store reads: a predicated copy kept both tiles
    live, 256 registers) and the store loop over them is unrolled (a serial one indexed them at
    run time: local memory)."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8))
    fusion = hopper_gemm(8000, 8000, 8192, params)
    src = _source(fusion)
    copy = src[src.index("// T2 = the accumulators"):]
    assert copy.split("\n", 1)[1].lstrip().startswith("T2[")  # no `if (...)` around it
    store = src[src.rindex("for (", 0, src.index("// T3 = set(T2)")) - 20:src.index("// T3 = set(T2)")]
    assert "#pragma unroll" in store
    report = _ptxas_report(src)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, report


def test_a_stmatrix_epilogue_stores_through_shared_memory_in_the_consumers():
    """A bfloat16 output through stmatrix and a TMA store in a warp-specialized kernel: the
    consumers write the staging tile (stmatrix unpredicated: the role implies threadIdx.y < 2),
    fence it for the async proxy, meet at their named barrier, and one thread stores the boxes."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=WS), grid=GridOrder(group=8),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    src = _source(_fusion(params))
    consumer = src.split("// the producer warpgroup", 1)[1].split("return;", 1)[1]
    # once: the epilogue runs at its holes too, which the TMA store clips (execution/clipped_holes.py),
    # so it has no hole predicates and no second copy for whole tiles (codegen/lower/whole_tile.py)
    assert consumer.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 1
    assert "// a whole tile: no hole predicates" not in consumer
    epilogue = consumer[consumer.index("stmatrix.sync"):]
    fence, barrier, store = (epilogue.index(s) for s in ("tp_fence_async_smem();", "bar.sync 1, 256;",
                                                          "tp_bulk_store_2d(&tmap_T3"))
    assert fence < barrier < store
    assert "threadIdx.y < 2" not in consumer


def test_a_persistent_tma_store_runs_on_into_the_next_tile():
    """The store of tile i is waited for (cp.async.bulk.wait_group.read) only before tile i + 1's
    stmatrix rewrites the staging tile, then the consumers meet; the kernel ends with a wait."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=WS),
                              grid=GridOrder(group=8, persistent=8),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    src = _source(_fusion(params))
    consumer = src.split("// the producer warpgroup", 1)[1].split("return;", 1)[1]
    wait, barrier, stmatrix, store = (consumer.index(s) for s in (
        "tp_bulk_store_wait();  // T6's TMA store of the previous iteration", "bar.sync 1, 256;", "stmatrix.sync",
        "tp_bulk_store_2d(&tmap_T3"))
    assert consumer.index("tp_wgmma_wait<0>") < wait < barrier < stmatrix < store
    after = consumer[store:]
    assert after.index("tp_bulk_store_commit();") < after.index("tp_bulk_store_wait();  // the TMA stores have read")
    assert after.count("tp_bulk_store_wait();") == 1 and "bar.sync" not in after  # nothing waits in the tile loop


def test_a_persistent_grid_loads_the_tiles_of_the_consumers_tile():
    """The TMA coordinates of A's and B's tiles are D's M and N tiles of tile i * 132 + blockIdx.x."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=8, persistent=132))
    src = _source(_fusion(params))
    producer = src.split("// the producer warpgroup", 1)[1].split("return;", 1)[0]
    assert "blockIdx.y" not in src and "blockIdx.z" not in src
    tile = "((i0 * 132ULL) + blockIdx.x)"
    assert f"(((({tile} / 8ULL) / ((s_N + 256ULL - 1) / 256ULL)) * 8ULL) + ({tile} % 8ULL)) * 128ULL" in producer
    assert f"((({tile} / 8ULL) % ((s_N + 256ULL - 1) / 256ULL)) * 256ULL)" in producer


@pytest.mark.parametrize("a_major, b_major, flags", [("K", "K", "0, 0"), ("MN", "K", "1, 0"), ("K", "MN", "0, 1"),
                                                     ("MN", "MN", "1, 1")])
def test_an_mn_major_operand_sets_the_transpose_bit(a_major, b_major, flags):
    """imm-trans-a / imm-trans-b are 1 exactly for the MN-major operands, whose descriptors carry
    the SBO between 8 K rows and, where the instruction spans more than 64 rows (B's 128), the LBO
    between 64-row spans (8192 bytes: a box of 64 K rows; A's 64 rows need none)."""
    fusion = _fusion(HopperGemmParams(a=Operand(major=a_major), b=Operand(major=b_major)))
    assert f"p, 1, 1, {flags};" in _source(fusion)
    for role, major in (("A", a_major), ("B", b_major)):
        tv = next(t for t in fusion.tensors if t.name == "T2")
        op = wgmma_operand(tv, block_dims(fusion), role)
        assert op.major == major
        if major == "MN":
            assert (op.lbo, op.sbo) == (8192 if op.rows > 64 else 16, 1024)


def test_the_emitted_descriptor_helper_encodes_as_the_model():
    """The kernel's tp_wgmma_desc (codegen/emit/mma.py), compiled for the host, packs start, LBO,
    SBO and the layout as Descriptor.encode does: each field in 16-byte units (tilelang #813 wrote
    LBO and SBO in bytes, 16 times too large), in its own bit range."""
    helper = ("unsigned tp_smem(const void* p) { return (unsigned)(unsigned long)p; }\n"  # the host's stand-in
              + emit_mma.WGMMA_PRELUDE.split("__device__ __forceinline__ void")[0])
    fields = [(0, 16, 1024, tp.MmaInputSmemSwizzle.B128), (49152 + 96, 16, 1024, tp.MmaInputSmemSwizzle.B128),
              (1024, 8192, 1024, tp.MmaInputSmemSwizzle.B64), (2 ** 18 - 16, 2 ** 18 - 16, 16, tp.MmaInputSmemSwizzle.B32),
              (4096, 128, 256, tp.MmaInputSmemSwizzle.NoSwizzle)]
    out = host_descriptors(helper, "tp_wgmma_desc", [(s, l, b, y.value) for s, l, b, y in fields])
    assert out == [Descriptor(s, l, b, y).encode() for s, l, b, y in fields]
    assert (out[0] >> 16) & 0x3FFF == 1 and (out[0] >> 32) & 0x3FFF == 64  # LBO 16 B, SBO 1024 B
    # the form from the start in 16-byte units (a 1024-byte aligned base plus an offset of whole units)
    assert host_descriptors(helper, "tp_wgmma_desc16", [(s // 16, l, b, y.value) for s, l, b, y in fields]) == out
    # ... whose units leave out the bits above 2^18 that a cluster's blocks see in their shared addresses
    # (unmasked, the rank's bit 24 carried into LBO: an MN-major B, which reads LBO, ran wrong on rank 1)
    ranked = helper + ("unsigned long long ranked(unsigned s, unsigned l, unsigned b, unsigned y) {\n"
                       "  return tp_wgmma_desc16(tp_smem16((const void*)(unsigned long)(s | (1u << 24))), l, b, y); }")
    assert host_descriptors(ranked, "ranked", [(s, l, b, y.value) for s, l, b, y in fields]) == out


def test_a_descriptor_start_of_whole_units_is_emitted_in_units():
    """The start offset's terms, each a multiple of 16 bytes, are divided term by term (so that the
    unrolled copies of a batch add constants to one base); a term that is not one keeps the byte form."""
    i, j = var("i"), var("j")
    q = emit_mma.exact_quotient(add(mul(mod(i, 4), 32), mul(j, 8192), 1024), 16)
    assert q is not None and all(evaluate(q, {"i": a, "j": b}) * 16 == (a % 4) * 32 + b * 8192 + 1024
                                 for a in range(8) for b in range(3))
    assert emit_mma.exact_quotient(add(mul(i, 8), 16), 16) is None
    assert emit_mma.exact_quotient(mul(floordiv(i, 8), 16), 16) is not None


@pytest.mark.parametrize("consumers, fits, over", [(3, 200, 208), (4, 136, 144)])
def test_one_wgmma_fits_in_the_registers_ptxas_compiles_for(consumers, fits, over):
    """WGMMA-INSTRUCTION-REGISTERS' bound is ptxas's own: with a producer and three (four)
    consumer warpgroups a thread gets 128 (96) registers; m64n200 (m64n136) compiles, and
    m64n208 (m64n144) is rejected, where NVRTC asks for its accumulators + WGMMA_MARGIN."""
    def fusion(n):
        spec = tp.WarpSpecialized(tp.ParallelType.TIDy)
        params = HopperGemmParams(tile=HopperTile(m=64 * consumers, n=n),
                                  pipeline=TmaPipeline(stages=2, prefetch=1, warp_specialized=spec))
        return tile_multiples(hopper_gemm("M", "N", "K", params), 64, m_multiple=64 * consumers, n_multiple=n)

    assert tp.compile(fusion(fits), "sm_90a").cubin
    with pytest.raises(NotBuilt) as e:
        compile_unverified(fusion(over), "sm_90a")
    assert e.value.report.codes == ["WGMMA-INSTRUCTION-REGISTERS"]
    assert f"register target of {over // 2 + WGMMA_MARGIN}" in e.value.__cause__.log


def test_a_block_tile_wholly_past_m_multiplies_the_zeros_its_tma_loads():
    """At 8000 x 8000 in clusters of two along M the 63 M tiles are padded to 64, and the 64th
    block tile's rows (8064 on) are past M. Its TMA loads are issued all the same (boxes wholly
    out of bounds, which the hardware fills with zeros, their bytes counted) and its wgmmas
    multiply those zeros (execution/clipped_holes.py filled): no guard in the K loop, and no branch
    for ptxas to inject a warpgroup.arrive around (C7519: a branch around the wgmma, 5 % at 8000^2
    on an H200). The producer arrives nowhere but through the TMA's transaction."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8),
                              cluster=Cluster(size=2))
    fusion = hopper_gemm(8000, 8000, 8192, params)
    assert filled(fusion.snapshot()) == {"T2", "T4", "T5"}
    (issue,) = _issues(fusion)
    assert issue.conds == []
    src = _source(fusion)
    assert "tp_mbar_arrive(&tp_bar_T4" not in src and "if (tp_inv" not in src
    report = _ptxas_report(src)
    assert "C7519" not in report and "C7520" not in report and "serializ" not in report.lower(), report


@pytest.mark.parametrize("block", [(128, 192), (128, 224)])
def test_a_partial_tiles_epilogue_keeps_its_registers(block):
    """A 192- or 224-wide tile at 8000 x 8000, stored from registers: the store's predicates divide
    by 42 (36); with those divisions inline NVVM left the cast's loop rolled and the accumulators
    in local memory (400 and 464 bytes of stack a thread, seen with the stmatrix epilogue's
    predicates before it ran at its holes). Named before the unrolled nest (lower/invariants.py),
    they leave no stack frame."""
    params = HopperGemmParams(tile=HopperTile(m=block[0], n=block[1]),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=16, persistent=128), cluster=Cluster(size=2),
                              epilogue=Epilogue(dtype=tp.bfloat16))
    src = _source(hopper_gemm(8000, 8000, 8192, params))
    assert "const unsigned tp_inv0 = " in src
    report = _ptxas_report(src)
    assert re.findall(r"(\d+) bytes stack frame", report) == ["0"], report
