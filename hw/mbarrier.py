"""The mbarrier (PTX ISA 9.7.13.15): a 64-bit shared-memory object that completes one phase each time
its expected arrivals (and, for TMA loads, its expected transaction bytes) are in. A thread waits
with `mbarrier.try_wait.parity`, which returns once the phase of the given parity has completed.

Phases are numbered from 0 at init. A thread that waits on one mbarrier again and again keeps one
bit per mbarrier (per stage of a circular buffer) and flips it after each wait, so its n-th wait
(n = 0, 1, ...) is for phase `phase_of_wait(n, empty)`:

    full   (a TMA load's data arrive on it)          phase n:      the n-th fill
    empty  (consumers release a stage the producer    phase n - 1:  the release of the fill before;
           refills; the stage starts empty)                         phase -1, parity 1, has "completed"
                                                                    at init, so the first wait passes

The code generator prints the bits' initial value and the flip (codegen/emit/tma.py); the
verifier's PIPELINE-PHASE proof (verifier/analysis/pipeline.py) takes the phase each wait is for
from the same function. The arrival counts and expect-tx bytes of the kernel's mbarriers come
from here too.
"""

from __future__ import annotations

from typing import TypeVar

Count = TypeVar("Count")  # an int, or a z3 integer term in the proofs


def phase_of_wait(waits_before: Count, *, empty: bool) -> Count:
    """The phase a thread's wait is for, given how many waits it made on this mbarrier before
    (`empty`: a stage-release mbarrier, whose first wait is for the phase before the first)."""
    return waits_before - 1 if empty else waits_before


def initial_parity(*, empty: bool) -> int:
    """The parity bit a thread waits for first: phase_of_wait(0) mod 2."""
    return phase_of_wait(0, empty=empty) % 2


def phase_bits_init(*, empty: bool) -> str:
    """The C++ initial value of a thread's phase bits (one per stage), every bit initial_parity."""
    return "~0u" if initial_parity(empty=empty) else "0"


def load_arrivals(issuing_threads: int, copies_per_phase: int) -> int:
    """A full mbarrier's arrival count: each issuing thread arrives once per copy (with its
    expect-tx bytes) in one phase, so the phase completes when every copy's bytes have landed.
    Where the copies of a phase are not a constant count, copies_per_phase is 1: each copy
    announces its bytes alone (mbarrier.expect_tx) and the thread arrives after its last one."""
    return issuing_threads * copies_per_phase


def expect_tx_bytes(copy_bytes: Count) -> Count:
    """The transaction bytes a TMA load's arrival announces (mbarrier.arrive.expect_tx): the
    bytes its copy writes into this block's shared memory, the whole box, holes included (the
    copy fills them with zeros). A multicast writes the same box into every receiver, and each
    receiver's own arrival announces it, so the count is per block either way."""
    return copy_bytes


def release_arrivals(releasers: int, cluster_blocks: int = 1) -> int:
    """An empty mbarrier's arrival count: one arrival per releaser of the stage (a consumer
    warpgroup read by wgmma, whose first thread arrives after its wgmma.wait_group; or each
    thread, where threads read the stage), in every block of the cluster whose multicast refills it."""
    return releasers * cluster_blocks


__all__ = ["expect_tx_bytes", "initial_parity", "load_arrivals", "phase_bits_init", "phase_of_wait", "release_arrivals"]
