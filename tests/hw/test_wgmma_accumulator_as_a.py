"""hw/mma.py accumulator_as_a: a wgmma m64nNk16's accumulators (attention's S), converted to 16
bits, are element for element the register A fragments of the next RS wgmma over K = N (P V),
K step j taking D elements 8 j .. 8 j + 7: checked at every thread and element for every N, and
shown to fail for maps that are not the same (the tf32 A order, a wrong step)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.hw.mma import (WARPGROUP, accumulator_as_a, accumulator_feeds_a, wgmma, wgmma_a16_position,
                              wgmma_a_tf32_position, wgmma_d_position)


@pytest.mark.parametrize("n", range(16, 257, 16))
def test_every_accumulator_is_the_a_element_of_its_k_step(n):
    assert accumulator_feeds_a(n) == []


def test_the_a_registers_are_consecutive_accumulator_pairs():
    """A register r of step j packs D elements 8 j + 2 r (low) and 8 j + 2 r + 1 (high): the
    conversion packs neighbouring accumulators, as FlashAttention-3 does for 16-bit P."""
    inst = wgmma(16, tp.bfloat16)
    for j in range(8):
        for r in range(inst.a.registers):
            low, high = (inst.a.element_of(r, half) for half in (0, 1))
            assert [accumulator_as_a(8 * j + 2 * r + h) for h in (0, 1)] == [(j, low), (j, high)]


def test_each_thread_keeps_its_own_elements():
    """No element moves between threads: the thread holding S[m, n] holds P[m, n] of step n / 16."""
    for t in range(WARPGROUP):
        for v in range(64):
            j, e = accumulator_as_a(v)
            row, col = wgmma_a16_position(t, e)
            assert wgmma_d_position(t, v) == (row, col + 16 * j)


def test_another_a_order_does_not_match():
    """The comparison can fail: tf32's A order (m64nNk8: element 1 moves 8 rows down) is not the
    accumulators' order, nor is a K step of 4 elements."""
    assert any(wgmma_d_position(t, v) != (lambda rc: (rc[0], rc[1] + 8 * (v // 4)))(wgmma_a_tf32_position(t, v % 4))
               for t in range(WARPGROUP) for v in range(16))
    assert any(wgmma_d_position(t, v) != (lambda rc: (rc[0], rc[1] + 16 * (v // 4)))(wgmma_a16_position(t, v % 4))
               for t in range(WARPGROUP) for v in range(16))


@pytest.mark.parametrize("n", [8, 24, 0, 272, "16"])
def test_a_width_without_whole_k_steps_is_refused(n):
    with pytest.raises(tp.ScheduleError, match="multiple of 16"):
        accumulator_feeds_a(n)
