"""Runs the source of a tensor-core probe kernel (codegen/emit/mma_probe.py) on the CPU, one
lane at a time, reading the C++ text itself: each register load, the operand order of the
mma.sync asm and each store. The mma.sync is given the PTX ISA's semantics through
tests/support/ptx_fragments.py (register r of a lane holds PTX element r, or elements 2r and
2r + 1 in its low and high half): the tile a register belongs to is decided there, not by
hw/mma.py. So the emulated D equals A B + C only if the kernel text puts each element
where the hardware expects it.
"""

from __future__ import annotations

import re

import numpy as np

from . import ptx_fragments

_CVT = re.compile(r'asm\("cvt\.rna\.tf32\.f32 %0, %1;" : "=r"\((\w+)\[(\d+)\]\) : "f"\((\w+)\[(.+)\]\)\);')
_PACK = re.compile(r"(\w+)\[(\d+)\] = \(unsigned\)\((\w+)\[(.+)\]\) \| \(\(unsigned\)\((\w+)\[(.+)\]\) << 16\);")
_LOAD = re.compile(r"(c_reg)\[(\d+)\] = (c)\[(.+)\];")
_STORE = re.compile(r"d\[(.+)\] = (d_reg)\[(\d+)\];")
_MMA = re.compile(r'asm volatile\("(mma\.sync\.aligned\.m16n8k(\d+)\.row\.col\.f32\.(\w+)\.\w+\.f32) [^"]*"'
                  r' : (.*) : (.*)\);')
_OPERAND = re.compile(r'"[=]?[rf]"\((\w+)\[(\d+)\]\)')


def _index(text: str, lane: int) -> int:
    """A C++ unsigned index expression over `lane` (+ * / % and U-suffixed literals)."""
    py = re.sub(r"(\d+)U\b", r"\1", text).replace("/", "//")
    if not re.fullmatch(r"[\d\s()+*/%lane]+", py):
        raise ValueError(f"unexpected index expression {text!r}")
    return eval(py, {"__builtins__": {}}, {"lane": lane})  # noqa: S307 - checked above: digits, operators, lane


def run(source: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D as the kernel computes it from row-major A (m x k), B (k x n), C (m x n), in float64."""
    lines = [ln.strip() for ln in source.splitlines()]
    (mma,) = [m for m in map(_MMA.fullmatch, lines) if m]
    k, input_type = int(mma.group(2)), mma.group(3)
    outs = _OPERAND.findall(mma.group(4))
    ins = _OPERAND.findall(mma.group(5))
    arrays = {"a": a.ravel(), "b": b.ravel(), "c": c.ravel()}
    d = np.full(c.size, np.nan)
    tiles = {"a": np.full(a.shape, np.nan), "b": np.full(b.shape, np.nan), "c": np.full(c.shape, np.nan)}
    for lane in range(32):
        regs: dict[tuple[str, int], tuple[float, ...]] = {}
        for ln in lines:
            if m := _CVT.fullmatch(ln):
                regs[(m[1], int(m[2]))] = (arrays[m[3]][_index(m[4], lane)],)
            elif m := _PACK.fullmatch(ln):
                regs[(m[1], int(m[2]))] = (arrays[m[3]][_index(m[4], lane)], arrays[m[5]][_index(m[6], lane)])
            elif m := _LOAD.fullmatch(ln):
                regs[(m[1], int(m[2]))] = (arrays[m[3]][_index(m[4], lane)],)
        # the asm's inputs in order: A's registers, B's, then C's, each counted by PTX
        n_a = {"tf32": 4, "bf16": 4 if k == 16 else 2, "f16": 4 if k == 16 else 2}[input_type]
        n_b = {"tf32": 2, "bf16": 2 if k == 16 else 1, "f16": 2 if k == 16 else 1}[input_type]
        groups = {"a": ins[:n_a], "b": ins[n_a:n_a + n_b], "c": ins[n_a + n_b:]}
        for part, names in groups.items():
            for r, (name, i) in enumerate(names):
                for h, value in enumerate(regs[(name, int(i))]):
                    element = r if part == "c" or input_type == "tf32" else 2 * r + h
                    row, col = ptx_fragments.mma_sync(input_type, k, part, lane, element)
                    if not np.isnan(tiles[part][row, col]):
                        raise AssertionError(f"two registers carry {part}[{row}, {col}] into the mma")
                    tiles[part][row, col] = value
    if any(np.isnan(t).any() for t in tiles.values()):
        raise AssertionError("an element of A, B or C reaches no register")
    product = tiles["a"] @ tiles["b"] + tiles["c"]
    results = {}
    for lane in range(32):
        for v, (name, i) in enumerate(outs):
            row, col = ptx_fragments.mma_sync(input_type, k, "c", lane, v)
            results[(lane, name, int(i))] = product[row, col]
    for lane in range(32):
        for ln in lines:
            if m := _STORE.fullmatch(ln):
                d[_index(m[1], lane)] = results[(lane, m[2], int(m[3]))]
    return d.reshape(c.shape)
