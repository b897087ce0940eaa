"""Tensor-memory lowering (codegen/lower/tmem.py) without a Blackwell GPU.

1. Every valid tensor-memory example compiles for sm_100a (NVRTC + ptxas check the tcgen05 PTX).
2. The emitted addresses are the verified ones: for every thread, loop point and register,
   the cell an instruction reaches (its address Expr, evaluated, plus the data-path table of
   PTX ISA 9.7.16.8, written out in tests/support/tmem_sim.py) is the cell the verifier's access model assigns to that element.
   A CPU simulation of the lowered kernel (tests/support/tmem_sim.py) also runs the data through
   tensor memory and compares the outputs with the numpy reference. Mutated lowerings fail both.
3. Tensor memory on sm_90a is refused with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.ir import Sync, TmemAccess, TmemAlloc, TmemDealloc
from tileproof.codegen.lower import lower
from support.lowering import decisions_for
from tileproof.codegen.runtime.reference import reference
from tileproof.model.expr import add, evaluate
from tileproof.model.targets import get_target
from tileproof.hw.tcgen05 import TmemPattern
from tileproof.model.types import Direction
from tileproof.schedule_files import discover

from support import shared_kernels
from support.tmem_sim import SimulationError, check_addresses, run_kernel, tmem_accesses_in
from nvfuser.test_nvfuser_tmem import tmem_add_kernel

ROOT = Path(__file__).resolve().parents[2]
SM100 = get_target("sm_100a")
P = tp.ParallelType
TMEM_FILES = ["tmem_access.py", "tmem_complicated.py", "tmem_performant_copy.py", "tmem_transpose.py",
              "tmem_vectorization.py", "tmem_packed.py"]
PACKED_COPIES = {"bfloat16": 8192, "float16": 8192, "int8": 16384, "float64": 2048}  # dtype -> T0_0, 2 blocks
CASES = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / f) for f in TMEM_FILES])}


pytestmark = pytest.mark.usefixtures("private_cache")


def lowered(fusion):
    snapshot = fusion.snapshot()
    return snapshot, lower(snapshot, SM100, decisions_for(snapshot, SM100))


# -- schedules for the other tcgen05 shapes (the examples all use 32x32b) ----------------------


def copy_chain(name, shape, dtype=tp.float32):
    """T0 (gmem) -> T1 (reg) -> T2 (tmem) -> T3 (reg) -> T4 (gmem)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor(shape, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        t3 = tp.set(t2)
        t4 = tp.set(t3)
        fusion.add_output(t4)
    t2.set_memory_type(tp.MemoryType.Tensor)
    return fusion, (t1, t2, t3, t4)


def shaped(name, shape, transform, vectorize=True, dtype=tp.float32):
    """T2 allocated [lanes | columns] along its logical domain; every tensor scheduled by
    `transform` to [TIDx{32}, registers]. Elements narrower than 32 bits: the column axis is
    `per_word` times longer, its innermost `per_word` elements share a register (an extra
    vectorized axis after `transform`'s)."""
    per_word = max(1, 4 // dtype.bytes)
    fusion, tensors = copy_chain(name, shape[:-1] + [shape[-1] * per_word], dtype)
    t1, t2, t3, t4 = tensors
    t2.set_allocation_domain(t2.get_loop_domain(), True)
    t2.set_tmem_dim_sep_pos(1)
    for t in tensors:
        if per_word > 1:
            t.split(-1, per_word)
        transform(t)
        t.axis(0).parallelize(P.TIDx)
    if vectorize:
        for t in (t2, t3):
            t.axis(-1).parallelize(P.Vectorize)
            if per_word > 1:
                t.axis(-2).parallelize(P.Vectorize)
    return fusion


def s16x64b(vectorize=True, dtype=tp.float32):
    """lane = t/4 + 8(t%2), column = 2r + (t/2)%2: [Lh, Ll | Cr, Cb] -> [Ll*Cb*Lh = TIDx, Cr]."""
    def transform(t):
        t.split(0, 8)
        t.split(2, 2)
        t.reorder({0: 2, 1: 0, 2: 3, 3: 1})
        t.merge(0)
        t.merge(0)
    return shaped("s16x64b" + ("" if vectorize else "_serial"), [16, 8], transform, vectorize, dtype)


def s16x128b(dtype=tp.float32):
    """lane = t/4 + 8h, column = 4j + t%4, r = 2j + h: [Lh, Ll | Cj, Cl] -> [Ll*Cl, Cj*Lh]."""
    def transform(t):
        t.split(0, 8)
        t.split(2, 4)
        t.reorder({0: 3, 1: 0, 2: 2, 3: 1})
        t.merge(0)
        t.merge(1)
    return shaped("s16x128b", [16, 8], transform, dtype=dtype)


def s16x256b():
    """lane = t/4 + 8h, column = 8j + 2(t%4) + e, r = 4j + 2h + e."""
    def transform(t):
        t.split(0, 8)
        t.split(2, 2)
        t.split(2, 4)
        t.reorder({0: 3, 1: 0, 2: 2, 3: 1, 4: 4})
        t.merge(0)
        t.merge(1)
        t.merge(1)
    return shaped("s16x256b", [16, 16], transform)


def s16x32bx2(dtype=tp.float32):
    """lane = t%16, column = r + 4(t/16): [L | Cs, Cr] -> [Cs*L, Cr]."""
    def transform(t):
        t.split(1, 4)
        t.reorder({0: 1, 1: 0})
        t.merge(0)
    return shaped("s16x32bx2", [16, 8], transform, dtype=dtype)


def partial_warps():
    """A tensor-memory copy by TIDx{32} in a block of 64 threads (another output needs them):
    the second warp skips the tcgen05 instructions, a warp-uniform predicate."""
    with tp.Fusion("partial_warps") as fusion:
        a = tp.make_contig_concrete_tensor([32, 2])
        b = tp.make_contig_concrete_tensor([64])
        fusion.add_input(a)
        fusion.add_input(b)
        t1 = tp.set(a)
        t2 = tp.set(t1)
        t3 = tp.set(t2)
        t4 = tp.set(t3)
        fusion.add_output(t4)
        c = tp.set(b)
        fusion.add_output(c)
    t2.set_memory_type(tp.MemoryType.Tensor)
    t2.set_tmem_dim_sep_pos(1)
    for t in (t1, t2, t3, t4):
        t.axis(0).parallelize(P.TIDx)
    c.axis(0).parallelize(P.TIDx)
    return fusion


def explicit_op_types():
    """The same copy written with LoadStoreOpType.TMemStore / TMemLoad."""
    with tp.Fusion("explicit_op_types") as fusion:
        t0 = tp.make_contig_concrete_tensor([128, 2, 2])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, tp.LoadStoreOpType.TMemStore)
        t3 = tp.set(t2, tp.LoadStoreOpType.TMemLoad)
        t4 = tp.set(t3)
        fusion.add_output(t4)
    t2.set_memory_type(tp.MemoryType.Tensor)
    for t in (t1, t2, t3, t4):
        t.axis(0).parallelize(P.TIDx)
        t.axis(1).parallelize(P.TIDy)
        t.axis(2).parallelize(P.TIDz)
    t2.set_tmem_dim_sep_pos(1)
    return fusion


SHAPED = {"16x64b": s16x64b, "16x64b serial": lambda: s16x64b(False), "16x128b": s16x128b,
          "16x256b": s16x256b, "16x32bx2": s16x32bx2,
          # packed: 2 bfloat16 / 4 int8 per register; a float64 over two registers, so 16x128b's
          # element layout (column 4j + t%4 of 64-bit elements) is 16x256b's in 32-bit columns
          "16x64b bfloat16": lambda: s16x64b(dtype=tp.bfloat16), "16x32bx2 int8": lambda: s16x32bx2(tp.int8),
          "16x256b float64": lambda: s16x128b(tp.float64), "16x128b float16": lambda: s16x128b(tp.float16)}


# -- 1. every valid tensor-memory example compiles for sm_100a ---------------------------------


def test_all_tmem_examples_are_discovered():
    assert len(CASES) == 5 + 2 + 1 + 1 + 64 + 5 and all(c.expect.ok and c.target == "sm_100a" for c in CASES.values())


@pytest.mark.parametrize("name", list(CASES))
def test_tmem_example_compiles_for_sm100a(name):
    case = CASES[name]
    kernel = shared_kernels.compiled(case.build(), case.target)  # test_accepted_compiles.py's, where it compiled it
    assert kernel.cubin[:4] == b"\x7fELF"
    src = kernel.cuda_source
    for ptx in ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32", "tcgen05.relinquish_alloc_permit",
                "tcgen05.st.sync.aligned.", "tcgen05.wait::st.sync.aligned", "tcgen05.ld.sync.aligned.",
                "tcgen05.wait::ld.sync.aligned", "tcgen05.fence::before_thread_sync",
                "tcgen05.fence::after_thread_sync", "tcgen05.dealloc.cta_group::1.sync.aligned.b32"):
        assert ptx in src, ptx
    # the allocation is the verified column budget (one tensor: its own power of two >= 32)
    columns = int(re.search(r"shared::cta\.b32 \[%0\], (\d+);", src).group(1))
    if "columns_allocated" in case.expect.allocations.get("T2", {}):
        assert columns == case.expect.allocations["T2"]["columns_allocated"]
    # every barrier of a kernel with tensor memory is fenced for tcgen05
    lines = src.splitlines()
    for k, line in enumerate(lines):
        if "__syncthreads()" in line:
            assert "tcgen05.fence::before_thread_sync" in lines[k - 1] and "after_thread_sync" in lines[k + 1]


@pytest.mark.parametrize("st_vec,ld_vec", [(1, 128), (8, 8), (128, 4)])
def test_vectorized_tmem_access_is_one_instruction_per_vector(st_vec, ld_vec):
    """The seed's check: tcgen05.st/ld 32x32b .x<vector factor>."""
    src = tp.compile(CASES[f"tmem_vectorization[st_vec={st_vec},ld_vec={ld_vec}]"].build(), target="sm_100a").cuda_source
    assert f"tcgen05.st.sync.aligned.32x32b.x{st_vec}.b32" in src
    assert f"tcgen05.ld.sync.aligned.32x32b.x{ld_vec}.b32" in src


def test_performant_copy_uses_x8():
    src = tp.compile(CASES["performant_vectorized_copy"].build(), target="sm_100a").cuda_source
    assert "tcgen05.st.sync.aligned.32x32b.x8.b32" in src and "tcgen05.ld.sync.aligned.32x32b.x8.b32" in src
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" in src


@pytest.mark.parametrize("name", list(SHAPED))
def test_every_tcgen05_shape_compiles(name):
    fusion = SHAPED[name]()
    kernel = tp.compile(fusion, target="sm_100a")
    shape = name.split()[0]
    assert kernel.cubin[:4] == b"\x7fELF"
    assert f"tcgen05.st.sync.aligned.{shape}.x" in kernel.cuda_source
    assert f"tcgen05.ld.sync.aligned.{shape}.x" in kernel.cuda_source
    if shape == "16x32bx2":  # immHalfSplitoff: threads 16..31 four columns further
        assert "tcgen05.st.sync.aligned.16x32bx2.x4.b32 [%0], 4, {" in kernel.cuda_source


def test_alloc_comes_first_and_dealloc_last():
    _, st = lowered(CASES["tmem_transpose"].build())
    body = st.kernel.body
    assert isinstance(body[0], TmemAlloc) and isinstance(body[-1], TmemDealloc)
    assert body[0].columns == 32 and body[0].regions == [("T2", 0, 32)]
    accesses = [a for a, _ in tmem_accesses_in(body)]
    assert [a.direction for a in accesses] == [Direction.STORE, Direction.LOAD]
    assert all(a.pattern is TmemPattern.P32x32b and a.repeat == 1 for a in accesses)
    # a barrier between the store by some threads and the load by others
    k_st = next(k for k, n in enumerate(body) if tmem_accesses_in([n]) and tmem_accesses_in([n])[0][0].direction is Direction.STORE)
    k_ld = next(k for k, n in enumerate(body) if tmem_accesses_in([n]) and tmem_accesses_in([n])[0][0].direction is Direction.LOAD)
    assert any(isinstance(n, Sync) for n in body[k_st + 1:k_ld])


def test_explicit_tmem_op_types_lower_like_set():
    kernel = tp.compile(explicit_op_types(), target="sm_100a")
    assert "tcgen05.st.sync.aligned.32x32b.x1.b32" in kernel.cuda_source


def test_partial_warps_are_predicated_as_whole_warps():
    fusion = partial_warps()
    kernel = tp.compile(fusion, target="sm_100a")
    assert kernel.launch_params.block == (64, 1, 1)
    a = next(a for a, _ in tmem_accesses_in(kernel.ir.body))
    assert [(str(c.lhs), c.op, str(c.rhs)) for c in a.conds] == [("threadIdx.x", "<", "32")]
    assert "warp-uniform (TMEM-WARP-COLLECTIVE)" in a.conds[0].why


# -- 2. the addresses are the verified ones ----------------------------------------------------


SMALL = ["warp_xyz", "warp_group_xyz", "warp_group_xy_col_z", "warp_group_x_col_yz", "x1_warp_group_y_col_z",
         "tmem_transpose", "tmem_vectorization[st_vec=1,ld_vec=1]", "tmem_vectorization[st_vec=4,ld_vec=8]",
         "tmem_vectorization[st_vec=128,ld_vec=2]", "tmem_vectorization[st_vec=16,ld_vec=16]", "packed_transpose"]


def example_fusions():
    out = {name: CASES[name].build for name in SMALL}
    out.update({f"shape {k}": v for k, v in SHAPED.items()})
    out["partial_warps"] = partial_warps
    return out


FUSIONS = example_fusions()


@pytest.mark.parametrize("name", list(FUSIONS))
def test_addresses_match_the_verified_model(name):
    _, st = lowered(FUSIONS[name]())
    assert check_addresses(st) > 0


def test_addresses_of_the_performant_copy_match_at_a_bound_size():
    _, st = lowered(CASES["performant_vectorized_copy"].build())
    assert check_addresses(st, symbols={"T0_0": 4096}) == 2 * 256 * 8 * 2  # 2 blocks x 256 threads x 8 regs x st/ld


@pytest.mark.parametrize("name", ["complicated1", "complicated2"])
def test_addresses_of_the_swizzled_examples_match(name):
    """4096 x 4096: the first and last block, every thread, three points of every loop."""
    _, st = lowered(CASES[name].build())
    last = tuple(evaluate(e, {}) - 1 for e in st.kernel.grid)
    assert check_addresses(st, blocks=[(0, 0, 0), last], values=lambda e: sorted({0, e // 2, e - 1})) > 0


def random_inputs(fusion, symbols=None):
    """Values each input's dtype holds exactly after rounding (integers for integer dtypes)."""
    rng = np.random.default_rng(0)
    out = []
    for t in fusion.inputs:
        shape = [evaluate(i.extent_expr, symbols or {}) for i in t.logical]
        if t.dtype.name.startswith("int"):
            out.append(rng.integers(-100, 100, shape).astype(np.float64))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32).astype(np.float64))
    return out


@pytest.mark.parametrize("name", list(FUSIONS))
def test_simulated_kernel_copies_through_tensor_memory(name):
    fusion, st = lowered(FUSIONS[name]())
    inputs = random_inputs(fusion)
    outs = run_kernel(st.kernel, fusion, inputs)
    for got, want in zip(outs, reference(fusion, inputs)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", list(PACKED_COPIES))
def test_simulated_packed_copy(dtype):
    """2 bfloat16 / 4 int8 per register, a float64 over two: the bytes through tensor memory
    come back as the elements, and the addresses are the verified ones."""
    fusion, st = lowered(CASES[f"packed_copy[dtype={dtype}]"].build())
    symbols = {"T0_0": PACKED_COPIES[dtype]}
    (a,) = random_inputs(fusion, symbols)
    (out,) = run_kernel(st.kernel, fusion, [a], symbols=symbols)
    np.testing.assert_array_equal(out, reference(fusion, [a])[0])
    size = fusion.inputs[0].dtype.bytes
    elements, words = 32 // size, max(1, size // 4)  # 8 registers per thread
    assert check_addresses(st, symbols=symbols) == 2 * 256 * 2 * elements * words  # blocks x threads x st/ld


# -- wrong lowerings are caught ------------------------------------------------------------------


def access(st, direction):
    return next(a for a, _ in tmem_accesses_in(st.kernel.body) if a.direction == direction)


def test_a_wrong_column_fails_the_address_check():
    _, st = lowered(CASES["tmem_transpose"].build())
    a = access(st, Direction.LOAD)
    a.column = add(a.column, 1)
    with pytest.raises(SimulationError, match="the verified model says"):
        check_addresses(st)


def test_a_wrong_shape_fails_the_address_check():
    _, st = lowered(s16x64b())
    access(st, Direction.STORE).pattern = TmemPattern.P32x32b
    with pytest.raises(SimulationError):
        check_addresses(st)


def test_a_missing_warp_predicate_fails_the_address_check():
    _, st = lowered(partial_warps())
    access(st, Direction.STORE).conds = []
    with pytest.raises(SimulationError, match="executes it"):
        check_addresses(st)


def test_packed_elements_in_the_wrong_bytes_fail_both_checks():
    """Swapping the two bfloat16 of each register of the store: the simulated copy comes back
    with each pair swapped, and the address check sees the bytes."""
    fusion, st = lowered(CASES["packed_transpose"].build())
    a = access(st, Direction.STORE)
    for el in a.elements:
        el.byte = 2 - el.byte
    with pytest.raises(SimulationError, match="byte"):
        check_addresses(st)
    inputs = random_inputs(fusion)
    (out,) = run_kernel(st.kernel, fusion, inputs)
    assert not np.array_equal(out, reference(fusion, inputs)[0])


def test_packed_copy_moves_whole_registers():
    src = tp.compile(CASES["packed_copy[dtype=int8]"].build(), target="sm_100a").cuda_source
    assert "tcgen05.st.sync.aligned.32x32b.x8.b32" in src and "signed char tmem_elements[32];" in src
    assert "memcpy(tmem_regs, tmem_elements, sizeof(tmem_regs));  // 4 int8 per register" in src


def test_registers_in_the_wrong_order_fail_the_simulation():
    fusion, st = lowered(CASES["tmem_vectorization[st_vec=4,ld_vec=8]"].build())
    a = access(st, Direction.STORE)
    datas = [el.data for el in a.elements]
    for el, d in zip(a.elements, reversed(datas)):
        el.data = d
    inputs = [np.arange(128 * 256, dtype=np.float64).reshape(128, 256)]
    (out,) = run_kernel(st.kernel, fusion, inputs)
    assert not np.array_equal(out, inputs[0])


# -- 3. tensor memory needs sm_100a ----------------------------------------------------------------


def test_tmem_on_sm90a_is_rejected_with_the_target_rule():
    with pytest.raises(tp.ScheduleRejected) as e:
        tp.compile(CASES["tmem_transpose"].build(), target="sm_90a")
    report = e.value.report
    assert report.codes == ["TARGET-TMEM"]
    d = report.errors[0]
    assert "T2 is in tensor memory, which sm_90a does not have" in str(e.value)
    assert "sm_100a" in d.hint


def test_lowering_tmem_for_sm90a_says_it_needs_sm100a():
    with pytest.raises(tp.UnsupportedSchedule, match="T2 in tensor memory, which needs sm_100a"):
        lower(CASES["tmem_transpose"].build().snapshot(), get_target("sm_90a"))


def test_tmem_store_into_registers_is_refused():
    with tp.Fusion("bad_op_type") as fusion:
        t0 = tp.make_contig_concrete_tensor([32])
        fusion.add_input(t0)
        t1 = tp.set(t0, tp.LoadStoreOpType.TMemStore)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    with pytest.raises(tp.UnsupportedSchedule, match="a TMemStore writes a tensor-memory tensor"):
        lower(fusion.snapshot(), SM100)


def test_tmem_accesses_keep_their_kind_in_the_ir():
    _, st = lowered(CASES["warp_xyz"].build())
    accesses = [a for a, _ in tmem_accesses_in(st.kernel.body)]
    assert all(isinstance(a, TmemAccess) for a in accesses)
    assert [a.instruction for a in accesses] == ["tcgen05.st.sync.aligned.32x32b.x1.b32",
                                                  "tcgen05.ld.sync.aligned.32x32b.x1.b32"]


# -- tensor-memory regions (fusion.manage("tmem_regions", ...)) ------------------------------------


@pytest.mark.parametrize("same_region,columns,offsets", [(True, 32, (0, 1)), (False, 64, (0, 32))])
def test_tmem_regions_place_the_tensors(same_region, columns, offsets):
    """One region: 32 columns, T6 right after T2's one column (nvFuser's layout); regions of their
    own: a power-of-two block each. The addresses are the verified model's plus the placement."""
    fusion = tmem_add_kernel(same_region, size=64)  # nvFuser's testTMemAddKernel: T2 and T6 in tensor memory
    tv2, tv6 = fusion.tensor("T2"), fusion.tensor("T6")
    assert tp.verify(fusion, SM100).ok
    _, st = lowered(fusion)
    alloc = next(n for n in st.tree if isinstance(n, TmemAlloc))
    assert alloc.columns == columns
    assert {name: first for name, first, _ in alloc.regions} == dict(zip((tv2.name, tv6.name), offsets))
    stores = {a.out.tensor: a.column_offset for a, _ in tmem_accesses_in(st.kernel.body)
              if a.direction is Direction.STORE}
    assert stores == dict(zip((tv2.name, tv6.name), offsets))
    assert check_addresses(st) == 2 * 2 * 64  # two tensors, a store and a load each, every element
    kernel = tp.compile(fusion, target="sm_100a")
    assert kernel.cubin[:4] == b"\x7fELF"
    src = kernel.cuda_source
    assert src.count("tcgen05.alloc.cta_group::1") == 1 and src.count("tcgen05.dealloc.cta_group::1") == 1
    assert f"shared::cta.b32 [%0], {columns};" in src
