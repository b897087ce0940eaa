"""tcgen05.mma lowered from the schedule (codegen/lower/mma.py, codegen/emit/mma.py), without a
Blackwell GPU: every valid tcgen05 example compiles for sm_100a (NVRTC and ptxas check the PTX);
the kernel issues the MMA from thread 0 with the descriptors TCGEN05-SMEM-LAYOUT proved, the
instruction descriptor of its macro and D's proved column; after each batch the issuing thread
commits to the accumulator's mbarrier and every thread waits for it and fences before its
tcgen05.ld (execution/tcgen05_order.py); the first K step writes D, the others add; and the
emitted descriptor helper packs the fields as hw/tcgen05.py encodes them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.codegen.emit import mma as emit_mma
from tileproof.codegen.ir import MmaIssue, Tcgen05Commit, Tcgen05Wait, TmemAccess, walk
from tileproof.execution.indexing import block_dims
from tileproof.execution.tcgen05 import accumulator_cells, instruction_descriptor
from tileproof.execution.wgmma_operands import wgmma_operand
from tileproof.hw.tcgen05 import SM100_SWIZZLE_MODE, encode_smem_descriptor
from tileproof.model.expr import evaluate
from tileproof.rule_examples import tcgen05_tile
from tileproof.schedule_files import discover

from support.host_descriptor import host_descriptors
from support.lowering import lowered

ROOT = Path(__file__).resolve().parents[2]
CASES = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / "tcgen05.py")])}

pytestmark = pytest.mark.usefixtures("private_cache")


def test_all_tcgen05_examples_are_discovered():
    assert len(CASES) == 6 and all(c.expect.ok and c.target == "sm_100a" for c in CASES.values())


@pytest.mark.parametrize("name", list(CASES))
def test_tcgen05_example_compiles_for_sm100a(name):
    case = CASES[name]
    kernel = tp.compile(case.build(), target=case.target)
    assert kernel.cubin[:4] == b"\x7fELF"
    src = kernel.cuda_source
    body = src[src.index('extern "C"'):]
    order = ["tcgen05.alloc.cta_group::1", "tp_umma_f16(tmem_base", "tp_umma_commit(&tp_mma_bar_T2)",
             "tp_mbar_wait(&tp_mma_bar_T2, tp_mma_bar_T2_phase)", "tcgen05.fence::after_thread_sync;\" ::: \"memory\");"
             "  // tcgen05.ld below the wait", "tcgen05.ld.sync.aligned.32x32b", "tcgen05.dealloc.cta_group::1"]
    at = [body.index(s) for s in order]
    assert at == sorted(at), order
    assert "tp_mbar_init(&tp_mma_bar_T2, 1u);" in body  # one arrival a phase: the commit's
    assert "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;" in src
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" in src
    issue = body[body.rindex("\n", 0, body.index("tp_umma_f16(tmem_base")):]
    guard = body[body.rindex("if (", 0, body.index("tp_umma_f16(tmem_base")):body.index("tp_umma_f16(tmem_base")]
    assert "threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0" in guard, issue


def _issue(fusion):
    st = lowered(fusion, "sm_100a")
    (issue,) = [n for n in walk(st.kernel.body) if isinstance(n, MmaIssue)]
    return st, issue


@pytest.mark.parametrize("name", list(CASES))
def test_the_kernel_issues_the_proved_descriptors_and_d_column(name):
    fusion = CASES[name].build()
    st, issue = _issue(fusion)
    d = st.fusion.tensor("T2")
    launch = block_dims(st.fusion)
    majors = []
    for desc, role in zip(issue.descriptors, "AB"):
        model = wgmma_operand(d, launch, role)
        assert (desc.tensor, desc.lbo, desc.sbo, desc.layout) == (model.tensor.name, model.lbo, model.sbo,
                                                                   model.swizzle.value)
        assert desc.mode == SM100_SWIZZLE_MODE[model.swizzle.value]
        majors.append(model.major)
    assert issue.idesc == instruction_descriptor(d, tuple(majors)).encode()
    cells = accumulator_cells(d, launch)
    assert evaluate(issue.out.offset, {v: 0 for v in issue.out.offset.free_vars()}) == \
        evaluate(cells.first_column, {v: 0 for v in cells.first_column.free_vars()}) == 0
    assert issue.tmem_offset == 0  # the only tensor of its region


def test_the_first_k_step_writes_d_and_the_others_add():
    st, issue = _issue(CASES["tcgen05_k_steps_in_a_swizzled_row[swizzle=B128]"].build())
    (k,) = issue.k_indices
    src = tp.compile(CASES["tcgen05_k_steps_in_a_swizzled_row[swizzle=B128]"].build(), "sm_100a").cuda_source
    call = next(line for line in src.splitlines() if "tp_umma_f16(tmem_base" in line)
    assert re.search(r"tp_da, tp_db, 0x8200010u, \(unsigned\)\(\((i\d+)\) != 0\)\);", call), call
    # each K step's descriptors start 32 bytes (16 halves) further into the 128-byte swizzled rows
    (a, b) = issue.descriptors
    starts = [evaluate(a.start, {k.value: j}) for j in range(4)]
    assert starts == [0, 32, 64, 96]
    _, single = _issue(tcgen05_tile("tile")[0])
    assert single.k_indices == () and "(unsigned)(0));" in next(
        line for line in tp.compile(tcgen05_tile("tile")[0], "sm_100a").cuda_source.splitlines() if "tp_umma_f16(tmem" in line)


def test_a_batch_is_committed_and_waited_for_once():
    for name in ("tcgen05_tile[n=64]", "tcgen05_k_steps_in_a_swizzled_row[swizzle=B64]", "tcgen05_k_loop"):
        nodes = list(walk(lowered(CASES[name].build(), "sm_100a").kernel.body))
        kinds = [type(n) for n in nodes if isinstance(n, (MmaIssue, Tcgen05Commit, Tcgen05Wait, TmemAccess))]
        assert kinds == [MmaIssue, Tcgen05Commit, Tcgen05Wait, TmemAccess], name


def test_the_k_loop_completes_each_mma_before_the_next_tma_load():
    src = tp.compile(CASES["tcgen05_k_loop"].build(), "sm_100a").cuda_source
    loop = src[src.index("for (unsigned i1 = 0; i1 < 4U; ++i1)"):src.index("T3 = TMemLoad(T2)", src.index("extern"))]
    assert loop.index("tp_bulk_load_2d(tp_smem(T5)") < loop.index("tp_umma_f16") < loop.index("tp_umma_commit") \
        < loop.index("tp_mbar_wait(&tp_mma_bar_T2") < loop.index("__syncthreads();  // T5 is rewritten in the next iteration")


def test_the_emitted_descriptor_helper_encodes_as_the_model():
    """The kernel's tp_umma_desc, compiled for the host, packs start, LBO, SBO, the version bit and
    the 3-bit swizzle mode as hw/tcgen05.py's encode_smem_descriptor."""
    helper = emit_mma.TCGEN05_PRELUDE.split("// D (tensor memory)")[0]
    fields = [(0, 16, 1024, 1), (49152 + 96, 16, 1024, 1), (1024, 8192, 512, 2), (2 ** 18 - 16, 2 ** 18 - 16, 16, 3),
              (4096, 128, 256, 0)]
    out = host_descriptors(helper, "tp_umma_desc", [(s, l, b, SM100_SWIZZLE_MODE[y]) for s, l, b, y in fields])
    assert out == [encode_smem_descriptor(s, l, b, y) for s, l, b, y in fields]


def test_a_blackwell_macro_does_not_compile_for_sm90a():
    with pytest.raises(tp.ScheduleRejected, match="MMA-TARGET"):
        tp.compile(tcgen05_tile("tile")[0], "sm_90a")
