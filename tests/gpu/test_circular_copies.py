"""Circular buffers of plain copies into shared memory on the GPU (marker `gpu`; skipped without
PyTorch or a CUDA device): examples/valid/circular_copies.py's transposed tiles, written by one
thread and read by another, with three stages two ahead and with no prefetch; exact copies into
outputs poisoned with NaN, at sizes the tile divides and does not, run twice (stale stages)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.examples import example_module  # noqa: E402

pytestmark = pytest.mark.gpu
EXAMPLES = example_module("valid", "circular_copies")


@pytest.mark.parametrize("name", ["transposed_tile_three_stages", "transposed_tile_no_prefetch"])
@pytest.mark.parametrize("m, k", [(64, 256), (37, 100), (8, 32), (1000, 33), (3, 1)])
def test_the_transposed_tiles_are_copied_exactly(name, m, k):
    kernel = tp.compile(getattr(EXAMPLES, name)())
    for _ in range(2):
        a = torch.randn(m, k, device="cuda")
        out = torch.full((m, k), float("nan"), device="cuda")
        kernel.run(a, out=[out])
        torch.cuda.synchronize()
        assert torch.equal(out, a)


@pytest.mark.parametrize("seed", range(60))
def test_a_random_register_or_shared_circular_buffer_runs_as_simulated(seed):
    """tests/support/circular_gen.py's schedules (the CPU simulates them in
    tests/differential/test_differential_circular.py): two caches, one or both circular-buffered
    over a serial loop holding an unrolled loop of their readers, in registers or shared memory;
    against the float64 reference, into outputs poisoned with NaN."""
    import numpy as np

    from tileproof.codegen.runtime.reference import reference

    from support.circular_gen import circular_case

    case = circular_case(seed)
    if not tp.verify(case.fusion, "sm_90a").ok:
        pytest.skip("rejected (PIPELINE-STAGES: the two buffers' numbers differ over one loop)")
    kernel = tp.compile(case.fusion, "sm_90a")
    a, b = (torch.randn(*case.shape, device="cuda", dtype=torch.float64).float() for _ in range(2))
    (want,) = reference(case.fusion, [a.cpu().numpy(), b.cpu().numpy()])
    out = torch.full(tuple(want.shape), float("nan"), device="cuda")
    kernel.run(a, b, out=[out])
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy().astype(np.float64), want, rtol=1e-5, atol=1e-5, err_msg=str(case))
