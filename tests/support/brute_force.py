"""The brute-force oracle of the differential soundness test.

Each function decides one verifier rule on a fusion with concrete extents by
enumerating every thread, loop index and register index. It uses the model's
index maps (`execution/indexing.py`) and allocation (`execution/allocation.py`), which
are shared with the verifier by design, but it implements the rule logic itself
and never imports `tileproof.verifier`.

Enumeration is done on numpy index grids: one grid axis per thread dimension,
per non-thread loop ID and per vectorized loop ID, so a rule with ~20k points
costs a few milliseconds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tileproof.execution.allocation import compute_allocation
from tileproof.model.expr import Expr
from tileproof.execution.indexing import (
    block_dims, executed_tensors, indices_from_logical, indices_from_loop, loop_var, producer_logical, thread_dims,
    valid_item_bounds,
)
from tileproof.model.iterdomain import Split, Swizzle
from tileproof.model.types import BLOCK_TYPES, THREAD_TYPES, MemoryType, ParallelType

TMEM_LANES = 128
TMEM_COLUMNS = 512
CELL_BYTES = 4  # a tensor-memory column: 32 bits
MAX_THREADS = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)  # blockDim.x, .y, .z (CUDA C++ Programming Guide, compute capabilities)
WARP = 32
SUBPARTITIONS = 4

PATTERNS = ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")


@dataclass
class Verdict:
    """One rule's brute-force verdict: violated, and the first witness found."""

    code: str
    violated: bool = False
    witness: list[str] = field(default_factory=list)

    def fail(self, text: str) -> None:
        self.violated = True
        if len(self.witness) < 3:
            self.witness.append(text)


def _int(e: Expr, what: str) -> int:
    if e.free_vars():
        raise ValueError(f"brute force needs concrete extents; {what} = {e}")
    from tileproof.model.expr import evaluate

    return evaluate(e, {})


def ext(i) -> int:
    return _int(i.extent_expr, i.label())


# -- numpy evaluation of the index algebra ----------------------------------------

def np_eval(e: Expr, env: dict[str, Any]):
    """Evaluate an Expr on numpy int64 arrays (floor semantics on non-negative values)."""
    op = e.op
    if op == "const":
        return np.int64(e.value)
    if op == "var":
        try:
            return env[e.value]
        except KeyError:
            raise KeyError(f"no value for variable {e.value!r}") from None
    a = [np_eval(x, env) for x in e.args]
    if op == "add":
        out = a[0]
        for x in a[1:]:
            out = out + x
        return out
    if op == "mul":
        out = a[0]
        for x in a[1:]:
            out = out * x
        return out
    if op == "floordiv":
        return a[0] // a[1]
    if op == "ceildiv":
        return -(-a[0] // a[1])
    if op == "mod":
        return a[0] % a[1]
    if op == "xor":
        return np.bitwise_xor(a[0], a[1])
    if op == "max":
        out = a[0]
        for x in a[1:]:
            out = np.maximum(out, x)
        return out
    raise ValueError(f"unknown op {op}")


# -- SWIZZLE-BIJECTIVITY ------------------------------------------------------------

def _transforms(fusion, kind):
    seen = set()
    for tv in fusion.tensors:
        for t in tv.history:
            if isinstance(t, kind) and id(t) not in seen:
                seen.add(id(t))
                yield tv, t


def swizzle_bijectivity(fusion) -> Verdict:
    v = Verdict("SWIZZLE-BIJECTIVITY")
    for tv, t in _transforms(fusion, Swizzle):
        X, Y = ext(t.x_in), ext(t.y_in)
        for x in range(X):
            bad = [y for y in range(Y) if (x ^ y) >= Y]
            if bad:
                v.fail(f"{tv.name}: {t}: x={x}, y={bad[0]}, x^y={x ^ bad[0]} >= Y={Y}")
                break
    return v


# -- SPLIT-DIVISIBILITY ---------------------------------------------------------------

def _ancestor_splits(tv, i):
    """Splits on the definition chain of loop ID i inside tv's history."""
    out, stack, hist = [], [i], {id(t) for t in tv.history}
    while stack:
        node = stack.pop()
        t = node.definition
        if t is None or id(t) not in hist:
            continue
        if isinstance(t, Split):
            out.append(t)
        stack.extend(t.inputs)
    return out


def required_splits(fusion) -> list[tuple[str, Split, str]]:
    req: dict[int, tuple[str, Split, str]] = {}
    for tv in executed_tensors(fusion):
        for i in tv.loop:
            if i.parallel_type is ParallelType.Vectorize:
                for s in _ancestor_splits(tv, i):
                    req.setdefault(id(s), (tv.name, s, f"ancestor of vectorized {i.label()}"))
    for tv in fusion.tensors:
        if tv.memory_type is MemoryType.Tensor:
            for t in tv.history:
                if isinstance(t, Split):
                    req.setdefault(id(t), (tv.name, t, "tensor-memory tensor"))
    for op in fusion.exprs:
        if any(x.memory_type is MemoryType.Tensor for x in op.inputs):
            for t in op.output.history:
                if isinstance(t, Split):
                    req.setdefault(id(t), (op.output.name, t, "reads tensor memory"))
    return list(req.values())


def split_divisibility(fusion) -> Verdict:
    v = Verdict("SPLIT-DIVISIBILITY")
    for name, s, why in required_splits(fusion):
        n = ext(s.in_)
        f = _int(s.factor, "split factor")
        inner = f if s.inner_split else -(-n // f)
        if n % inner and not _holes_safe(fusion, name, why):
            v.fail(f"{name}: {s} ({why}): {n} % {inner} = {n % inner}")
    return v


def _holes_safe(fusion, name: str, why: str) -> bool:
    """A tensor-memory split's holes run in the tcgen05 access `name` issues (the store into a
    tensor-memory tensor, the load into a reader): allowed where that access is hole-safe."""
    kind = {"tensor-memory tensor": "store", "reads tensor memory": "load"}.get(why)
    found = [a for a in tmem_accesses(fusion) if a.kind == kind and a.issuer.name == name]
    return bool(found) and all(analyze_access(fusion, a).holes_safe for a in found)


# -- LAUNCH-THREADS -----------------------------------------------------------------------

def launch_threads(fusion) -> Verdict:
    v = Verdict("LAUNCH-THREADS")
    bd = [_int(e, "blockDim") for e in thread_dims(fusion)]
    if bd[0] * bd[1] * bd[2] > MAX_THREADS:
        v.fail(f"blockDim {bd} = {bd[0] * bd[1] * bd[2]} threads > {MAX_THREADS}")
    for axis, n, limit in zip("xyz", bd, MAX_BLOCK_DIMS):
        if n > limit:
            v.fail(f"blockDim.{axis} = {n} > {limit}")
    return v


# -- TMEM-LANES / TMEM-COLUMNS ----------------------------------------------------------

def tmem_tensors(fusion):
    return [t for t in fusion.tensors if t.memory_type is MemoryType.Tensor and not t.is_fusion_input]


def tmem_lanes_of(t) -> int:
    lanes = 1
    for x in compute_allocation(t).allocated("lane"):
        lanes *= ext(x.id)
    return lanes


def tmem_lanes(fusion) -> Verdict:
    v = Verdict("TMEM-LANES")
    for t in tmem_tensors(fusion):
        lanes = tmem_lanes_of(t)
        if lanes > TMEM_LANES:
            v.fail(f"{t.name}: {lanes} lanes > {TMEM_LANES}")
    return v


def tmem_columns(fusion) -> Verdict:
    v = Verdict("TMEM-COLUMNS")
    for t in tmem_tensors(fusion):
        a = compute_allocation(t)
        elems = 1
        for x in a.allocated("column"):
            elems *= ext(x.id)
        cols = -(-elems * t.dtype.bytes // 4)
        if cols > TMEM_COLUMNS:
            v.fail(f"{t.name}: {cols} columns > {TMEM_COLUMNS}")
    return v


# -- tensor-memory accesses ------------------------------------------------------------------

@dataclass
class Access:
    op: Any
    kind: str  # "store" / "load"
    tmem: Any  # M
    issuer: Any  # C
    input_index: int

    def __str__(self) -> str:
        return f"{self.kind} {self.op} (issued by {self.issuer.name}, tmem {self.tmem.name})"


def tmem_accesses(fusion) -> list[Access]:
    out = []
    for op in fusion.exprs:
        if op.output.memory_type is MemoryType.Tensor:
            out.append(Access(op, "store", op.output, op.output, -1))
        for k, t in enumerate(op.inputs):
            if t.memory_type is MemoryType.Tensor:
                out.append(Access(op, "load", t, op.output, k))
    return out


def pattern_offsets(p: str, l, v, regs: int):
    """(dl, dc) of lane-in-warp l and register v for pattern p, `regs` registers per thread."""
    if p == "32x32b":
        return l + 0 * v, v + 0 * l
    if p == "16x64b":
        return l // 4 + 8 * (l % 2) + 0 * v, 2 * v + (l // 2) % 2
    if p == "16x128b":
        return l // 4 + 8 * (v % 2), 4 * (v // 2) + l % 4
    if p == "16x256b":
        return l // 4 + 8 * ((v // 2) % 2), 8 * (v // 4) + 2 * (l % 4) + v % 2
    if p == "16x32bx2":
        return l % 16 + 0 * v, v + np.where(l >= 16, regs, 0)
    raise ValueError(p)


@dataclass
class AccessResult:
    access: Access
    warp_collective: bool
    pattern: str | None  # the first pattern that holds (None: none)
    subpartition: bool
    vector_ok: bool
    packed: bool  # whole 32-bit registers per thread and instruction
    V: int
    witness: dict[str, str] = field(default_factory=dict)
    holes_safe: bool = False  # run at every active point, it touches only its own cells (SPLIT-DIVISIBILITY)


def analyze_access(fusion, acc: Access) -> AccessResult:
    C, M = acc.issuer, acc.tmem
    bdx, bdy, bdz = (_int(e, "blockDim") for e in thread_dims(fusion))
    B = bdx * bdy * bdz

    # grid axes: threads (tz, ty, tx), then non-thread non-vector loop vars, then vector IDs
    serial_vars: dict[str, int] = {}
    vec_ids = []
    for i in C.loop:
        p = i.parallel_type
        if p in THREAD_TYPES:
            continue
        if p is ParallelType.Vectorize:
            vec_ids.append(i)
            continue
        name = loop_var(C, i).value
        e = ext(i)
        serial_vars[name] = min(e, serial_vars.get(name, e))
    V = 1
    for i in vec_ids:
        V *= ext(i)
    S = 1
    for e in serial_vars.values():
        S *= e

    shape = [bdz, bdy, bdx] + list(serial_vars.values()) + [ext(i) for i in vec_ids]
    n_axes = len(shape)

    def axis(k):
        s = [1] * n_axes
        s[k] = shape[k]
        return np.arange(shape[k], dtype=np.int64).reshape(s)

    env: dict[str, Any] = {"threadIdx.z": axis(0), "threadIdx.y": axis(1), "threadIdx.x": axis(2)}
    for k, name in enumerate(serial_vars):
        env[name] = axis(3 + k)
    for k, i in enumerate(vec_ids):
        env[loop_var(C, i).value] = axis(3 + len(serial_vars) + k)

    full = tuple(shape)

    def grid(x):
        return np.broadcast_to(np.asarray(x, dtype=np.int64), full).reshape(B, S, V)

    # active threads: a thread index beyond its axis' extent does nothing; a broadcast axis holds
    # one value that every thread along it computes alike (the kernel does not predicate it)
    active_g = np.ones((bdz, bdy, bdx), dtype=bool)
    tvar = {ParallelType.TIDz: 0, ParallelType.TIDy: 1, ParallelType.TIDx: 2}
    for i in C.loop:
        if i.parallel_type in THREAD_TYPES and not i.is_broadcast:
            k = tvar[i.parallel_type]
            s = [1, 1, 1]
            s[k] = shape[k]
            active_g = active_g & (np.arange(shape[k]).reshape(s) < ext(i))
    active = active_g.reshape(B)

    # indices of C, then of M
    idx_c = indices_from_loop(C)
    if acc.kind == "store":
        idx_m = idx_c
    else:
        idx_m = indices_from_logical(M, producer_logical(acc.op, acc.input_index, idx_c))
    alloc = compute_allocation(M)

    def side_expr(side):
        strides = alloc.strides(side)
        total = np.int64(0)
        for a in alloc.allocated(side):
            uid = a.id.uid
            if uid not in idx_m:
                raise KeyError(f"{M.name}: no index for allocated {a.id.label()}")
            total = total + np_eval(idx_m[uid], env) * np_eval(strides[uid], {})
        return grid(total)

    lane = side_expr("lane")
    col = side_expr("column")

    valid = np.ones(full, dtype=bool)
    for b in valid_item_bounds(C, idx_c):
        valid = valid & (np_eval(b.value, env) < ext(b.id))
    valid = np.broadcast_to(valid, full).reshape(B, S, V)

    t = np.arange(B)
    w = t // WARP
    lw = t % WARP
    res = AccessResult(acc, True, None, True, True, True, V)
    must = active[:, None, None] & valid
    size = M.dtype.bytes  # an element's bytes: element c of a lane is its bytes c*size .. c*size + size - 1

    # TMEM-PACKING: a thread moves whole 32-bit registers per instruction
    if (V * size) % CELL_BYTES and must[:, :, 0].any():
        res.packed = False
        bt, bs = (int(x[0]) for x in np.nonzero(must[:, :, 0]))
        res.witness["TMEM-PACKING"] = f"{acc}: t={bt} s={bs} moves V={V} x {size} bytes = {V * size} bytes"

    # TMEM-VECTORIZE (whole registers only: a partial one is TMEM-PACKING's)
    if vec_ids and res.packed:
        regs = V * size // CELL_BYTES
        if not (1 <= regs <= 128) or regs & (regs - 1):
            res.vector_ok = False
            res.witness["TMEM-VECTORIZE"] = f"{acc}: vectorized {[i.label() for i in vec_ids]} V={V} ({regs} registers)"

    # TMEM-WARP-COLLECTIVE
    for wi in sorted(set(w[active].tolist())):
        for tp_ in range(WARP * wi, WARP * wi + WARP):
            if tp_ >= B or not active[tp_]:
                res.warp_collective = False
                first = int(t[active & (w == wi)][0])
                why = f"t'={tp_} >= B={B}" if tp_ >= B else f"t'={tp_} is not active"
                res.witness["TMEM-WARP-COLLECTIVE"] = (
                    f"{acc}: blockDim=({bdx},{bdy},{bdz}), active thread t={first} in warp {wi}: {why}")
                break
        if not res.warp_collective:
            break
    if not res.warp_collective or not res.packed:
        return res

    # TMEM-ACCESS-PATTERN: register r of thread l moves the 4 bytes of cell base + offset_p(l, r); the
    # registers hold the thread's elements back to back (element v from byte v*size), so element v's
    # word h (64-bit elements have two) is register (v*size)/4 + h, from byte (v*size) % 4
    regs = V * size // CELL_BYTES
    base = WARP * w
    base_lane = lane[base, :, 0][:, :, None]  # [B, S, 1]
    base_byte = col[base, :, 0][:, :, None] * size
    vv = np.arange(V).reshape(1, 1, V)
    ll = lw.reshape(B, 1, 1)
    fails = []
    for p in PATTERNS:
        if regs % {"16x128b": 2, "16x256b": 4}.get(p, 1):
            fails.append(f"{p}: {regs} registers not allowed")
            continue
        ok = (base_byte % CELL_BYTES == 0)
        for h in range(max(1, size // CELL_BYTES)):
            reg = vv * size // CELL_BYTES + h
            dl, dc = pattern_offsets(p, ll, reg, regs)
            want_byte = CELL_BYTES * (base_byte // CELL_BYTES + dc) + vv * size % CELL_BYTES
            ok = ok & (lane == base_lane + dl) & (col * size + CELL_BYTES * h == want_byte)
        bad = must & ~ok
        if not bad.any():
            res.pattern = p
            break
        bt, bs, bv = (int(x[0]) for x in np.nonzero(bad))
        fails.append(f"{p}: t={bt} s={bs} v={bv}: (lane, byte)=({int(lane[bt, bs, bv])}, {int(col[bt, bs, bv]) * size}), "
                     f"warp base (lane, byte) ({int(base_lane[bt, bs, 0])}, {int(base_byte[bt, bs, 0])})")
    if res.pattern is None:
        res.witness["TMEM-ACCESS-PATTERN"] = f"{acc}: no pattern holds; " + "; ".join(fails)
        return res

    # SPLIT-DIVISIBILITY's holes: the cells the instruction moves at every active point (its warp's
    # base + the pattern's offset) lie in the warp's sub-partition and the tensor's allocated columns,
    # and a store's cells at holes are no valid element's in the same block and iteration left of
    # the compute-at position
    columns = alloc.columns_allocated
    instance = [k for k, i in enumerate(C.loop) if i.parallel_type in BLOCK_TYPES
                or (k < C.compute_at and i.parallel_type not in THREAD_TYPES and i.parallel_type is not ParallelType.Vectorize)]
    names = [loop_var(C, C.loop[k]).value for k in instance]
    keys = np.zeros((B, S, V), dtype=np.int64)
    for name in names:
        k = list(serial_vars).index(name)
        keys = keys * shape[3 + k] + grid(env[name])
    safe = columns is not None
    run = np.broadcast_to(active[:, None, None], (B, S, V))
    hole_cells, valid_cells = set(), set()
    for h in range(max(1, size // CELL_BYTES)):
        reg = vv * size // CELL_BYTES + h
        dl, dc = pattern_offsets(res.pattern, ll, reg, regs)
        hw_lane = np.broadcast_to(base_lane + dl, (B, S, V))
        hw_word = np.broadcast_to(base_byte // CELL_BYTES + dc, (B, S, V))
        safe = safe and bool(((hw_lane // WARP == (w % SUBPARTITIONS)[:, None, None]) & (hw_word < (columns or 0)))[run].all())
        if acc.kind == "store":
            hole = run & ~valid
            hole_cells |= set(zip(keys[hole].tolist(), hw_lane[hole].tolist(), hw_word[hole].tolist()))
            word = (col * size + CELL_BYTES * h) // CELL_BYTES
            valid_cells |= set(zip(keys[must].tolist(), lane[must].tolist(), word[must].tolist()))
    res.holes_safe = safe and not hole_cells & valid_cells

    # TMEM-SUBPARTITION
    bad = must & ((lane // WARP) != (w % SUBPARTITIONS)[:, None, None])
    if bad.any():
        res.subpartition = False
        bt, bs, bv = (int(x[0]) for x in np.nonzero(bad))
        res.witness["TMEM-SUBPARTITION"] = (
            f"{acc} (pattern {res.pattern}): t={bt} (warp {bt // WARP}) s={bs} v={bv} reaches lane "
            f"{int(lane[bt, bs, bv])} (subpartition {int(lane[bt, bs, bv]) // WARP}), allowed {(bt // WARP) % 4}")
    return res


def tmem_access_rules(fusion) -> dict[str, Verdict]:
    out = {c: Verdict(c) for c in ACCESS_CODES}
    for acc in tmem_accesses(fusion):
        r = analyze_access(fusion, acc)
        if not r.packed:
            out["TMEM-PACKING"].fail(r.witness["TMEM-PACKING"])
        if not r.vector_ok:
            out["TMEM-VECTORIZE"].fail(r.witness["TMEM-VECTORIZE"])
        if not r.warp_collective:
            out["TMEM-WARP-COLLECTIVE"].fail(r.witness["TMEM-WARP-COLLECTIVE"])
        elif not r.packed:
            pass  # the pattern and sub-partitions are proved for whole registers only
        elif r.pattern is None:
            out["TMEM-ACCESS-PATTERN"].fail(r.witness["TMEM-ACCESS-PATTERN"])
        elif not r.subpartition and not tmem_lanes_of(acc.tmem) > TMEM_LANES:
            # a tensor over 128 lanes is reported by TMEM-LANES, not again here (rule docstring)
            out["TMEM-SUBPARTITION"].fail(r.witness["TMEM-SUBPARTITION"])
    return out


# -- SMEM-BLOCK-VISIBILITY -----------------------------------------------------------------

def kernel_points(tv, launch: dict):
    """Every (block, thread, loop point) at which the generated kernel runs tv's statement,
    spelled out from the CUDA semantics: blocks and threads over the launch; a thread/block
    index above the axis' extent does nothing (a broadcast axis has no bound); an extent-1
    axis has index 0; holes are skipped; a shared store by thread 0 of every launched thread
    dimension that no non-broadcast axis of tv parallelizes, a global store also by block 0."""
    from tileproof.model.expr import evaluate

    own = {i.parallel_type for i in tv.loop if not i.is_broadcast}
    single = ([p for p in THREAD_TYPES if p in launch and p not in own]
              if tv.memory_type in (MemoryType.Shared, MemoryType.Global) else [])
    single += [p for p in BLOCK_TYPES if p in launch and p not in own] if tv.memory_type is MemoryType.Global else []
    launched = [p for p in THREAD_TYPES + BLOCK_TYPES if p in launch]
    idx = indices_from_loop(tv)
    names = [loop_var(tv, i).value for i in tv.loop]
    bounds = valid_item_bounds(tv, idx)
    for ids in itertools.product(*(range(launch[p]) for p in launched)):
        where = dict(zip(launched, ids))
        if any(where[p] for p in single):
            continue
        axes = []
        for i in tv.loop:
            p, n = i.parallel_type, ext(i)
            if p in where:
                if i.is_broadcast:
                    axes.append([0 if n == 1 else where[p]])
                elif where[p] >= n:
                    break
                else:
                    axes.append([where[p]])
            elif n == 1:
                axes.append([0])
            else:
                axes.append(range(n))
        else:
            for point in itertools.product(*axes):
                env = dict(zip(names, point))
                env.update({p.cuda_name: where.get(p, 0) for p in THREAD_TYPES + BLOCK_TYPES})
                if all(evaluate(b.value, env) < ext(b.id) for b in bounds):
                    yield where, env, idx


def onchip_visibility(fusion) -> dict[str, Verdict]:
    """Simulates each on-chip producer's memory: every block (for registers, every thread of
    it) holds what its points stored, address by address (allocation strides); every point
    of a consumer must find the element it reads at the address it reads, in its own block
    (SMEM-BLOCK-VISIBILITY) and, for registers, its own thread (THREAD-VISIBILITY). Tensor
    memory is checked per block only (its lanes and columns are the tensor-memory rules')."""
    from tileproof.model.expr import evaluate
    from tileproof.model.types import LoadStoreOpType

    out = {"SMEM-BLOCK-VISIBILITY": Verdict("SMEM-BLOCK-VISIBILITY"), "THREAD-VISIBILITY": Verdict("THREAD-VISIBILITY")}
    launch = {p: _int(e, str(p)) for p, e in block_dims(fusion).items()}
    for op in fusion.exprs:
        for k, prod in enumerate(op.inputs):
            if prod.memory_type is MemoryType.Global or prod.definition is None:
                continue
            local = prod.memory_type is MemoryType.Local
            strides = compute_allocation(prod).strides()
            axes = [j for j, i in enumerate(prod.logical) if not i.is_broadcast]
            in_block: dict = {}
            at: dict = {}
            for where, env, idx in kernel_points(prod, launch):
                block = tuple(where.get(p, 0) for p in BLOCK_TYPES)
                thread = tuple(where.get(p, 0) for p in THREAD_TYPES)
                e = tuple(evaluate(idx[prod.logical[j].uid], env) for j in axes)
                addr = sum(evaluate(idx[u], env) * evaluate(st, {}) for u, st in strides.items())
                in_block.setdefault(block, set()).add(e)
                key = (block, thread if local else None, None if prod.memory_type is MemoryType.Tensor else addr)
                at.setdefault(key, set()).add(e)
            exempt = op.op_type is LoadStoreOpType.StMatrix  # its lanes are LDSM-REGISTER-LAYOUT's
            crossed, misplaced = [], []
            for where, env, idx in kernel_points(op.output, launch):
                block = tuple(where.get(p, 0) for p in BLOCK_TYPES)
                thread = tuple(where.get(p, 0) for p in THREAD_TYPES)
                pidx = indices_from_logical(prod, producer_logical(op, k, idx))
                read = [evaluate(x, env) for x in producer_logical(op, k, idx)]
                e = tuple(read[j] for j in axes)
                addr = sum(evaluate(pidx[u], env) * evaluate(st, {}) for u, st in strides.items())
                text = (f"{op}: block {block} thread {thread} reads {prod.name}{list(e)} at offset {addr} ({env})")
                if e not in in_block.get(block, set()) or (not local and not exempt and e not in at.get(
                        (block, None, None if prod.memory_type is MemoryType.Tensor else addr), set())):
                    crossed.append(text + ", which its block did not store there")
                elif local and not exempt and e not in at.get((block, thread, addr), set()):
                    misplaced.append(text + ", which its thread did not store there")
            if crossed:
                out["SMEM-BLOCK-VISIBILITY"].fail(crossed[0])
            elif misplaced:  # reported only where the blocks agree (the root cause first)
                out["THREAD-VISIBILITY"].fail(misplaced[0])
    return out


def smem_block_visibility(fusion) -> Verdict:
    return onchip_visibility(fusion)["SMEM-BLOCK-VISIBILITY"]


def thread_visibility(fusion) -> Verdict:
    return onchip_visibility(fusion)["THREAD-VISIBILITY"]


ORACLES = {
    "SWIZZLE-BIJECTIVITY": swizzle_bijectivity,
    "SPLIT-DIVISIBILITY": split_divisibility,
    "LAUNCH-THREADS": launch_threads,
    "TMEM-LANES": tmem_lanes,
    "TMEM-COLUMNS": tmem_columns,
    "SMEM-BLOCK-VISIBILITY": smem_block_visibility,
    "THREAD-VISIBILITY": thread_visibility,
}
ACCESS_CODES = ("TMEM-WARP-COLLECTIVE", "TMEM-PACKING", "TMEM-ACCESS-PATTERN", "TMEM-SUBPARTITION", "TMEM-VECTORIZE")


def oracle(fusion, codes) -> dict[str, Verdict]:
    """code -> brute-force verdict for each requested rule code."""
    out = {c: ORACLES[c](fusion) for c in codes if c in ORACLES}
    if any(c in ACCESS_CODES for c in codes):
        acc = tmem_access_rules(fusion)
        out.update({c: acc[c] for c in codes if c in ACCESS_CODES})
    return out


def describe(fusion) -> str:
    """The schedule: every tensor's memory, loop domain, allocation, compute-at and history."""
    lines = [f"fusion {fusion.name}:"]
    for op in fusion.exprs:
        lines.append(f"  op {op}")
    bd = thread_dims(fusion)
    lines.append(f"  blockDim = ({', '.join(str(e) for e in bd)})")
    for tv in fusion.tensors:
        lines.append(f"  {tv.name} [{tv.memory_type}] logical={[i.label() for i in tv.logical]} "
                     f"loop={[i.label() + '#' + i.name for i in tv.loop]} ca={tv.compute_at}")
        if tv.allocation is not None:
            lines.append(f"      allocation={[i.name for i in tv.allocation]}")
        if tv.memory_type is MemoryType.Tensor:
            a = compute_allocation(tv)
            lines.append(f"      dimsep={tv.tmem_dim_sep} lane={[x.id.label() for x in a.allocated('lane')]} "
                         f"column={[x.id.label() for x in a.allocated('column')]}")
        for t in tv.history:
            ids = ", ".join(o.name for o in t.outputs)
            lines.append(f"      {t}  [{', '.join(x.name for x in t.inputs)} -> {ids}]")
    return "\n".join(lines)
