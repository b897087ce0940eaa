"""Differential soundness test of the ldmatrix / stmatrix rules: z3 against brute force.

Hypothesis builds small ldmatrix and stmatrix schedules with concrete extents: the issuing loop
domain is the m8n8 fragment (.x1 / .x2 / .x4, one or more warps, serial, TIDy and BIDx outer
axes; 16-bit elements, or 32-bit ones: 8 x 4 matrices, one element per register, ldmatrix only)
or a perturbation of it (lane roles swapped, rows permuted, element pairs split or joined, extra
or missing vector elements, partial warps, holes, 32-bit stmatrix, 8-byte elements), and the shared tensor's
allocation is row-major or a perturbation (column-major, padded rows, 16-byte chunks moved or
XOR-swizzled, element pairs swizzled or interleaved). For each, the oracle below decides
LDSM-THREAD-ROWS, LDSM-ALIGNMENT and LDSM-REGISTER-LAYOUT by enumerating every thread, loop
point and element in plain Python (the model's index expressions evaluated through
model.expr.PY_EVAL, never z3) against the PTX map written out here in bytes (lane t's register
i is bytes 4 (t % 4) .. of row t / 4 of matrix i; not hw/ldmatrix.py), and
`tp.verify(..., rules=[...])` decides them with z3:
0 disagreements, and both verdicts of every rule exercised.

The oracle shares the model (index maps, allocation, shared-memory plan) with the verifier by
design, and implements the rules' logic itself; it never imports tileproof.verifier.
Knobs: TILEPROOF_DIFF_SCALE (number of examples), TILEPROOF_DIFF_SEED (another population).
"""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter

from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st

import tileproof as tp
from tileproof.execution.allocation import compute_allocation
from tileproof.model.expr import PY_EVAL, Expr, evaluate, mul
from tileproof.execution.indexing import (
    block_dims, indices_from_logical, indices_from_loop, linear_offset, loop_var, producer_logical, thread_dims,
    valid_item_bounds,
)
from tileproof.execution.smem_plan import plan_shared_memory
from tileproof.model.types import BLOCK_TYPES, THREAD_TYPES

from support.brute_force import describe
from support.schedule_gen import Case, Recorder

P = tp.ParallelType
LS = tp.LoadStoreOpType
CODES = ("LDSM-THREAD-ROWS", "LDSM-ALIGNMENT", "LDSM-REGISTER-LAYOUT")
TARGET = "sm_90a"
WARP = 32
MAX_POINTS = 4096  # threads x loop points x elements the oracle enumerates per case
EXAMPLES = 300
SCALE = float(os.environ.get("TILEPROOF_DIFF_SCALE", "1"))
SEED = os.environ.get("TILEPROOF_DIFF_SEED")


# -- the oracle ------------------------------------------------------------------------------------


def compile_expr(e: Expr):
    """A closure env -> int evaluating e with the model's Python op table (PY_EVAL)."""
    if e.op == "const":
        value = e.value
        return lambda env: value
    if e.op == "var":
        name = e.value
        return lambda env: env[name]
    f, kids = PY_EVAL[e.op], [compile_expr(a) for a in e.args]
    if len(kids) == 2:
        a, b = kids
        return lambda env: f(a(env), b(env))
    return lambda env: f(*[k(env) for k in kids])


def ext(e: Expr) -> int:
    return evaluate(e, {})


def oracle(fusion) -> dict[str, list[str]]:
    """code -> witnesses (empty: the rule holds) for every ldmatrix / stmatrix of the fusion."""
    out: dict[str, list[str]] = {c: [] for c in CODES}
    allocations = {t.name: compute_allocation(t) for t in fusion.tensors if not t.is_fusion_input}
    plan = plan_shared_memory(fusion, allocations)
    for op in fusion.exprs:
        if op.op_type not in (LS.LdMatrix, LS.StMatrix):
            continue
        ld = op.op_type is LS.LdMatrix
        smem, regs, issuer = (op.inputs[0], op.output, op.output) if ld else (op.output, op.inputs[0], op.output)
        for code, text in _decide(fusion, op, ld, smem, regs, issuer, allocations, plan):
            out[code].append(f"{op}: {text}")
    return out


def _decide(fusion, op, ld, smem, regs, issuer, allocations, plan):
    # the instruction shape
    if smem.memory_type is not tp.MemoryType.Shared or regs.memory_type is not tp.MemoryType.Local:
        yield "LDSM-THREAD-ROWS", "memory types"
        return
    b = smem.dtype.bytes  # element bytes
    if b not in (2, 4) or regs.dtype.bytes != b or (b == 4 and not ld):
        yield "LDSM-THREAD-ROWS", f"{smem.dtype.bytes}-byte elements"
        return
    k = 4 // b  # elements per 32-bit register
    width = 16 // b  # columns of a matrix
    vec = [i for i in issuer.loop if i.parallel_type is P.Vectorize]
    n = 1
    for i in vec:
        n *= ext(i.extent_expr)
    if n not in (k, 2 * k, 4 * k):
        yield "LDSM-THREAD-ROWS", f"{n} elements per thread"
        return

    # the index expressions
    bdx, bdy, bdz = (ext(e) for e in thread_dims(fusion))
    threads = bdx * bdy * bdz
    grid = block_dims(fusion)
    idx_c = indices_from_loop(issuer)
    idx_m = indices_from_logical(smem, producer_logical(op, 0, idx_c)) if ld else idx_c
    alloc = allocations[smem.name]
    offset = compile_expr(mul(linear_offset(alloc.strides(), idx_m), smem.dtype.bytes))
    buffer = ext(plan.offset(smem.name))
    if ld:
        row_e, col_e = idx_c[regs.logical[-2].uid], idx_c[regs.logical[-1].uid]
    else:
        logical = producer_logical(op, 0, idx_c)
        row_e, col_e = logical[-2], logical[-1]
    row, col = compile_expr(row_e), compile_expr(col_e)
    active = [(compile_expr(loop_var(issuer, i)), ext(i.extent_expr))
              for i in issuer.loop if i.parallel_type in THREAD_TYPES or i.parallel_type in BLOCK_TYPES]
    valid = [(compile_expr(b.value), ext(b.extent)) for b in valid_item_bounds(issuer, idx_c)]
    checks = active + valid

    # the loop points: block indices and serial loop indices
    names, ranges = [], []
    for i in issuer.loop:
        p = i.parallel_type
        if p in BLOCK_TYPES:
            names.append(p.cuda_name)
            ranges.append(range(ext(grid[p])))
        elif p not in THREAD_TYPES and p is not P.Vectorize:
            names.append(loop_var(issuer, i).value)
            ranges.append(range(ext(i.extent_expr)))
    vec_names = [loop_var(issuer, i).value for i in vec]
    vec_exts = [ext(i.extent_expr) for i in vec]

    def element_env(v):
        env = {}
        for name, e in zip(reversed(vec_names), reversed(vec_exts)):
            env[name] = v % e
            v //= e
        return env

    elements = [element_env(v) for v in range(n)]
    thread_envs = [{"threadIdx.x": t % bdx, "threadIdx.y": (t // bdx) % bdy, "threadIdx.z": t // (bdx * bdy)}
                   for t in range(threads)]
    tables = []
    for point in itertools.product(*ranges):
        base = dict(zip(names, point))
        executes, E, R, C = {}, {}, {}, {}
        for t in range(threads):
            for v in range(n):
                env = {**base, **thread_envs[t], **elements[v]}
                executes[t, v] = all(f(env) < bound for f, bound in checks)
                E[t, v], R[t, v], C[t, v] = offset(env), row(env), col(env)
        tables.append((base, executes, E, R, C))

    # whole warps
    for base, executes, *_ in tables:
        for w in range(-(-threads // WARP)):
            lanes = range(WARP * w, WARP * w + WARP)
            if not any(executes.get((t, v), False) for t in lanes for v in range(n)):
                continue
            bad = [(t, v) for t in lanes for v in range(n) if t >= threads or not executes[t, v]]
            if bad:
                yield "LDSM-THREAD-ROWS", f"{base} warp {w}: thread {bad[0][0]} element {bad[0][1]} does not execute"
                return

    # rows, alignment, fragment
    found = set()
    for base, executes, E, R, C in tables:
        for (t, v), ok in executes.items():
            if not ok:
                continue
            lane, w0 = t % WARP, t - t % WARP
            # PTX: lane t's register v // k is bytes 4 (t % 4) .. 4 (t % 4) + 3 of row t / 4 of matrix v // k;
            # element v is its bytes b (v % k) ..; row t / 4 is at what lane 4 (t / 4) holds at its byte 0
            # (lane 4 (t / 4), element k (v // k)): column 0
            m0 = k * (v // k)
            byte = 4 * (lane % 4) + b * (v % k)
            want = E[w0 + 4 * (lane // 4), m0] + byte
            if E[t, v] != want and "rows" not in found:
                found.add("rows")
                yield "LDSM-THREAD-ROWS", f"{base} thread {t} element {v}: byte {E[t, v]}, expected {want}"
            if lane % 4 == 0 and v % k == 0 and (buffer + E[t, v]) % 16 and "align" not in found:
                found.add("align")
                yield "LDSM-ALIGNMENT", f"{base} thread {t} element {v}: address {buffer + E[t, v]}"
            want_r, want_c = R[w0, m0] + lane // 4, C[w0, m0] + byte // b
            if (R[t, v], C[t, v]) != (want_r, want_c) and "frag" not in found:
                found.add("frag")
                yield "LDSM-REGISTER-LAYOUT", (f"{base} thread {t} element {v}: ({R[t, v]}, {C[t, v]}), "
                                               f"expected ({want_r}, {want_c})")
            if lane == 0 and v % k == 0 and "frag" not in found:
                for other in range(0, n, k):
                    if other != v and abs(R[t, v] - R[t, other]) < 8 and abs(C[t, v] - C[t, other]) < width:
                        found.add("frag")
                        yield "LDSM-REGISTER-LAYOUT", f"{base} warp {t // WARP}: matrices {v // k}, {other // k} overlap"
                        break


# -- the schedules ------------------------------------------------------------------------------------


class Axes:
    """Loop IDs of one tensor by name, for writing schedules as named splits and merges."""

    def __init__(self, tv, names, run):
        self.tv, self.run = tv, run
        self.ids = dict(zip(names, tv.get_loop_domain()))

    def pos(self, name):
        return self.tv.loop.index(self.ids[name])

    def extent(self, name):
        return ext(self.ids[name].extent_expr)

    def split(self, name, factor, outer, inner, inner_split=True):
        p = self.pos(name)
        self.run(f"{self.tv.name}.split({name}, {factor}, inner_split={inner_split}) -> {outer}, {inner}",
                 self.tv.split, p, factor, inner_split)
        del self.ids[name]
        self.ids[outer], self.ids[inner] = self.tv.loop[p], self.tv.loop[p + 1]

    def merge(self, outer, inner, name):
        po, pi = self.pos(outer), self.pos(inner)
        self.run(f"{self.tv.name}.merge({outer}, {inner}) -> {name}", self.tv.merge, po, pi)
        del self.ids[outer], self.ids[inner]
        self.ids[name] = self.tv.loop[min(po, pi)]

    def merge_all(self, names, name):
        current = names[0]
        for k, other in enumerate(names[1:]):
            new = name if k == len(names) - 2 else f"{name}{k}"
            self.merge(current, other, new)
            current = new
        if len(names) == 1:
            self.ids[name] = self.ids.pop(names[0])

    def swizzle(self, x, y):
        px, py = self.pos(x), self.pos(y)
        self.run(f"{self.tv.name}.swizzle(XOR, {x}, {y})", self.tv.swizzle, tp.SwizzleType.XOR, px, py)
        self.ids[x], self.ids[y] = self.tv.loop[px], self.tv.loop[py]

    def order(self, names):
        perm = [0] * len(self.tv.loop)
        for new, name in enumerate(names):
            perm[self.pos(name)] = new
        self.run(f"{self.tv.name}.reorder({names})", self.tv.reorder, perm)

    def parallelize(self, name, p):
        self.run(f"{self.tv.name}.{name}.parallelize({p})", self.ids[name].parallelize, p)


def sometimes(draw, percent: int) -> bool:
    """True with about `percent` % probability. Hypothesis favours the ends of a range (0 and 99),
    so the rare outcome sits in the middle and the common one at both ends."""
    return 40 <= draw(st.integers(0, 99)) < 40 + percent


def mostly(normal, rare, weight: int = 6) -> list:
    """A list to sample from: `normal` (one value) at both ends, `weight` times, the rare values inside."""
    return [normal] * weight + list(rare) + [normal] * weight


def _fragment(draw, ax: Axes, steps, wide: bool = False) -> list[str]:
    """Schedule the issuing tensor [R, C] as the m8n8 fragment, or a perturbation of it; `wide`:
    for 32-bit elements (rows of 4 columns, one column per lane)."""
    chunk = draw(st.sampled_from(mostly(4, [8, 2]) if wide else mostly(8, [4, 16])))
    ax.split("C", chunk, "co", "c8")
    pair = draw(st.sampled_from(mostly(1, [2]) if wide else mostly(2, [1, 4])))
    if pair == 1:
        ax.ids["cq"] = ax.ids.pop("c8")
        cp = None
    else:
        ax.split("c8", pair, "cq", "cp")
        cp = "cp"
    ax.split("R", draw(st.sampled_from(mostly(8, [4, 16], 10))), "ro", "r8")
    if ax.extent("r8") >= 4 and sometimes(draw, 8):
        ax.split("r8", 2, "rh", "rl")
        ax.merge("rl", "rh", "r8")  # rows in the order 0, 2, 4, ..., 1, 3, ...
        steps.append("rows permuted")
    mats = []
    for outer in ("ro", "co"):
        e = ax.extent(outer)
        if e >= 2 and draw(st.booleans()):
            if e > 2:
                ax.split(outer, 2, outer + "o", outer + "m")
                mats.append(outer + "m")
            else:
                mats.append(outer)
    lane_order = ["cq", "r8"] if sometimes(draw, 10) else ["r8", "cq"]
    ax.merge(*lane_order, "lane")
    vec = list(draw(st.permutations(mats)))
    if cp is not None:
        vec = [cp] + vec if sometimes(draw, 10) else vec + [cp]
    rest = [k for k in ax.ids if k not in vec and k != "lane"]
    if rest and sometimes(draw, 6):
        vec.append(draw(st.sampled_from(sorted(rest))))  # an extra vectorized axis
    if vec and not sometimes(draw, 3):
        ax.merge_all(vec, "v")
    else:
        vec = []
    rest = sorted(k for k in ax.ids if k not in ("lane", "v"))
    tidx, order, used = "lane", [], set()
    for k in rest:
        mode = draw(st.sampled_from(["serial", "serial", "tidx", "tidy", "bidx"]))
        if mode == "tidx" and "tidx" not in used and ax.extent(k) * ax.extent(tidx) <= 128:
            used.add("tidx")
            ax.merge(k, tidx, "tidx")
            tidx = "tidx"
            continue
        if mode in ("tidy", "bidx") and mode not in used:
            used.add(mode)
            ax.parallelize(k, P.TIDy if mode == "tidy" else P.BIDx)
        order.append(k)
    order.append(tidx)
    if vec:
        order.append("v")
    ax.order(order)
    ax.parallelize(tidx, P.TIDx)
    if vec:
        ax.parallelize("v", P.Vectorize)
    return order


SMEM_LAYOUTS = ["row"] * 4 + ["col", "pad", "pad_outer", "chunks", "xor_chunks", "xor_pairs", "quad",
                "interleave", "perm", "rowperm"] + ["row"] * 4


def _smem_layout(draw, ax: Axes, steps) -> None:
    """Transform the shared tensor's [R, C] into its allocation order (chunks: 16 bytes, 8 16-bit
    or 4 32-bit elements)."""
    chunk = max(1, 16 // ax.tv.dtype.bytes)
    mode = draw(st.sampled_from(SMEM_LAYOUTS))
    steps.append(f"shared layout {mode}")
    if mode == "col":
        ax.order(["C", "R"])
    elif mode == "pad":
        ax.split("C", draw(st.sampled_from([3, 5, 6, 7, 9, 10, 12])), "co", "ci")
    elif mode == "pad_outer":
        ax.split("C", draw(st.sampled_from([2, 3])), "co", "ci", inner_split=False)
    elif mode == "chunks":
        ax.split("C", chunk, "co", "c8")
        ax.order(["co", "R", "c8"])
    elif mode == "xor_chunks":
        ax.split("C", chunk, "co", "c8")
        k = ax.extent("co")
        if k in (2, 4) and ax.extent("R") % k == 0:
            ax.split("R", k, "ro", "ri")
            ax.swizzle("ri", "co")
    elif mode == "xor_pairs":
        ax.split("C", 2, "cq", "cp")
        k = ax.extent("cq")
        if k in (4, 8) and ax.extent("R") % k == 0:
            ax.split("R", k, "ro", "ri")
            ax.swizzle("ri", "cq")
    elif mode == "quad":
        ax.split("C", chunk, "co", "c8")
        ax.split("c8", 2, "cq", "cp")  # 32-bit: pairs of elements, half chunks
        ax.order(["co", "cq", "R", "cp"])
    elif mode == "interleave":
        ax.split("C", 2, "cq", "cp")
        ax.order(["R", "cp", "cq"])
    elif mode == "perm":
        ax.split("C", chunk, "co", "c8")
        ax.order(list(draw(st.permutations(["R", "co", "c8"]))))
    elif mode == "rowperm" and ax.extent("R") % 2 == 0:
        ax.split("R", 2, "rh", "rl")
        ax.order(["rl", "rh", "C"])


@st.composite
def ldsm_cases(draw) -> Case:
    kind = draw(st.sampled_from(["ldmatrix", "stmatrix"]))
    if kind == "ldmatrix":  # 32-bit elements: ldmatrix only (a 32-bit stmatrix is a shape violation)
        dtype = draw(st.sampled_from(mostly(tp.float16, [tp.bfloat16] * 8 + [tp.float32] * 8 + [tp.float64], 6)))
    else:
        dtype = draw(st.sampled_from(mostly(tp.float16, [tp.bfloat16] * 10 + [tp.float32], 6)))
    rows = draw(st.sampled_from(mostly(16, [8] * 6 + [32] * 4 + [4, 12], 4)))  # 4, 12: partial warps, holes
    cols = draw(st.sampled_from(mostly(16, [8] * 6 + [32] * 4 + [12], 4)))  # 12: holes
    steps = [f"{kind} {dtype} [{rows}, {cols}]"]
    run = Recorder(steps)
    with tp.Fusion(kind) as fusion:
        t0 = tp.make_contig_concrete_tensor([rows, cols], dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.LdMatrix if kind == "ldmatrix" else LS.StMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    smem = t1 if kind == "ldmatrix" else t2
    smem.set_memory_type(tp.MemoryType.Shared)
    logical = t2.get_loop_domain()
    _fragment(draw, Axes(t2, ["R", "C"], run), steps, wide=dtype.bytes == 4 and draw(st.integers(0, 9)) > 0)
    if kind == "stmatrix":  # the allocation branch of the issuing shared tensor
        fragment = t2.get_loop_domain()
        run("T2.set_loop_domain(logical)", t2.set_loop_domain, logical)
        _smem_layout(draw, Axes(t2, ["R", "C"], run), steps)
        run("T2.set_allocation_domain(loop)", t2.set_allocation_domain, t2.get_loop_domain(), True)
        run("T2.set_loop_domain(fragment)", t2.set_loop_domain, fragment)
    else:
        _smem_layout(draw, Axes(t1, ["R", "C"], run), steps)
    if sometimes(draw, 8):  # another tensor sets a larger blockDim.x
        width = draw(st.sampled_from([16, 48, 64, 96]))
        run(f"T3.merge(0, 1).split(0, {width})", lambda: t3.merge(0, 1).split(0, width))
        run("T3.axis(1).parallelize(TIDx)", t3.axis(1).parallelize, P.TIDx)
    threads = 1
    for e in thread_dims(fusion):
        threads *= ext(e)
    points = threads
    for i in t2.loop:
        if i.parallel_type not in THREAD_TYPES:
            points *= ext(block_dims(fusion)[i.parallel_type]) if i.parallel_type in BLOCK_TYPES else ext(i.extent_expr)
    assume(points <= MAX_POINTS)
    return Case(kind, fusion, steps)


# -- the test ------------------------------------------------------------------------------------------

CASES: Counter = Counter()
VIOLATED: Counter = Counter()
# the parts of LDSM-THREAD-ROWS, told apart by the oracle's witness text
THREAD_ROWS_PARTS = {"shape": ("memory types", "-byte elements", "elements per thread"),
                     "whole warps": ("does not execute",), "rows": ("expected",)}
DISAGREEMENTS: list[str] = []


def test_ldsm_differential(capsys):
    start = time.perf_counter()
    config = settings(max_examples=max(1, int(EXAMPLES * SCALE)), deadline=None, derandomize=SEED is None,
                      database=None, suppress_health_check=list(HealthCheck), print_blob=False)

    def check(case):
        want = oracle(case.fusion)
        report = tp.verify(case.fusion, TARGET, rules=list(CODES))
        got = set(report.codes)
        CASES[case.family] += 1
        CASES["all"] += 1
        b32 = case.family == "ldmatrix" and case.fusion.inputs[0].dtype.bytes == 4
        CASES["32-bit"] += b32
        for c in CODES:
            VIOLATED[c] += bool(want[c])
            VIOLATED[f"32-bit {c}"] += b32 and bool(want[c])
        VIOLATED["32-bit none"] += b32 and not any(want.values())
        VIOLATED["none"] += not any(want.values())
        for part, words in THREAD_ROWS_PARTS.items():
            VIOLATED[part] += any(w in text for text in want["LDSM-THREAD-ROWS"] for w in words)
        bad = [c for c in CODES if bool(want[c]) != (c in got)]
        if not bad:
            return
        lines = [f"z3 and brute force disagree on {', '.join(bad)}", repr(case), describe(case.fusion)]
        for c in bad:
            lines.append(f"  {c}: brute force says {'VIOLATED' if want[c] else 'holds'} {want[c][:2]}; "
                         f"z3 says {'VIOLATED' if c in got else 'holds'}")
        for d in report.diagnostics:
            lines.append(f"    [{d.code}] {d.message}\n        {d.counterexample}")
        DISAGREEMENTS.append("\n".join(lines))
        raise AssertionError(DISAGREEMENTS[-1])

    test = given(ldsm_cases())(check)
    if SEED is not None:
        test = seed(int(SEED))(test)
    config(test)()
    seconds = time.perf_counter() - start
    n = CASES["all"]
    with capsys.disabled():
        per = ", ".join(f"{c} {VIOLATED[c]}/{n}" for c in CODES)
        print(f"\nldmatrix/stmatrix differential ({TARGET}): {n} cases ({CASES['ldmatrix']} ldmatrix, "
              f"{CASES['stmatrix']} stmatrix; {CASES['32-bit']} 32-bit ldmatrix, all hold in "
              f"{VIOLATED['32-bit none']}) in {seconds:.1f}s, {len(DISAGREEMENTS)} disagreeing; "
              f"violated: {per}; all hold in {VIOLATED['none']}/{n}; LDSM-THREAD-ROWS by part: "
              + ", ".join(f"{part} {VIOLATED[part]}" for part in THREAD_ROWS_PARTS))
    assert not DISAGREEMENTS
    if SCALE >= 1:
        assert n >= 200, f"only {n} cases compared"
        for c in CODES:  # both verdicts of every rule
            assert 0.08 * n <= VIOLATED[c] <= 0.85 * n, f"unbalanced population for {c}: {VIOLATED} of {n}"
        assert VIOLATED["none"] >= 0.1 * n, f"too few cases pass every rule: {VIOLATED} of {n}"
        for part in THREAD_ROWS_PARTS:
            assert VIOLATED[part] >= 0.05 * n, f"too few cases violate the {part} part: {VIOLATED} of {n}"
        # 32-bit ldmatrix (float32): both verdicts of every rule
        assert VIOLATED["32-bit none"] >= 0.02 * n, f"too few 32-bit ldmatrix cases pass: {VIOLATED} of {n}"
        for c in CODES:
            assert VIOLATED[f"32-bit {c}"] >= 0.01 * n, f"too few 32-bit ldmatrix cases violate {c}: {VIOLATED} of {n}"
