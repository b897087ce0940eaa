"""The tensor-core register fragments as the PTX ISA states them, in its own piecewise words
(groupID = lane >> 2, threadID_in_group = lane % 4, element i "low to high"), kept apart from
hw/mma.py's formulas so tests can hold one against the other. An instruction is named by its
operands' PTX type ("tf32", "bf16", "f16"), its k and the threads issuing it (32 or 128)."""

from __future__ import annotations


def mma_sync(input_type: str, k: int, part: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) of element i of `lane` in operand `part` ("a", "b", "c") of mma.sync
    m16n8k{k}: PTX ISA 9.7.14.5.7 / 9.7.14.5.8, "The row and column of a matrix fragment"."""
    group, tig = lane >> 2, lane % 4
    if part == "c":  # Figures 77, 83
        return (group if i < 2 else group + 8), tig * 2 + (i & 1)
    if input_type == "tf32":
        if part == "a":  # Figure 72
            return (group if i in (0, 2) else group + 8), (tig if i in (0, 1) else tig + 4)
        return (tig if i == 0 else tig + 4), group  # Figure 75
    if k == 8:
        if part == "a":  # Figure 71
            return (group if i in (0, 1) else group + 8), tig * 2 + (i & 1)
        return tig * 2 + i, group  # Figure 74
    if part == "a":  # Figure 79
        row = group if (0 <= i < 2 or 4 <= i < 6) else group + 8
        return row, tig * 2 + (i & 1) + (8 if i >= 4 else 0)
    return tig * 2 + (i & 1) + (8 if i >= 2 else 0), group  # Figure 81


def wgmma(input_type: str, part: str, thread: int, i: int) -> tuple[int, int]:
    """PTX ISA 9.7.15.5.1.1 gives wgmma's fragments as figures (148-151): warp w of the
    warpgroup holds rows 16w .. 16w + 15; there D repeats mma.sync's m16n8 C every 8 columns
    (elements 4j .. 4j + 3 in columns 8j ..), and register A is mma.sync's A of the same k."""
    warp, lane = thread // 32, thread % 32
    if part == "c":
        row, col = mma_sync("f32", 8, "c", lane, i % 4)
        return 16 * warp + row, 8 * (i // 4) + col
    row, col = mma_sync(input_type, 8 if input_type == "tf32" else 16, "a", lane, i)
    return 16 * warp + row, col


def position(input_type: str, k: int, threads: int, part: str, thread: int, i: int) -> tuple[int, int]:
    """The PTX ISA's (row, col) of element i of `thread` in operand `part` of an instruction."""
    if threads == 32:
        return mma_sync(input_type, k, part, thread, i)
    return wgmma(input_type, part, thread, i)
