"""Register circular buffers, differentially: random schedules of tests/support/circular_gen.py
(two register caches, one or both circular-buffered over a serial loop that holds an unrolled loop
of the caches' readers) lowered and run on the CPU (tests/support/reduction_sim.py), each output
against the float64 reference. The readers of a copy and the statements before it share the
unrolled loop and its registers; a nest that moved the copies out of that loop must keep the rest
in one loop (execution/pipeline.py isolate_circular_copies: with a loop per run of statements, 5
of the first 60 seeds computed wrong values)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime.reference import reference
from tileproof.model.targets import get_target

from support.circular_gen import circular_case
from support.reduction_sim import run_kernel

CASES = 60
TALLY = Counter()


@pytest.mark.parametrize("seed", range(CASES))
def test_a_random_register_circular_buffer_computes_the_fusion(seed):
    case = circular_case(seed)
    report = tp.verify(case.fusion, "sm_90a")
    assert not [d for d in report.diagnostics if "tileproof bug" in d.message], case
    if not report.ok:
        # both caches over one loop with different stages or prefetch: one pipeline a loop
        assert report.codes == ["PIPELINE-STAGES"], (case, report.codes)
        return
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(case.shape) for _ in range(2)]
    (got,) = run_kernel(lower(case.fusion.snapshot(), get_target("sm_90a")).kernel, case.fusion, inputs, {})
    (want,) = reference(case.fusion, inputs)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-5, atol=1e-5, err_msg=str(case))


def test_the_random_schedules_are_mostly_accepted_and_interleave_their_copies():
    """Most schedules verify, and many hold a circular copy between two statements of one loop."""
    accepted = interleaved = 0
    for seed in range(CASES):
        case = circular_case(seed)
        if tp.verify(case.fusion, "sm_90a").ok:
            accepted += 1
            interleaved += any(s.startswith("b's cache") for s in case.steps)
    assert accepted >= 40 and interleaved >= 20, (accepted, interleaved)


def test_the_simulator_holds_cp_async_copies_in_flight_until_their_wait():
    """Seed 249: a cp.async tile and a register cache circular-buffered over one loop, refused by
    PIPELINE-STAGES since the circular fuzz family found such kernels wrong on an H200 (the loop was
    pipelined as the register cache's kind: no cp.async wait). Lowered anyway, the simulator reads
    the tile while its copy is in flight, a SimulationError (it held cp.async copies complete when
    issued before, and computed this kernel right)."""
    from support.reduction_sim import SimulationError

    case = circular_case(249)
    assert tp.verify(case.fusion, "sm_90a").codes == ["PIPELINE-STAGES"]
    ir = lower(case.fusion.snapshot(), get_target("sm_90a")).kernel
    inputs = [np.random.default_rng(0).standard_normal(case.shape) for _ in range(2)]
    with pytest.raises(SimulationError, match="while an asynchronous copy lands there"):
        run_kernel(ir, case.fusion, inputs, {})


def test_the_simulator_holds_a_bulk_copy_in_flight_until_its_mbarrier_wait():
    """A staged softmax's row (one 1-D bulk copy into shared memory, recipes/normalization.py) read
    by a simulator that skips its mbarrier wait: a SimulationError; with the wait, the op
    (tests/recipes/test_normalization.py)."""
    from tileproof.codegen.ir import TmaWait, walk
    from tileproof.recipes import normalization as N

    from support.reduction_sim import SimulationError, Simulator

    class NoWait(Simulator):
        def bulk_wait(self, n, loops):
            pass

    fusion = N.softmax_fusion(N.RowClass("bfloat16", 8, 2, 4, looped=True, staged=True))
    ir = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    assert any(isinstance(n, TmaWait) for n in walk(ir.body))
    x = np.random.default_rng(0).standard_normal((3, 64))
    run_kernel(ir, fusion, [x], {"M": 3, "N": 64})
    with pytest.raises(SimulationError, match="while an asynchronous copy lands there"):
        run_kernel(ir, fusion, [x], {"M": 3, "N": 64}, simulator=NoWait)
