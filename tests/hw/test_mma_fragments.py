"""The tensor-core fragment maps of hw/mma.py, by brute force: each is a bijection from
(thread, element) onto its instruction tile, its inverse inverts it, and it equals both the
PTX ISA's formula (in PTX's own piecewise words, tests/support/ptx_fragments.py) and CUTLASS's CuTe
thread-value layout (decoded from its shape:stride text by tests/support/cute_layout.py).
Then the same maps as Exprs: z3 proves the bijection for every thread and element, and the z3
and C++ renderings evaluate as Python does at every point."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import z3
from tileproof.codegen.emit.cuda_expr import to_cuda
from tileproof.hw import mma
from tileproof.model.expr import as_expr, const, evaluate, var
from tileproof.verifier.solver import Query

from support import ptx_fragments
from support.cute_layout import TVLayout

WGMMA_NS = list(range(8, 257, 8))


# -- the fragments under test, each with its CuTe layout (CUTLASS include/cute/atom/) ---------------
# (fragment, CuTe TV layout text, CuTe's tile (rows, cols), whether CuTe's tile is B's (N, K))

SM80_16x8_Row = "((4,8),(2,2)):((32,1),(16,8))"
CUTE = {  # name -> (layout, CuTe tile, transposed)
    "mma.sync.m16n8k8 tf32 A": ("((4,8),(2,2)):((16,1),(8,64))", (16, 8), False),
    "mma.sync.m16n8k8 tf32 B": ("((4,8),2):((8,1),32)", (8, 8), True),
    "mma.sync.m16n8k16 A": ("((4,8),(2,2,2)):((32,1),(16,8,128))", (16, 16), False),
    "mma.sync.m16n8k16 B": ("((4,8),(2,2)):((16,1),(8,64))", (8, 16), True),
    "mma.sync.m16n8k8 16-bit A": (SM80_16x8_Row, (16, 8), False),
    "mma.sync.m16n8k8 16-bit B": ("((4,8),2):((16,1),8)", (8, 8), True),  # SM80_8x8_Row
    "mma.sync C": (SM80_16x8_Row, (16, 8), False),
    "wgmma A 16-bit": ("((4,8,4),(2,2,2)):((128,1,16),(64,8,512))", (64, 16), False),  # ALayout_64x16
    "wgmma A tf32": ("((4,8,4),(2,2)):((64,1,16),(8,256))", (64, 8), False),  # ALayout_64x8
}


def _cute_key(inst: mma.MmaInstruction, part: str) -> str:
    if part == "c":
        return "mma.sync C"
    if inst.threads == mma.WARPGROUP:
        return f"wgmma A {'tf32' if inst.input_type == 'tf32' else '16-bit'}"
    if inst.input_type == "tf32":
        return f"mma.sync.m16n8k8 tf32 {part.upper()}"
    return f"mma.sync.m16n8k{inst.k}{'' if inst.k == 16 else ' 16-bit'} {part.upper()}"


def cute_of(inst: mma.MmaInstruction, part: str) -> TVLayout:
    """The CuTe layout of an operand, over CuTe's tile."""
    if inst.threads == mma.WARPGROUP and part == "c":  # CLayout_64xN
        return TVLayout(f"((4,8,4),(2,2,{inst.n // 8})):((128,1,16),(64,8,512))", 64, inst.n)
    text, (rows, cols), _ = CUTE[_cute_key(inst, part)]
    return TVLayout(text, rows, cols)


def cute_transposed(inst: mma.MmaInstruction, part: str) -> bool:
    return part == "b"  # CuTe writes B as (N, K); the model as K x N


def cases() -> list[tuple[str, mma.MmaInstruction, str]]:
    out = []
    for inst in mma.mma_sync_instructions():
        out += [(f"{inst.name} {p}", inst, p) for p in "abc"]
    for dtype in ("bfloat16", "float16", "float32"):
        for n in WGMMA_NS if dtype == "bfloat16" else (8, 256):
            inst = mma.wgmma(n, dtype)
            out += [(f"{inst.name} {p}", inst, p) for p in "ac"]
    return out


CASES = cases()
IDS = [c[0] for c in CASES]


def every_point(f: mma.Fragment):
    return [(t, v) for t in range(f.threads) for v in range(f.elements)]


def ptx(inst: mma.MmaInstruction, part: str, thread: int, i: int) -> tuple[int, int]:
    return ptx_fragments.position(inst.input_type, inst.k, inst.threads, part, thread, i)


# -- brute force ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name, inst, part", CASES, ids=IDS)
def test_map_is_a_bijection_onto_the_tile(name, inst, part):
    f = getattr(inst, part)
    assert f.threads * f.elements == f.rows * f.cols
    seen = {}
    for t, v in every_point(f):
        pos = f.position(t, v)
        assert all(isinstance(x, int) for x in pos), (name, t, v, pos)
        assert 0 <= pos[0] < f.rows and 0 <= pos[1] < f.cols, (name, t, v, pos)
        assert pos not in seen, f"{name}: ({t}, {v}) and {seen[pos]} both hold {pos}"
        seen[pos] = (t, v)
    assert len(seen) == f.rows * f.cols


@pytest.mark.parametrize("name, inst, part", CASES, ids=IDS)
def test_inverse_inverts_it(name, inst, part):
    f = getattr(inst, part)
    for t, v in every_point(f):
        assert f.holder(*f.position(t, v)) == (t, v), (name, t, v)
    for r in range(f.rows):
        for c in range(f.cols):
            t, v = f.holder(r, c)
            assert 0 <= t < f.threads and 0 <= v < f.elements, (name, r, c, t, v)
            assert f.position(t, v) == (r, c), (name, r, c)


@pytest.mark.parametrize("name, inst, part", CASES, ids=IDS)
def test_map_is_the_ptx_formula(name, inst, part):
    f = getattr(inst, part)
    for t, v in every_point(f):
        assert f.position(t, v) == ptx(inst, part, t, v), (name, t, v)


@pytest.mark.parametrize("name, inst, part", CASES, ids=IDS)
def test_map_is_the_cute_layout(name, inst, part):
    f = getattr(inst, part)
    layout = cute_of(inst, part)
    assert (layout.threads, layout.values) == (f.threads, f.elements)
    for t, v in every_point(f):
        row, col = layout(t, v)
        want = (col, row) if cute_transposed(inst, part) else (row, col)
        assert f.position(t, v) == want, (name, t, v)


def test_the_checks_catch_a_wrong_map():
    """The bf16 A order used for tf32 (the seed's likely mistake) fails the PTX and CuTe checks,
    though it is a bijection of its own."""
    wrong = mma.MMA_M16N8K8["bfloat16"].a  # 16 x 8 as well
    tf32 = mma.MMA_M16N8K8_TF32
    layout = cute_of(tf32, "a")
    bad_ptx = [(t, v) for t, v in every_point(wrong) if wrong.position(t, v) != ptx(tf32, "a", t, v)]
    bad_cute = [(t, v) for t, v in every_point(wrong) if wrong.position(t, v) != layout(t, v)]
    # they agree only at (lane q = 0, element 0) and (q = 3, element 3): 16 of 128 points
    assert len(bad_ptx) == len(bad_cute) == 112


def test_registers_pack_two_16_bit_elements_low_half_first():
    f = mma.MMA_M16N8K16["float16"].a
    assert (f.per_register, f.registers) == (2, 4)
    assert [f.register_of(v) for v in range(8)] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
    assert all(f.element_of(*f.register_of(v)) == v for v in range(8))
    # a register's two elements are neighbours along k (ldmatrix's pairs)
    for t in range(32):
        for r in range(4):
            (m0, k0), (m1, k1) = f.position(t, 2 * r), f.position(t, 2 * r + 1)
            assert (m1, k1) == (m0, k0 + 1) and k0 % 2 == 0
    tf32 = mma.MMA_M16N8K8_TF32.a
    assert (tf32.per_register, tf32.registers, tf32.register_of(3), tf32.element_of(3)) == (1, 4, (3, 0), 3)
    d = mma.wgmma(256, "bfloat16").c
    assert (d.elements, d.registers) == (128, 128)  # N / 2 f32 registers


# -- the same maps rendered: z3 and C++ ----------------------------------------------------------------


def symbolic(f: mma.Fragment):
    t, v, r, c = var("t"), var("v"), var("r"), var("c")
    ranges = {"t": const(f.threads), "v": const(f.elements), "r": const(f.rows), "c": const(f.cols)}
    return t, v, r, c, ranges


@pytest.mark.parametrize("name, inst, part", CASES, ids=IDS)
def test_z3_proves_the_bijection(name, inst, part):
    """For all t < threads, v < elements: holder(position(t, v)) == (t, v) and the position is
    in the tile; for all (r, c) of the tile: position(holder(r, c)) == (r, c)."""
    f = getattr(inst, part)
    t, v, r, c, ranges = symbolic(f)
    row, col = map(as_expr, f.position(t, v))
    back_t, back_v = map(as_expr, f.holder(row, col))
    ht, hv = map(as_expr, f.holder(r, c))
    pr, pc = map(as_expr, f.position(ht, hv))
    q = Query([row, col, back_t, back_v, ht, hv, pr, pc], ranges)
    forward = z3.And(q.eq(back_t, t), q.eq(back_v, v), q.lt(row, const(f.rows)), q.lt(col, const(f.cols)))
    assert q.prove(forward).proved, name
    backward = z3.And(q.eq(pr, r), q.eq(pc, c), q.lt(ht, const(f.threads)), q.lt(hv, const(f.elements)))
    assert q.prove(backward).proved, name


def test_z3_finds_a_counterexample_to_a_wrong_inverse():
    f = mma.MMA_M16N8K8_TF32.a
    t, v, _, _, ranges = symbolic(f)
    row, col = f.position(t, v)
    wrong_t, wrong_v = mma.m16n8k8_16bit_a_holder(row, col)  # the 16-bit inverse
    q = Query([row, col, wrong_t, wrong_v], ranges)
    out = q.prove(z3.And(q.eq(wrong_t, t), q.eq(wrong_v, v)))
    assert not out.proved and out.model["v"] in (1, 2, 3)


@pytest.mark.parametrize("name, inst, part", CASES[::3], ids=IDS[::3])
def test_z3_rendering_evaluates_like_python(name, inst, part):
    """The z3 terms of the maps (rendered as is, no simplifier) at every (t, v) and (r, c)."""
    f = getattr(inst, part)
    t, v, r, c, ranges = symbolic(f)
    exprs = [*map(as_expr, f.position(t, v)), *map(as_expr, f.holder(r, c))]
    q = Query(exprs, ranges, simplify=False)
    terms = [q.term(e) for e in exprs]
    sample = every_point(f)[:: max(1, f.threads * f.elements // 512)]
    for (ti, vi), (ri, ci) in zip(sample, [f.position(*p) for p in reversed(sample)]):
        env = {"t": ti, "v": vi, "r": ri, "c": ci}
        subs = [(q.var(k), q.val(x)) for k, x in env.items()]
        got = [q._as_int(z3.simplify(z3.substitute(term, *subs))) for term in terms]
        assert got == [evaluate(e, env) for e in exprs], (name, env)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_cuda_rendering_evaluates_like_python(tmp_path):
    """Every map and inverse printed by codegen/emit/cuda_expr.py, compiled, at every point."""
    lines = ["#include <cstdio>", "int main() {"]
    want = []
    for name, inst, part in CASES:
        f = getattr(inst, part)
        t, v, r, c, _ = symbolic(f)
        pos = [to_cuda(as_expr(e), cast=False, bits=32) for e in f.position(t, v)]
        hold = [to_cuda(as_expr(e), cast=False, bits=32) for e in f.holder(r, c)]
        lines.append(f"for (unsigned t = 0; t < {f.threads}U; ++t) for (unsigned v = 0; v < {f.elements}U; ++v) {{"
                     f" unsigned r = {pos[0]}, c = {pos[1]};"
                     f' printf("%u %u %u %u\\n", r, c, {hold[0]}, {hold[1]}); }}')
        for ti, vi in every_point(f):
            ri, ci = f.position(ti, vi)
            want.append([ri, ci, *f.holder(ri, ci)])
    lines.append("}")
    src = tmp_path / "fragments.cpp"
    src.write_text("\n".join(lines))
    subprocess.run(["g++", "-O1", "-o", str(tmp_path / "fragments"), str(src)], check=True)
    out = subprocess.run([str(tmp_path / "fragments")], capture_output=True, text=True, check=True).stdout
    got = [[int(x) for x in line.split()] for line in out.splitlines()]
    assert got == want
