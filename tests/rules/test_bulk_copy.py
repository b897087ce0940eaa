"""1-D bulk copies (tp.LoadStoreOpType.CpAsyncBulk, issue 33 item 8): the size of each copy
(BULK-COPY-SIZE), its run contiguous in both memories (BULK-COPY-CONTIGUOUS), both addresses
16-byte aligned (BULK-COPY-ALIGN), no run reaching past the tensor (BULK-COPY-BOUNDS); the
kernel's copies and their mbarrier, and nvFuser's restrictions on pipelining them."""

from __future__ import annotations

import pytest

import tileproof as tp

P = tp.ParallelType
BULK = tp.LoadStoreOpType.CpAsyncBulk


def rows(shape, *, split=None, dtype=tp.float32, store=False, threads=True, assume=()):
    """T0 -> (bulk) shared T1 -> T2 (-> bulk-stored T3 with `store`): one copy per row (the
    innermost axis, split by `split` first), the rows over BIDx, the row's elements on TIDx."""
    with tp.Fusion("bulk_rows") as fusion:
        t0 = tp.make_tensor(shape, contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=BULK)
        t2 = tp.add(t1, t1)
        out = [t1, t2]
        if store:
            t3 = tp.set(t2, op=BULK)
            out.append(t3)
        fusion.add_output(out[-1])
    for a in assume:
        fusion.assume(a)
    t1.set_memory_type(tp.MemoryType.Shared)
    if store:
        t2.set_memory_type(tp.MemoryType.Shared)
    for t in out:
        if split is not None:
            t.split(-1, split)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(-1).parallelize(P.Bulk)
    if threads:
        t2.axis(-1).parallelize(P.TIDx)
    if store:
        out[-1].axis(-1).parallelize(P.Bulk)
    tp.inline_most(fusion)
    return fusion


def verify(fusion):
    return tp.verify(fusion, "sm_90a")


def only(report, code):
    found = [d for d in report.errors if d.code == code]
    assert found, report.codes
    return found[0]


# -- the API ------------------------------------------------------------------------------------

def test_cpasyncbulk_is_its_own_op_type_and_not_tma():
    assert tp.LoadStoreOpType.CpAsyncBulk is not tp.LoadStoreOpType.TMA
    assert tp.LoadStoreOpType["CpAsyncBulk"].value == "CpAsyncBulk"


# -- BULK-COPY-SIZE ---------------------------------------------------------------------------

def test_a_run_of_33_floats_is_refused_with_its_bytes():
    d = only(verify(rows([8, 33])), "BULK-COPY-SIZE")
    assert d.counterexample["bytes"] == 132 and d.counterexample["remainder"] == 4


def test_a_symbolic_row_needs_a_multiple_of_four_floats():
    d = only(verify(rows([8, "N"])), "BULK-COPY-SIZE")
    assert d.counterexample["N"] % 4
    assert verify(rows([8, "N"], assume=["N % 4 == 0", "N <= 1024"])).ok


@pytest.mark.parametrize("dtype, n", [(tp.float32, 4), (tp.float16, 8), (tp.float64, 2)])
def test_sixteen_bytes_in_any_dtype_pass(dtype, n):
    assert verify(rows([8, n], dtype=dtype)).ok


# -- BULK-COPY-CONTIGUOUS ---------------------------------------------------------------------

def test_a_column_is_not_contiguous_in_global_memory():
    with tp.Fusion("column") as fusion:
        t0 = tp.make_contig_concrete_tensor([16, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=BULK)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.reorder({0: 1})
    t1.axis(1).parallelize(P.Bulk)
    d = only(verify(fusion), "BULK-COPY-CONTIGUOUS")
    assert "global memory" in d.message and d.counterexample["element"] != d.counterexample["expected"]


def test_two_bulk_axes_of_one_row_are_one_contiguous_run():
    with tp.Fusion("two_axes") as fusion:
        t0 = tp.make_contig_concrete_tensor([16, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=BULK)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, 16)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(2).parallelize(P.Bulk)
    assert verify(fusion).ok


# -- BULK-COPY-ALIGN --------------------------------------------------------------------------

def test_a_global_run_starting_off_sixteen_bytes_is_refused():
    """Rows of 6 floats (24 bytes) in runs of 4: row 1's first run starts 8 bytes off (its second
    also crosses the row's end)."""
    report = verify(rows([8, 6], split=4))
    aligned = [d for d in report.errors if d.code == "BULK-COPY-ALIGN" and "T0's base" in d.message]
    assert aligned and aligned[0].counterexample["remainder"] == 8, report.codes
    assert "BULK-COPY-BOUNDS" in report.codes


def test_a_launch_time_row_stride_is_checked_at_launch():
    with tp.Fusion("strided_rows") as fusion:
        t0 = tp.make_tensor([8, 4], contiguity=[False, True])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=BULK)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.axis(1).parallelize(P.Bulk)
    assert verify(fusion).ok  # the binding refuses a row stride that is not a multiple of 4 floats
    (g,) = [g for g in tp.compile(fusion, "sm_90a").ir.globals if g.is_input]
    assert g.vector_elements == 4


def test_a_padded_shared_row_misaligns_every_other_run():
    with tp.Fusion("padded") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 4])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=BULK)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    loop = t1.get_loop_domain()
    t1.split(1, 5)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    t1.axis(1).parallelize(P.Bulk)
    d = only(verify(fusion), "BULK-COPY-ALIGN")
    assert d.counterexample["remainder"] == 4 and d.counterexample["byte address"] % 16 == 4


# -- BULK-COPY-BOUNDS -------------------------------------------------------------------------

def test_a_run_crossing_the_end_is_refused():
    d = only(verify(rows([8, 100], split=8)), "BULK-COPY-BOUNDS")
    assert d.counterexample["index"] >= d.counterexample["extent"] == 100


def test_a_hole_of_a_whole_run_skips_it():
    """Rows split by 3 over the block: the hole is the row's, the same for all of its run."""
    with tp.Fusion("row_holes") as fusion:
        t0 = tp.make_contig_concrete_tensor([100, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=BULK)
        t2 = tp.add(t1, t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 3)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t2.axis(2).parallelize(P.TIDx)
    tp.inline_most(fusion)
    report = verify(fusion)
    assert report.ok, report.codes
    source = tp.compile(fusion, "sm_90a").cuda_source
    assert "tp_bulk_load_run(" in source and "tp_mbar_arrive(&tp_bar_T1)" in source  # skipped, still arrives


def test_a_store_crossing_the_end_is_refused():
    assert "BULK-COPY-BOUNDS" in verify(rows([8, 100], split=8, store=True, threads=False)).codes


# -- the kernel ------------------------------------------------------------------------------

def test_the_kernel_loads_and_stores_runs_with_their_bytes():
    fusion = rows([8, 256], store=True)
    assert verify(fusion).ok
    source = tp.compile(fusion, "sm_90a").cuda_source
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in source
    assert "cp.async.bulk.global.shared::cta.bulk_group" in source
    assert "tp_mbar_expect_tx(&tp_bar_T1, (unsigned)1024U)" in source
    assert "TmaDescriptor tmap" not in source  # no tensor map


# -- nvFuser's restrictions on pipelines ------------------------------------------------------

def pipelined(circular, inner=2, rows_=1024):
    with tp.Fusion("bulk_pipeline") as fusion:
        t0 = tp.make_contig_concrete_tensor([rows_, 128])
        fusion.add_input(t0)
        t1 = tp.add(t0, t0)
        fusion.add_output(t1)
    t0a = t0.cache_after(BULK)
    t0a.set_memory_type(tp.MemoryType.Shared)
    t1.split(0, inner).split(0, 4).reorder({0: 1})
    tp.propagate_transforms(t1)
    t1.axis(0).parallelize(P.BIDx)
    tp.parallelize_all_like(t1)
    t1.axis(-1).parallelize(P.TIDx)
    t0a.axis(-1).parallelize(P.Bulk)
    t0a.inline_at(2)
    t0a.circular_buffer(2, 1, circular)
    return fusion


def test_a_pipelined_bulk_load_is_refused_as_nvfuser_refuses_it():
    d = only(verify(pipelined(tp.Pipelined())), "LOWERING-SUPPORTED")
    assert "WarpSpecialized only" in d.message


def test_an_indivisible_loop_inside_the_circular_loop_is_refused():
    report = verify(pipelined(tp.WarpSpecialized(P.TIDy), rows_=1023))
    assert any("divisible splits" in d.message for d in report.errors if d.code == "LOWERING-SUPPORTED")
