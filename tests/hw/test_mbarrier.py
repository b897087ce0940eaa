"""hw/mbarrier.py is the one statement of the mbarrier phase protocol: the kernel's phase bits
(codegen/emit/tma.py) and PIPELINE-PHASE's proof (verifier/analysis/pipeline.py) both come from
phase_of_wait, so changing it changes what is printed and what is proved alike."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.hw import mbarrier
from tileproof.verifier.analysis import pipeline as pipeline_proofs
from support.placed_barriers import bundled

WARP_SPECIALIZED = "hopper_matmul_warp_specialized"


@pytest.mark.parametrize("empty", [False, True])
def test_the_flipped_bit_waits_for_phase_of_wait(empty):
    """The emitter's protocol: bits start at phase_bits_init, each wait is for the current bit and
    flips it. The n-th wait's parity is phase_of_wait(n)'s, and try_wait.parity of that parity
    returns once that phase completed (phase -1 counts as completed at init)."""
    bits = {"~0u": 1, "0": 0}[mbarrier.phase_bits_init(empty=empty)]
    for n in range(6):
        assert bits == mbarrier.phase_of_wait(n, empty=empty) % 2
        bits ^= 1
    assert mbarrier.phase_of_wait(0, empty=True) == -1  # the first release wait passes on an empty stage


def test_arrival_counts():
    assert mbarrier.load_arrivals(1, 4) == 4  # one thread issues the 4 copies of an iteration
    assert mbarrier.release_arrivals(2, cluster_blocks=2) == 4  # 2 consumer warpgroups in each of 2 blocks


def test_the_kernel_prints_the_initial_bits_from_hw():
    fusion = bundled(WARP_SPECIALIZED)
    ir = lower(fusion.snapshot(), tp.get_target("sm_90a")).kernel
    source = emit(ir, cuda_headers=False)
    assert {b.empty for b in ir.mbarriers} == {False, True}, "a full and an empty mbarrier"
    for b in ir.mbarriers:
        assert f"unsigned {b.name}_phase = {mbarrier.phase_bits_init(empty=b.empty)};" in source


def test_pipeline_phase_proves_the_phases_hw_states(monkeypatch):
    fusion = bundled(WARP_SPECIALIZED)
    assert "PIPELINE-PHASE" not in tp.verify(fusion, "sm_90a").codes
    # a protocol that forgets that a stage starts empty: the producer's first wait would hang
    monkeypatch.setattr(pipeline_proofs, "phase_of_wait", lambda n, *, empty: n)
    report = tp.verify(bundled(WARP_SPECIALIZED), "sm_90a")
    assert "PIPELINE-PHASE" in report.codes, report.codes
    (diag,) = [d for d in report.diagnostics if d.code == "PIPELINE-PHASE"][:1]
    assert "empty wait" in str(diag.counterexample), diag.counterexample
