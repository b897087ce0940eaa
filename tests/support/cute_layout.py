"""A tiny evaluator of CuTe layouts written in CuTe's shape:stride notation, for checking the
tensor-core fragment maps of hw/mma.py against CUTLASS's thread-value layouts without
sharing a formula with them.

A layout `S:D` maps a coordinate to an index: an int coordinate of a mode whose shape is a
tuple is split colexicographically (the first sub-mode varies fastest) into one coordinate per
sub-mode, and the index is the sum of coordinate times stride over the leaves. A CuTe TV layout
((thread modes),(value modes)):((thread strides),(value strides)) maps (thread, value) to the
column-major index of an element of its tile: (row, col) = (index % rows, index // rows).
"""

from __future__ import annotations

import ast
from math import prod

Nested = int | tuple  # an int or a tuple of Nested


def parse(text: str) -> tuple[Nested, Nested]:
    """(shape, stride) of a layout written `shape:stride`, e.g. "((4,8),2):((8,1),32)"."""
    shape, _, stride = text.replace(" ", "").partition(":")
    out = ast.literal_eval(shape), ast.literal_eval(stride)
    if not _congruent(*out):
        raise ValueError(f"{text}: shape and stride do not have the same nesting")
    return out


def _congruent(shape: Nested, stride: Nested) -> bool:
    if isinstance(shape, int):
        return isinstance(stride, int)
    return (isinstance(stride, tuple) and len(shape) == len(stride)
            and all(_congruent(a, b) for a, b in zip(shape, stride)))


def size(shape: Nested) -> int:
    """The number of coordinates of a shape."""
    return shape if isinstance(shape, int) else prod(size(s) for s in shape)


def index(shape: Nested, stride: Nested, coord: int) -> int:
    """The index an int coordinate of the mode shape:stride maps to."""
    if not 0 <= coord < size(shape):
        raise ValueError(f"coordinate {coord} outside a mode of size {size(shape)}")
    if isinstance(shape, int):
        return coord * stride
    total = 0
    for s, d in zip(shape, stride):
        total += index(s, d, coord % size(s))  # the first sub-mode varies fastest
        coord //= size(s)
    return total


class TVLayout:
    """A CuTe thread-value layout over a rows x cols tile (column-major)."""

    def __init__(self, text: str, rows: int, cols: int):
        shape, stride = parse(text)
        if isinstance(shape, int) or len(shape) != 2:
            raise ValueError(f"{text}: a TV layout has two modes, (thread, value)")
        (self.thread_shape, self.value_shape), (self.thread_stride, self.value_stride) = shape, stride
        self.rows, self.cols = rows, cols

    @property
    def threads(self) -> int:
        return size(self.thread_shape)

    @property
    def values(self) -> int:
        return size(self.value_shape)

    def __call__(self, thread: int, value: int) -> tuple[int, int]:
        """(row, col) of the tile element (thread, value) maps to."""
        i = index(self.thread_shape, self.thread_stride, thread) + index(self.value_shape, self.value_stride, value)
        if not 0 <= i < self.rows * self.cols:
            raise ValueError(f"({thread}, {value}) maps to {i}, outside the {self.rows} x {self.cols} tile")
        return i % self.rows, i // self.rows
