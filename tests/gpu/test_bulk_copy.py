"""1-D bulk copies (tp.LoadStoreOpType.CpAsyncBulk, issue 33 item 8) on the GPU (marker `gpu`;
skipped without PyTorch or a CUDA device): rows loaded by cp.async.bulk into shared memory and
doubled by the block's threads, rows whose split leaves holes (a skipped copy still arrives on
the mbarrier), runs of several Bulk axes, and a bulk store back to global memory, each at 3+
sizes into an output poisoned with NaN, against PyTorch bit for bit. nvFuser's TMATest.CpAsyncBulk*
cases with a `run` are run by tests/gpu/test_nvfuser.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

pytestmark = pytest.mark.gpu
P = tp.ParallelType
BULK = tp.LoadStoreOpType.CpAsyncBulk


def doubled_rows(*, store: bool, dtype=tp.float32, rows_per_block: int = 1):
    """[M, N] (N symbolic, a multiple of 16 bytes and at most 1024 elements): each row loaded by one
    bulk copy, doubled by N threads, and (store) written back by a bulk store of shared memory;
    `rows_per_block` rows per block, a serial loop whose last block has holes where it does not
    divide M."""
    with tp.Fusion("bulk_doubled_rows") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=BULK)
        t2 = tp.add(t1, t1)
        out = [t1, t2]
        if store:
            out.append(tp.set(t2, op=BULK))
        fusion.add_output(out[-1])
    fusion.assume(f"N % {16 // dtype.bytes} == 0")
    fusion.assume("N <= 1024")
    fusion.assume("M <= 65535 * 64")
    t1.set_memory_type(tp.MemoryType.Shared)
    if store:
        t2.set_memory_type(tp.MemoryType.Shared)
    for t in out:
        t.split(0, rows_per_block)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(-1).parallelize(P.Bulk)
    t2.axis(-1).parallelize(P.TIDx)
    if store:
        out[-1].axis(-1).parallelize(P.Bulk)
    tp.inline_most(fusion)
    return fusion


def run(fusion, shape, dtype=torch.float32):
    kernel = tp.compile(fusion, "sm_90a")
    x = torch.randn(shape, device="cuda").to(dtype)
    out = torch.full(shape, float("nan"), device="cuda").to(dtype)
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x + x), shape


@pytest.mark.parametrize("shape", [(1, 4), (37, 128), (1000, 1024), (4096, 256)])
@pytest.mark.parametrize("store", [False, True])
def test_rows_loaded_by_bulk_copies_are_doubled(shape, store):
    fusion = doubled_rows(store=store)
    assert tp.verify(fusion, "sm_90a").ok
    run(fusion, shape)


@pytest.mark.parametrize("shape", [(5, 8), (63, 512), (1000, 96)])
def test_half_rows_of_16_byte_multiples(shape):
    fusion = doubled_rows(store=True, dtype=tp.float16)
    assert tp.verify(fusion, "sm_90a").ok
    run(fusion, shape, torch.float16)


@pytest.mark.parametrize("shape", [(1, 64), (37, 128), (999, 256)])
def test_a_block_of_rows_with_holes_skips_the_copies_past_m(shape):
    fusion = doubled_rows(store=False, rows_per_block=4)
    assert tp.verify(fusion, "sm_90a").ok
    run(fusion, shape)


@pytest.mark.parametrize("m", [3, 64, 1001])
def test_two_bulk_axes_copy_one_run(m):
    """Each row of 256 split [16, 16], both Bulk: one copy of 1 KiB."""
    with tp.Fusion("bulk_two_axes") as fusion:
        t0 = tp.make_tensor(["M", 256], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=BULK)
        t2 = tp.add(t1, t1)
        fusion.add_output(t2)
    fusion.assume("M <= 65535")
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, 16)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(2).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDy)
    t2.axis(2).parallelize(P.TIDx)
    tp.inline_most(fusion)
    assert tp.verify(fusion, "sm_90a").ok
    run(fusion, (m, 256))
