"""A CPU simulator of lowered kernels that use tensor memory, for tests without a Blackwell GPU.

It runs the kernel IR (codegen/ir.py) block by block, all threads of a block in lockstep
(IndexNames and WholeTile as reduction_sim.py runs them), statement by statement, on numpy
buffers, with the hardware's tcgen05 semantics written out here from the PTX ISA (9.7.16.1.1
addresses, 9.7.16.8 data-path shapes), independently of hw/tcgen05.py:

  - alloc hands out `columns` columns from an arbitrary first column (BASE_COLUMN), all lanes;
  - ld/st take the warp's address (taddr = lane << 16 | column, the same in all 32 threads:
    checked), and register r of thread t moves the 4 bytes of cell taddr + offset(shape, t, r)
    (the table), register bit 8k + j being bit j of the column's byte k;
  - tensor memory holds bytes: an element is stored as its dtype's bytes (little-endian), where
    the lowering's TmemElement.register and .byte put it in the thread's registers, and read
    back from there (a register byte no element fills is undefined: NaN when read);
  - warp w may touch only lanes 32*(w%4)..32*(w%4)+31 (checked), inside the allocation (checked);
  - the instruction is executed by all 32 threads of a warp or by none (checked).

Only what the tensor-memory examples need is simulated: copies (set, transpose, broadcast)
and their vector forms; anything else raises NotImplementedError.
"""

from __future__ import annotations

import itertools

import numpy as np

from tileproof.codegen.ir import (BLOCK_DIMS, GRID_DIMS, Compute, IndexNames, Loop, LoopKind, Sync, TmemAccess, TmemAlloc,
                                  TmemDealloc, WholeTile)
from tileproof.codegen.runtime.arrays import from_raw, to_raw
from tileproof.model.expr import evaluate
from tileproof.model.types import Direction

LANES, COLUMNS, WARP, CELL_BYTES = 128, 512, 32, 4
BASE_COLUMN = 64  # where the simulated tcgen05.alloc puts the allocation (any column would do)
THREAD_VARS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_VARS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def hardware_cell(shape: str, t: int, r: int, regs: int) -> tuple[int, int]:
    """(lane, column) of register r of thread t (0..31) relative to the warp's address
    (PTX ISA 9.7.16.8 data-path layouts; 16x32bx2 with immHalfSplitoff = the register count)."""
    if shape == "32x32b":
        return t, r
    if shape == "16x64b":
        return t // 4 + 8 * (t % 2), 2 * r + (t // 2) % 2
    if shape == "16x128b":
        j, h = r // 2, r % 2
        return t // 4 + 8 * h, 4 * j + t % 4
    if shape == "16x256b":
        j, h, e = r // 4, (r // 2) % 2, r % 2
        return t // 4 + 8 * h, 8 * j + 2 * (t % 4) + e
    if shape == "16x32bx2":
        return t % 16, r + (regs if t >= 16 else 0)
    raise ValueError(shape)


class SimulationError(AssertionError):
    pass


class Simulator:
    """Runs `ir` on flat numpy buffers: `buffers[name]` for every global tensor."""

    def __init__(self, ir, symbols: dict[str, int] | None = None):
        self.ir = ir
        self.symbols = dict(symbols or {})
        self.algebra = {cpp: alg for alg, cpp in ir.names.items()}  # C++ loop counter -> algebra variable
        self.block = [self._int(e) for e in ir.block]
        self.grid = [self._int(e) for e in ir.grid]
        # blockDim / gridDim (codegen/lower/launch_dims.py): the launch's, as the runtime evaluates them
        self.symbols.update({**dict(zip(BLOCK_DIMS, self.block)), **dict(zip(GRID_DIMS, self.grid))})
        self.tmem_touched: set[tuple[int, int]] = set()
        self._functions: dict = {}

    def _int(self, e) -> int:
        return evaluate(e, self.symbols)

    def ev(self, e, env) -> int:
        f = self._functions.get(e)
        if f is None:
            f = self._functions[e] = compiled(e)
        return f(env)

    def run(self, buffers: dict[str, np.ndarray], blocks=None) -> None:
        self.buffers = buffers
        bx, by, bz = self.block
        self.threads = [dict(zip(THREAD_VARS, (x, y, z))) for z in range(bz) for y in range(by) for x in range(bx)]
        for b in blocks if blocks is not None else itertools.product(*(range(g) for g in self.grid)):
            self.block_env = {**self.symbols, **dict(zip(BLOCK_VARS, b))}
            self.local = [dict() for _ in self.threads]  # per thread: buffer name -> array
            self.index_names = [{} for _ in self.threads]  # per thread: IndexNames' name -> value
            for buf in self.ir.buffers:
                n = self._int(buf.elements)
                for regs in self.local:
                    regs[buf.tensor] = np.full(n, np.nan)
                if buf.memory.value == "Shared":
                    raise NotImplementedError("shared memory is not simulated")
            self.tmem = None
            self.nodes(self.ir.body, {})

    # -- the tree ---------------------------------------------------------------------------
    def nodes(self, nodes: list, loops: dict[str, int]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                if n.kind in (LoopKind.THREAD, LoopKind.BLOCK):
                    self.nodes(n.body, loops)
                else:
                    name = self.algebra.get(n.var, n.var)
                    for v in range(self._int(n.extent)):
                        self.nodes(n.body, {**loops, name: v})
            elif isinstance(n, TmemAlloc):
                assert n.columns in (32, 64, 128, 256, 512), n.columns
                if self.tmem is not None:
                    raise SimulationError("a second tcgen05.alloc in one CTA")
                self.columns = n.columns
                self.tmem = np.zeros((LANES, COLUMNS * CELL_BYTES), dtype=np.uint8)
                self.tmem_defined = np.zeros((LANES, COLUMNS * CELL_BYTES), dtype=bool)
            elif isinstance(n, TmemDealloc):
                assert n.columns == self.columns
                self.tmem = "freed"
            elif isinstance(n, Sync):
                pass  # lockstep: every thread has finished the statements above
            elif isinstance(n, TmemAccess):
                self.tmem_access(n, loops)
            elif isinstance(n, Compute):
                self.compute(n, loops)
            elif isinstance(n, IndexNames):  # each thread's values, as its C++ declares them
                for k, names in enumerate(self.index_names):
                    env = self.env(k, loops)
                    names.update({name: self.ev(value, env) for name, value in n.names})
            elif isinstance(n, WholeTile):
                held = {self.holds(n.guard, self.env(k, loops)) for k in range(len(self.threads))}
                if len(held) != 1:
                    raise SimulationError(f"a block-uniform guard holds in some threads only: {n.guard}")
                self.nodes([n.whole if held.pop() else n.lowered], loops)
            else:
                raise NotImplementedError(type(n).__name__)

    def env(self, k: int, loops: dict[str, int]) -> dict[str, int]:
        return {**self.block_env, **self.threads[k], **self.index_names[k], **loops}

    def holds(self, conds, env) -> bool:
        for c in conds:
            a, b = self.ev(c.lhs, env), self.ev(c.rhs, env)
            if not (a < b if c.op == "<" else a == b):
                return False
        return True

    def array(self, k: int, tensor: str) -> np.ndarray:
        return self.local[k][tensor] if tensor in self.local[k] else self.buffers[tensor]

    def compute(self, s: Compute, loops) -> None:
        if s.kind not in ("load_store", "transpose", "broadcast") or len(s.ins) != 1:
            raise NotImplementedError(f"{s.kind} {s.name}")
        for k in range(len(self.threads)):
            env = self.env(k, loops)
            if not self.holds(s.conds, env):
                continue
            src, dst = self.array(k, s.ins[0].tensor), self.array(k, s.out.tensor)
            i, o = self.ev(s.ins[0].offset, env), self.ev(s.out.offset, env)
            dst[o:o + s.vector] = src[i:i + s.vector]

    # -- tcgen05 ----------------------------------------------------------------------------
    def tmem_access(self, a: TmemAccess, loops) -> None:
        if not isinstance(self.tmem, np.ndarray):
            raise SimulationError(f"{a.instruction} outside the allocation's lifetime")
        regs = a.registers
        assert regs == a.repeat * {"16x128b": 2, "16x256b": 4}.get(str(a.pattern), 1)
        for w in range(0, len(self.threads), WARP):
            warp = range(w, min(w + WARP, len(self.threads)))
            executes = [self.holds(a.conds, self.env(k, loops)) for k in warp]
            if not any(executes):
                continue
            if len(warp) < WARP or not all(executes):
                raise SimulationError(f"{a.instruction} executed by part of warp {w // WARP}: {executes}")
            taddrs = {BASE_COLUMN + self.ev(a.address_offset, self.env(k, loops)) for k in warp}
            if len(taddrs) != 1:
                raise SimulationError(f"warp {w // WARP} gives {a.instruction} {len(taddrs)} different addresses")
            taddr = taddrs.pop()
            lane0, col0 = taddr >> 16, taddr & 0xFFFF
            quarter = 32 * ((w // WARP) % 4)
            for t, k in enumerate(warp):
                env = self.env(k, loops)
                cells = []
                for r in range(regs):
                    dl, dc = hardware_cell(str(a.pattern), t, r, regs)
                    lane, col = lane0 + dl, col0 + dc
                    if not quarter <= lane < quarter + 32:
                        raise SimulationError(f"warp {w // WARP} touches lane {lane} outside its sub-partition")
                    if not BASE_COLUMN <= col < BASE_COLUMN + self.columns:
                        raise SimulationError(f"column {col} is outside the allocation")
                    self.tmem_touched.add((lane, col))
                    cells.append((lane, slice(col * CELL_BYTES, (col + 1) * CELL_BYTES)))
                if a.direction is Direction.STORE:
                    self.store_registers(a, k, env, cells)
                else:
                    self.load_registers(a, k, env, cells)

    def store_registers(self, a: TmemAccess, k: int, env, cells) -> None:
        """Thread k's elements into its registers' bytes (where the lowering packs them), then
        each register into its cell."""
        data = np.zeros(a.registers * CELL_BYTES, dtype=np.uint8)
        defined = np.zeros(a.registers * CELL_BYTES, dtype=bool)
        for el in a.elements:
            if not self.holds(el.data.conds, env):
                continue  # a hole: no register is read, the cell's bytes are undefined (NaN when loaded)
            src = el.data.ins[0]
            raw = element_bytes(self.array(k, src.tensor)[self.ev(src.offset, env)], el.data.out.dtype)
            at = el.register * CELL_BYTES + el.byte
            data[at:at + len(raw)], defined[at:at + len(raw)] = raw, True
        for r, (lane, cols) in enumerate(cells):
            self.tmem[lane, cols] = data[r * CELL_BYTES:(r + 1) * CELL_BYTES]
            self.tmem_defined[lane, cols] = defined[r * CELL_BYTES:(r + 1) * CELL_BYTES]

    def load_registers(self, a: TmemAccess, k: int, env, cells) -> None:
        data = np.concatenate([self.tmem[lane, cols] for lane, cols in cells])
        defined = np.concatenate([self.tmem_defined[lane, cols] for lane, cols in cells])
        for el in a.elements:
            if not self.holds(el.data.conds, env):
                continue
            dtype = el.data.ins[a.tmem_input].dtype
            at = el.register * CELL_BYTES + el.byte
            value = element_value(data[at:at + dtype.bytes], dtype) if defined[at:at + dtype.bytes].all() else np.nan
            self.array(k, el.data.out.tensor)[self.ev(el.data.out.offset, env)] = value


def element_bytes(value: float, dtype) -> np.ndarray:
    """The bytes of one element of dtype holding value, lowest address first."""
    with np.errstate(invalid="ignore"):
        return np.atleast_1d(to_raw(np.array([value]), dtype)).view(np.uint8)


def element_value(raw: np.ndarray, dtype) -> float:
    storage = np.uint16 if dtype.name == "bfloat16" else np.dtype(dtype.name)
    return float(from_raw(np.ascontiguousarray(raw).view(storage), dtype)[0])


def global_view(g, flat: np.ndarray, symbols: dict[str, int]) -> np.ndarray:
    """The logical array over a flat buffer laid out by GlobalTensor g's strides."""
    shape = [evaluate(e, symbols) for e in g.extents]
    strides = [0] * len(shape)
    for axis, s in zip(g.alloc_axes, g.strides):
        strides[axis] = evaluate(s, symbols) * flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, shape=shape, strides=strides)


def run_kernel(kernel_ir, fusion, inputs: list[np.ndarray], symbols=None, blocks=None) -> list[np.ndarray]:
    """Simulate on logical input arrays; returns the logical outputs (NaN where unwritten)."""
    symbols = dict(symbols or {})
    buffers = {}
    for g in kernel_ir.globals:
        size = 1 + sum((evaluate(e, symbols) - 1) * evaluate(s, symbols)
                       for e, s in zip([g.extents[a] for a in g.alloc_axes], g.strides))
        buffers[g.name] = np.full(size, np.nan)
    for t, a in zip(fusion.inputs, inputs):
        g = next(g for g in kernel_ir.globals if g.name == t.name)
        global_view(g, buffers[g.name], symbols)[...] = a
    sim = Simulator(kernel_ir, symbols)
    sim.run(buffers, blocks)
    outs = []
    for t in fusion.outputs:
        g = next(g for g in kernel_ir.globals if g.name == t.name)
        outs.append(np.array(global_view(g, buffers[g.name], symbols)))
    return outs


# -- fast evaluation ------------------------------------------------------------------------

_PY = {"add": " + ", "mul": " * ", "floordiv": " // ", "mod": " % ", "xor": " ^ "}


def compiled(e):
    """e as a Python function of an environment dict, equal to model.expr.evaluate(e, env);
    shared subtrees are computed once (the swizzled examples' indices are large DAGs)."""
    names: dict = {}
    lines = ["def f(env):"]

    def visit(x) -> str:
        if x in names:
            return names[x]
        if x.op == "const":
            return str(x.value)
        if x.op == "var":
            code = f"env[{x.value!r}]"
        else:
            args = [visit(a) for a in x.args]
            if x.op in _PY:
                code = "(" + _PY[x.op].join(args) + ")"
            elif x.op == "ceildiv":
                code = f"(-(-{args[0]} // {args[1]}))"
            elif x.op == "max":
                code = f"max({', '.join(args)})"
            else:
                raise ValueError(x.op)
        names[x] = f"v{len(names)}"
        lines.append(f"    {names[x]} = {code}")
        return names[x]

    result = visit(e)
    lines.append(f"    return {result}")
    scope: dict = {}
    exec("\n".join(lines), scope)  # noqa: S102 - our own expression trees
    return scope["f"]


# -- the emitted addresses against the verifier's model --------------------------------------


def tmem_accesses_in(nodes: list, loops: tuple = ()) -> list[tuple[TmemAccess, tuple]]:
    """Every TmemAccess of a loop tree with its enclosing counted loops (C++ name, extent)."""
    out = []
    for n in nodes:
        if isinstance(n, Loop):
            inner = loops + ((n.var, n.extent),) if n.kind in (LoopKind.SERIAL, LoopKind.UNROLL) else loops
            out += tmem_accesses_in(n.body, inner)
        elif isinstance(n, TmemAccess):
            out.append((n, loops))
    return out


def check_addresses(st, blocks=None, values=lambda extent: range(extent), symbols=None) -> int:
    """For every TmemAccess of a lowering `st`, every block in `blocks` (default: all), thread,
    loop point (`values(extent)` per loop), element and word of it: the cell the instruction
    reaches with the element's register (its address Expr evaluated in that thread, plus the
    hardware table), and the element's byte in that register, are the lane, column and byte
    the verifier's model assigns to that element (verifier.access.build, lanes and columns
    from the allocation strides, an element of b bytes at byte column * b of its lane); the
    instruction's predicate is the model's activity. Raises SimulationError on the first
    difference; returns the (element, word) cells checked."""
    from tileproof.execution.indexing import linear_offset
    from tileproof.model.types import BLOCK_TYPES, THREAD_TYPES, ParallelType
    from tileproof.verifier.access import build
    from tileproof.verifier.context import VerifyContext

    ctx = VerifyContext(st.fusion, st.target)
    ir = st.kernel
    symbols = dict(symbols or {})
    algebra = {cpp: alg for alg, cpp in ir.names.items()}
    dims = [evaluate(e, symbols) for e in ir.block]
    grid = [evaluate(e, symbols) for e in ir.grid]
    checked = 0
    for a, loops in tmem_accesses_in(ir.body):
        acc = next(x for x in ctx.tmem_accesses if x.consumer.name == a.out.tensor)
        m = build(ctx, acc)
        alloc = ctx.allocations[acc.tensor.name]
        lane_e = compiled(linear_offset(alloc.strides("lane"), m.indices))
        col_e = compiled(linear_offset(alloc.strides("column"), m.indices))
        address = compiled(a.address_offset)
        active_e = [(compiled(i), compiled(e)) for i, e in m.active]
        conds = [(compiled(c.lhs), c.op, compiled(c.rhs)) for c in a.conds]
        tv = acc.consumer
        kernel_of = {}  # model variable -> kernel variable (None: the index is 0)
        for k, i in enumerate(tv.loop):
            if i.parallel_type not in THREAD_TYPES + BLOCK_TYPES and i.parallel_type is not ParallelType.Vectorize:
                kernel_of[f"{tv.name}.{i.name}"] = None if i.static_extent == 1 else st.classes.of(tv, k).index_var
        vec = [(f"{tv.name}.{i.name}", i.static_extent) for i in m.vector_ids]
        size = acc.tensor.dtype.bytes
        words = max(1, size // CELL_BYTES)
        regs = a.registers
        names = [algebra.get(v, v) for v, _ in loops]
        ranges = [values(evaluate(e, symbols)) for _, e in loops]
        for b in blocks if blocks is not None else itertools.product(*(range(g) for g in grid)):
            for point in itertools.product(*ranges):
                for tid in range(dims[0] * dims[1] * dims[2]):
                    t = {"threadIdx.x": tid % dims[0], "threadIdx.y": tid // dims[0] % dims[1],
                         "threadIdx.z": tid // (dims[0] * dims[1])}
                    kenv = {**symbols, **dict(zip(BLOCK_VARS, b)), **t, **dict(zip(names, point))}
                    menv = {**symbols, **dict(zip(BLOCK_VARS, b)), **t}
                    menv.update({mv: (kenv[kv] if kv is not None else 0) for mv, kv in kernel_of.items()})
                    active = all(i(menv) < e(menv) for i, e in active_e)
                    executes = all(lhs(kenv) < rhs(kenv) if op == "<" else lhs(kenv) == rhs(kenv)
                                   for lhs, op, rhs in conds)
                    if active != executes:
                        raise SimulationError(f"{a.instruction}: block {b}, thread {tid} executes it: {executes}; "
                                              f"the model's activity: {active}")
                    if not active:
                        continue
                    offset = address(kenv)
                    for el in a.elements:
                        rest, point_v = el.index, {}
                        for name, e in reversed(vec):
                            point_v[name], rest = rest % e, rest // e
                        here = {**menv, **point_v}
                        lane, first_byte = lane_e(here), col_e(here) * size  # the element's bytes in its lane
                        for h in range(words):
                            r = el.register + h
                            dl, dc = hardware_cell(str(a.pattern), tid % WARP, r, regs)
                            got = ((offset >> 16) + dl, (offset & 0xFFFF) + dc - a.column_offset, el.byte)
                            at = first_byte + h * CELL_BYTES
                            want = (lane, at // CELL_BYTES, at % CELL_BYTES)
                            if got != want:
                                raise SimulationError(
                                    f"{a.instruction}: block {b}, thread {tid}, loops {point}, element {el.index} "
                                    f"(register {r}, byte {el.byte}) reaches (lane, column, byte) {got}; the "
                                    f"verified model says {want}")
                            checked += 1
    return checked


__all__ = ["Simulator", "SimulationError", "check_addresses", "hardware_cell", "run_kernel", "tmem_accesses_in"]
