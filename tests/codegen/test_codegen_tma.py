"""TMA lowering without a GPU: where copies, waits and fences land in the kernel IR, that the
copy's coordinates and shared-memory address are the verified tma_layout functions, the
tensor maps' values, and the launch-time checks of tensor_maps."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import tileproof as tp
from tileproof.codegen.runtime import tensor_maps
from tileproof.codegen.errors import InputError
from tileproof.codegen.runtime.binding import bind_strides
from tileproof.codegen.ir import Compute, Loop, LoopKind, Sync, TmaCopy, TmaWait
from tileproof.codegen.lower import lower
from support import shared_kernels
from support.lowering import lowered
from tileproof.execution.allocation import compute_allocation
from tileproof.model.expr import evaluate
from tileproof.model.global_layout import global_offset, global_strides
from tileproof.execution.indexing import loop_var, producer_logical
from tileproof.model.targets import get_target
from tileproof.hw.tma import infer_tma, is_tma_op
from tileproof.execution.tma_issue import build_issue
from tileproof.model.types import Direction, ParallelType
from tileproof.schedule_files import discover

ROOT = Path(__file__).resolve().parents[2]
SM90 = get_target("sm_90a")
CASES = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / f) for f in ("tma_smem.py", "tma_boxes.py")])}


pytestmark = pytest.mark.usefixtures("private_cache")


def kernel_ir(name):
    fusion = CASES[name].build()
    assert tp.verify(fusion, "sm_90a").ok
    return fusion, lower(fusion.snapshot(), SM90).kernel


def flat(nodes):
    out = []
    for n in nodes:
        out.append(n)
        if isinstance(n, Loop):
            out += flat(n.body)
    return out


def test_pointwise_issues_both_loads_before_waiting_for_either():
    _, ir = kernel_ir("tma_pointwise_vectorized_store")
    nodes = [n for n in flat(ir.body) if not isinstance(n, Loop)]
    kinds = [type(n).__name__ for n in nodes]
    assert kinds == ["TmaCopy", "TmaCopy", "TmaWait", "TmaWait", "Compute"]
    copies = [n for n in nodes if isinstance(n, TmaCopy)]
    assert {c.barrier for c in copies} == {w.barrier for w in nodes if isinstance(w, TmaWait)}
    for c in copies:  # one elected thread; 256 fp32 = 1024 bytes per copy
        assert [(str(x.lhs), x.op, str(x.rhs)) for x in c.issuer] == [("threadIdx.x", "==", "0")]
        assert evaluate(c.nbytes, {}) == 1024 and not c.bounds
    assert [m.count for m in ir.mbarriers] == [1, 1]
    assert [evaluate(b, {}) for b in ir.tensor_maps[0].box] == [256]


def test_tma_store_fences_the_generic_writes_and_waits_for_the_read():
    fusion, ir = kernel_ir("tma_store")
    nodes = [n for n in flat(ir.body) if not isinstance(n, Loop)]
    store = next(k for k, n in enumerate(nodes) if isinstance(n, TmaCopy))
    assert nodes[store].direction is Direction.STORE and nodes[store].barrier is None
    assert isinstance(nodes[store - 1], Sync) and nodes[store - 1].fence_async
    assert isinstance(nodes[store - 2], Compute) and nodes[store - 2].out.tensor == nodes[store].smem
    source = tp.compile(fusion).cuda_source
    assert "cp.async.bulk.wait_group.read 0" in source and "tp_fence_async_smem();\n" in source


@pytest.mark.parametrize("name", ["tma_pointwise_vectorized_store", "tma_store", "swizzle_64b_recipe",
                                  "tma_transpose_bank_conflict_free", "tma_figure11", "tma_strided_tile",
                                  "tma_indivisible_rotation"])
def test_copy_coordinates_and_address_are_the_verified_functions(name):
    """The kernel's coordinates and shared address, at every loop point, equal model.tma_layout's
    (what TMA-TILE-CONTIGUITY / TMA-SWIZZLE-LAYOUT / TMA-COORD-* proved) at the same point."""
    fusion, ir = kernel_ir(name)
    op = next(o for o in fusion.snapshot().exprs if is_tma_op(o))
    tma = infer_tma(op)
    info = tma.info
    issue = build_issue(tma, compute_allocation(info.smem))
    copy = next(n for n in flat(ir.body) if isinstance(n, TmaCopy))
    consumer = info.consumer
    # the kernel's loop of consumer axis k carries the label "<consumer> axis k"
    kernel_var = {}
    for k, i in enumerate(consumer.loop):
        if i.parallel_type is not ParallelType.Bulk and i.static_extent != 1:
            loop = next(n for n in flat(ir.body) if isinstance(n, Loop) and f"{consumer.name} axis {k}" in n.label)
            kernel_var[loop_var(consumer, i).value] = loop.var if loop.kind in (LoopKind.THREAD, LoopKind.BLOCK) else f"loop.{loop.var}"
    sizes = {"M": 200, "N": 328}
    rng = random.Random(0)
    extents = {loop_var(consumer, i).value: evaluate(i.extent_expr, sizes) for i in consumer.loop}
    for _ in range(50):
        point = {v: rng.randrange(extents[v]) for v in kernel_var}
        model_env = {**sizes, **point}
        kernel_env = {**sizes, **{kernel_var[v]: x for v, x in point.items()}}
        model_env.update({loop_var(consumer, i).value: 0 for i in consumer.loop if i.static_extent == 1})
        for got, want in zip(copy.coords, issue.box_origin):
            assert evaluate(got, kernel_env) == evaluate(want, model_env)
        assert evaluate(copy.smem_offset, kernel_env) == evaluate(issue.dst_offset, model_env)


def test_overhanging_rotation_is_one_dimension_at_the_split_chains_coordinate():
    """A load's box of 12 rotated through the split by 32 it does not divide: the kernel gets what
    the inference says, a 1-D tensor map over the whole tensor (size 1000, box 12) and the
    coordinate 32*i2 + 12*i3, one copy per block into the 48-byte tile; T2's hole predicate
    (I1 < 32) keeps the overhang's elements from being stored."""
    fusion, ir = kernel_ir("tma_indivisible_rotation")
    (tmap,) = ir.tensor_maps
    assert tensor_maps.values(tmap, {}) == {"sizes": [1000], "strides": [], "box": [12], "element_strides": [1]}
    (copy,) = [n for n in flat(ir.body) if isinstance(n, TmaCopy)]
    assert not copy.bounds and evaluate(copy.nbytes, {}) == 48
    for x, y in itertools.product(range(32), range(3)):
        env = {"blockIdx.x": x, "blockIdx.y": y}
        assert [evaluate(c, env) for c in copy.coords] == [32 * x + 12 * y]
        assert evaluate(copy.smem_offset, env) == 0
    source = tp.compile(fusion, "sm_90a").cuda_source
    assert "tp_bulk_load_1d(tp_smem(T1) + (unsigned)0U, &tmap_T1, &tp_bar_T1, " \
           "(int)((blockIdx.x * 32U) + (blockIdx.y * 12U)));" in source
    assert re.search(r"\(\(blockIdx\.y \* 12U\) \+ i\d+\) < 32U", source)  # the reader skips the holes


def test_tensor_map_of_a_discontiguous_input_takes_the_runtime_stride():
    _, ir = kernel_ir("tma_broadcast_discontiguous")
    t1 = next(m for m in ir.tensor_maps if m.tensor == "T1")
    env = {"stride.T1.1": 4096}
    # [I2 * I3] boxed by 256; I0 (contiguous over I1) composites with I1 into one coordinate dimension
    assert [evaluate(s, env) for s in t1.strides_bytes] == [4096 * 4]
    assert [evaluate(s, env) for s in t1.sizes] == [2048, 8 * 16]
    assert t1.swizzle_bytes == 0


@pytest.mark.parametrize("name,swizzle", [("swizzle_32b_recipe", 32), ("swizzle_64b_recipe", 64),
                                          ("swizzle_128b_recipe", 128)])
def test_swizzled_buffer_gets_the_mode_and_the_period_alignment(name, swizzle):
    _, ir = kernel_ir(name)
    assert ir.tensor_maps[0].swizzle_bytes == swizzle
    buf = next(b for b in ir.buffers if b.tensor == "T1")
    assert evaluate(buf.smem_offset, {}) % (8 * swizzle) == 0


def test_launch_checks_name_the_array_before_the_driver_sees_it():
    _, ir = kernel_ir("tma_pointwise_vectorized_store")
    m = ir.tensor_maps[0]
    with pytest.raises(InputError, match="16-byte aligned"):
        tensor_maps.check(m, 0x1008, tensor_maps.values(m, {}))
    bad = tensor_maps.values(m, {})
    bad["strides"] = [100]
    with pytest.raises(InputError, match="multiple of 16"):
        tensor_maps.check(m, 0x1000, bad)


def test_every_tma_example_compiles():
    for name, case in CASES.items():
        if case.expect.ok:
            kernel = shared_kernels.compiled(case.build(), "sm_90a")  # test_accepted_compiles.py's where it ran
            assert kernel.cubin[:4] == b"\x7fELF", name
            assert "cp.async.bulk.tensor" in kernel.cuda_source, name


def test_issue_bound_is_tested_at_the_tile_start_when_a_loop_splits_the_box():
    """A non-Bulk axis between a box's Bulk axes (here the ldst_matrix_set store's Unroll{1})
    leaves the row bound outside the consumed IDs: it is one decision per copy, so it is tested
    at the tile's first element (no Bulk loop variable; those are not loops). Found by
    benchmarks/fuzz.py (seed 1, case 3767): NVRTC failed on an undefined identifier."""
    case = discover([str(ROOT / "examples" / "valid" / "ldst_matrix.py")])
    fusion = next(c for c in case if c.name == "ldst_matrix_set[size=symbolic]").build()
    tv1 = next(t for t in fusion.tensors if t.name == "T1")
    tv1.axis(7).parallelize(ParallelType.Unroll)
    assert tp.verify(fusion, "sm_90a").ok
    store = next(n for n in flat(lowered(fusion, SM90).kernel.body) if isinstance(n, TmaCopy))
    loops = {n.var for n in flat(lowered(fusion, SM90).kernel.body) if isinstance(n, Loop)}
    for cond in store.bounds:
        assert {v for v in cond.lhs.free_vars() if v.startswith("i")} <= loops, cond
    assert "cp.async.bulk.tensor" in tp.compile(fusion, "sm_90a").cuda_source


# -- global tensors allocated along merged logical axes (examples/valid/tma_allocation.py) ----------

ALLOC = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / "tma_allocation.py")])}
ALLOC_SIZES = {"M": 5, "K": 40, "stride.T0.1": 128}  # padded rows: 128 elements apart (K = 96)


def alloc_tma(name):
    fusion = ALLOC[name].build()
    assert tp.verify(fusion, "sm_90a").ok
    fusion = fusion.snapshot()
    ir = lower(fusion, SM90).kernel
    tma = infer_tma(next(o for o in fusion.exprs if is_tma_op(o)))
    (tmap,) = [m for m in ir.tensor_maps if m.tensor == tma.info.gmem.name]
    return ir, tma, tensor_maps.values(tmap, ALLOC_SIZES)


@pytest.mark.parametrize("name,layout,sizes,strides,box", [
    # layout: the element stride of each logical axis, as the array (torch / numpy) has it
    ("tma_alloc_merged_outer", (12 * 40, 40, 1), [40, 5 * 12], [40 * 4], [32, 16]),  # (K, M*N): one dimension
    ("tma_alloc_merged_inner", (240, 40, 1), [240, 64], [240 * 2], [64, 8]),  # fp16 (N*K, M)
    ("tma_alloc_merged_padded_rows", (20 * 128, 128, 1), [96, 120], [128 * 4], [32, 8]),  # rows 128 apart
    ("tma_alloc_merged_boxed_apart", (768, 64, 1), [64, 12, 8], [64 * 4, 768 * 4], [32, 8, 1]),  # N alone
    ("tma_alloc_merged_permuted", (12, 120, 1), [120, 16], [120 * 4], [32, 8]),  # (M*K, N): N-major memory
    ("tma_alloc_merged_store", (704, 64, 1), [64, 88], [64 * 4], [32, 16]),
])
def test_tensor_map_over_a_merged_allocation_domain(name, layout, sizes, strides, box):
    ir, tma, v = alloc_tma(name)
    g = tma.info.gmem
    glayout = global_strides(g)
    by_axis = dict(zip(glayout.alloc_axes, (evaluate(s, ALLOC_SIZES) for s in glayout.strides)))
    assert tuple(by_axis[a] for a in range(len(g.logical))) == layout
    assert (v["sizes"], v["strides"], v["box"]) == (sizes, strides, box)
    tensor_maps.check(next(m for m in ir.tensor_maps if m.tensor == g.name), 0x1000, v)


@pytest.mark.parametrize("name", sorted(ALLOC))
def test_every_tensor_map_element_is_the_scheduled_global_element(name):
    """Simulate the tensor map: at each consumer loop point, the element the copy moves sits at
    tensor-map coordinate origin + tile position x element stride (per dimension); it is in the
    map iff the schedule's logical element is in the tensor, and then its byte address
    sum(coordinate x stride) is the global layout's offset of that logical element."""
    _, tma, v = alloc_tma(name)
    info, op = tma.info, tma.op
    issue = build_issue(tma, compute_allocation(info.smem))
    g, consumer = info.gmem, info.consumer
    layout = global_strides(g)
    logical = ([issue.consumer_idx[i.uid] for i in consumer.logical] if g is consumer
               else producer_logical(op, 0, issue.consumer_idx))
    offset = global_offset(g, layout, {i.uid: x for i, x in zip(g.logical, logical)})
    es = g.dtype.bytes
    byte_strides = [es] + v["strides"]
    extents = {loop_var(consumer, i).value: evaluate(i.extent_expr, ALLOC_SIZES) for i in consumer.loop}
    rng = random.Random(1)
    inside = outside = 0
    for _ in range(400):
        env = {**ALLOC_SIZES, **{x: rng.randrange(n) for x, n in extents.items()}}
        coords = [evaluate(o, env) + evaluate(t, env) * e
                  for o, t, e in zip(issue.box_origin, issue.tile_coords, v["element_strides"])]
        in_map = all(0 <= c < n for c, n in zip(coords, v["sizes"]))
        element = [evaluate(x, env) for x in logical]
        in_tensor = all(x < evaluate(i.extent_expr, env) for x, i in zip(element, g.logical))
        assert in_map == in_tensor, (env, coords, element)
        if in_map:
            inside += 1
            assert sum(c * s for c, s in zip(coords, byte_strides)) == evaluate(offset, env) * es, (env, coords)
        else:
            outside += 1
    assert inside  # and the partial boxes of every case but the padded rows reach outside
    assert outside or name in ("tma_alloc_merged_padded_rows",)


def test_merged_allocation_binds_the_inner_axis_stride_and_checks_the_outer():
    ir, _, _ = alloc_tma("tma_alloc_merged_padded_rows")
    g = next(x for x in ir.globals if x.name == "T0")
    assert g.alloc_axes == (0, 1, 2)
    env = {}
    bind_strides(g, SimpleNamespace(shape=(6, 20, 96), strides=(20 * 128, 128, 1)), 0, env)
    assert env == {"stride.T0.1": 128}
    with pytest.raises(InputError, match="axis 0 has stride"):  # M must step 20 padded rows
        bind_strides(g, SimpleNamespace(shape=(6, 20, 96), strides=(21 * 128, 128, 1)), 0, {})
