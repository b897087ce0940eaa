"""The CPU simulator of tests/support/reduction_sim.py, extended to tensor-core kernels: MmaIssue
(mma.sync macro tiles), ldmatrix / stmatrix (MatrixCopy), cp.async copies and a circular
buffer's Prologue / Prefetched copies.

MmaIssue, per warp (32 consecutive linear threads; blockDim.x must be 32, so threadIdx.x is the
lane): the instruction is executed by all 32 lanes or by none (its `conds` evaluated in every
lane, checked); each lane's A and B elements are read from the registers the node names (the
Operand offsets evaluated with that lane's thread and loop indices), float32 operands rounded to
tf32 (cvt.rna.tf32.f32: to nearest, ties away from zero, 10 mantissa bits) where the instruction
converts them; a register never written holds garbage, NaN here (a hole of the M or N tile
leaves a lane's registers unwritten: only rows or columns of C that no store reads may depend on
it, so a NaN in an output is a failure); the macro's A (m x k) and B (k x n) tiles are assembled
through the fragment maps, every tile position supplied exactly once (checked); each instruction (K step, N step) adds its
float64 product to the lanes' accumulator registers out.offset + element, rounded to float32.
The fragment maps used are MacroFragments.position, held at every element against the PTX
ISA's own words (tests/support/ptx_fragments.py) plus the macro's step offsets.

cp.async: a copy reads its source when issued (zeros where a zero-fill cond fails) and lands
only when a wait_group completes its group (the thread's uncommitted copies become a group at
each commit; a circular buffer's prologue commits once per iteration). Its data is visible to
the issuing thread then, to the other threads after the next barrier. Reading shared memory a
copy into which is in flight, or that another thread's completed copy wrote with no barrier
since, raises SimulationError, as does a second copy into a location still in flight.
"""

from __future__ import annotations

import numpy as np

from tileproof.codegen.ir import (CpAsyncCommit, CpAsyncCopy, CpAsyncWait, MatrixCopy, MmaIssue, Prefetched, Prologue,
                                  Sync)
from tileproof.codegen.emit.mma import rounds_to_tf32
from tileproof.model.expr import evaluate
from tileproof.model.types import MemoryType

from . import ptx_fragments
from .reduction_sim import WARP, Numbers, SimulationError, Simulator, run_kernel


def tf32(x: float) -> float:
    """x (a float32 value) as cvt.rna.tf32.f32 rounds it: 10 mantissa bits, to nearest, ties
    away from zero (adding half an ulp to the magnitude bits); inf and NaN unchanged."""
    bits = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    if (bits >> 23) & 0xFF == 0xFF:
        return x
    bits = (bits + 0x1000) & 0xFFFFE000
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def tf32_truncated(x: float) -> float:
    """x (a float32 value) as the tensor cores read its unconverted bits: the upper 19 (10
    mantissa bits, toward zero)."""
    bits = int(np.array([x], dtype=np.float32).view(np.uint32)[0]) & 0xFFFFE000
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def ptx_position(frag, role: str, lane: int, sk: int, sn: int, e: int) -> tuple[int, int]:
    """(row, col) in the macro tile of element e of the instruction at K step sk and N step sn, by
    the PTX ISA's fragment (tests/support/ptx_fragments.py) moved by the steps: A (m x k) by sk
    instruction k's of columns, B (k x n) by sk k's of rows and sn n's of columns, C (m x n) by sn
    n's of columns."""
    inst = frag.inst
    row, col = ptx_fragments.mma_sync(inst.input_type, inst.k, role.lower(), lane, e)
    if role == "A":
        return row, col + inst.k * sk
    if role == "B":
        return row + inst.k * sk, col + inst.n * sn
    return row, col + inst.n * sn


def steps(frag, role: str):
    """(sk, sn, e, v) for every element v of role's macro fragment: (K step, N step, element of
    that instruction's operand)."""
    sks = range(frag.k_steps) if role != "C" else [0]
    sns = range(frag.n_steps) if role != "A" else [0]
    for sk in sks:
        for sn in sns:
            for e in range(frag.per_instruction(role)):
                yield sk, sn, e, frag.element(role, sk, sn, e)


class MmaSimulator(Simulator):
    """reduction_sim.Simulator with MmaIssue, cp.async and circular buffers (module docstring).
    Numbers only."""

    def __init__(self, ir, symbols=None, values=Numbers):
        if values is not Numbers:
            raise NotImplementedError("tensor-core kernels are simulated on numbers")
        super().__init__(ir, symbols, values)
        self.mma_issues = 0  # warp-instances of MmaIssue run
        self.copies = 0
        self.garbage = 0  # operand elements read from registers never written (NaN)

    def begin_block(self) -> None:
        self.uncommitted: list[list] = [[] for _ in self.threads]  # per thread: (tensor, at, value)
        self.groups: list[list[list]] = [[] for _ in self.threads]
        self.in_flight: set[tuple[str, int]] = set()
        self.unpublished: dict[tuple[str, int], int] = {}  # landed, visible to this thread only

    def end_block(self) -> None:
        if self.in_flight:
            raise SimulationError(f"{len(self.in_flight)} cp.async copies never waited for, e.g. "
                                  f"{min(self.in_flight)}")

    def nodes(self, nodes: list, loops: dict[str, int]) -> None:
        for n in nodes:
            if isinstance(n, MmaIssue):
                self.mma_issue(n, loops)
            elif isinstance(n, CpAsyncCopy):
                self.cp_async(n, loops)
            elif isinstance(n, CpAsyncWait):
                self.wait(n)
            elif isinstance(n, CpAsyncCommit):
                self.commit()
            elif isinstance(n, Prologue):
                extent = evaluate(n.extent, self.symbols)
                for p in range(max(n.prefetch, 0)):
                    if p < extent:
                        self.nodes(n.body, {**loops, n.index: p})
                    if n.asynchronous:  # a register circular buffer's prologue commits nothing
                        self.commit()
            elif isinstance(n, Prefetched):
                if loops[n.index] + n.prefetch < evaluate(n.extent, self.symbols):
                    self.nodes(n.body, loops)  # the copies' offsets are shifted already
            elif isinstance(n, MatrixCopy):
                self.matrix_copy(n, loops)
            elif isinstance(n, Sync):
                self.unpublished.clear()
                super().nodes([n], loops)
            else:
                super().nodes([n], loops)

    def issuing_warps(self, n, loops, instruction: str):
        """(lanes, their envs) of each warp that issues the warp-collective node `n`: all 32 lanes
        hold its conds or none does (a partial warp raises)."""
        for w in range(0, len(self.threads), WARP):
            lanes = list(range(w, w + WARP))
            envs = [self.env(k, loops) for k in lanes]
            executes = [self.holds(n.conds, env) for env in envs]
            if not any(executes):
                continue
            if not all(executes):
                raise SimulationError(f"{n.comment}: executed by lanes {[t for t, x in enumerate(executes) if x]} "
                                      f"of warp {w // WARP} only ({instruction} is warp-collective)")
            yield lanes, envs

    # -- ldmatrix / stmatrix ----------------------------------------------------------------------
    def matrix_copy(self, n: MatrixCopy, loops) -> None:
        """One ldmatrix / stmatrix per warp, as the PTX ISA defines it: lanes 8i .. 8i + 7 supply
        the byte addresses of rows 0..7 of matrix i (16 bytes each, 16-byte aligned); register i of
        lane t holds row t / 4 of matrix i, its 32-bit column t % 4 (two 16-bit elements, or one
        32-bit element). Executed by all 32 lanes or by none (its guard, checked)."""
        per_reg = 4 // n.regs.dtype.bytes  # elements in one 32-bit register
        for lanes, envs in self.issuing_warps(n, loops, n.instruction):
            rows = {}
            for lane in range(8 * n.num):
                address = self.ev(n.address, envs[lane])
                if address % 16:
                    raise SimulationError(f"{n.comment}: lane {lane} supplies byte {address}, not 16-byte aligned")
                rows[(lane // 8, lane % 8)] = address // n.smem.dtype.bytes
            smem = self.shared[n.smem.tensor]
            for lane, k in enumerate(lanes):
                regs, first = self.array(k, n.regs.tensor), self.ev(n.regs.offset, envs[lane])
                for i in range(n.num):
                    for j in range(per_reg):
                        at, reg = rows[(i, lane // 4)] + (lane % 4) * per_reg + j, first + i * per_reg + j
                        if not (0 <= at < len(smem) and 0 <= reg < len(regs)):
                            raise SimulationError(f"{n.comment}: lane {lane} moves {n.smem.tensor}[{at}] <-> "
                                                  f"{n.regs.tensor}[{reg}], outside a buffer")
                        if n.instruction == "ldmatrix":
                            regs[reg] = self.read(n, k, n.smem, at)
                        else:
                            if regs[reg] is None:
                                raise SimulationError(f"{n.comment}: lane {lane} stores {n.regs.tensor}[{reg}], "
                                                      f"never written")
                            smem[at] = regs[reg]

    # -- cp.async -------------------------------------------------------------------------------
    def cp_async(self, s: CpAsyncCopy, loops) -> None:
        (src,) = s.ins
        for k in range(len(self.threads)):
            env = self.env(k, loops)
            if not self.holds(s.conds, env):
                continue
            filled = not self.holds(s.zero_fill, env)
            dst, first = self.array(k, s.out.tensor), self.ev(s.out.offset, env)
            for v in range(s.vector):
                at = first + v
                if not 0 <= at < len(dst):
                    raise SimulationError(f"{s.comment}: thread {k} copies into {s.out.tensor}[{at}], outside it")
                if (s.out.tensor, at) in self.in_flight:
                    raise SimulationError(f"{s.comment}: thread {k} copies into {s.out.tensor}[{at}] while "
                                          f"an earlier copy into it is in flight")
                if filled:
                    value = 0.0
                else:
                    value = self.read(s, k, src, self.offset(src, env, v))
                self.in_flight.add((s.out.tensor, at))
                self.uncommitted[k].append((s.out.tensor, at, self.values.store(value, s.out.dtype)))
            self.copies += 1

    def commit(self) -> None:
        for k in range(len(self.threads)):
            self.groups[k].append(self.uncommitted[k])
            self.uncommitted[k] = []

    def wait(self, n: CpAsyncWait) -> None:
        if n.commit:
            self.commit()
        for k in range(len(self.threads)):
            groups = self.groups[k]
            done, self.groups[k] = groups[:max(len(groups) - n.pending, 0)], groups[max(len(groups) - n.pending, 0):]
            for group in done:
                for tensor, at, value in group:
                    self.in_flight.discard((tensor, at))
                    self.unpublished[(tensor, at)] = k
                    self.array(k, tensor)[at] = value

    def element(self, s, k: int, env, v: int) -> list:
        for o in s.ins:
            if o.memory is MemoryType.Shared:
                self.check_shared(s, k, o.tensor, self.offset(o, env, v))
        return super().element(s, k, env, v)

    def check_shared(self, s, k: int, tensor: str, at: int) -> None:
        if (tensor, at) in self.in_flight:
            raise SimulationError(f"{s.comment}: thread {k} reads {tensor}[{at}] while a cp.async into it is "
                                  f"in flight")
        owner = self.unpublished.get((tensor, at), k)
        if owner != k:
            raise SimulationError(f"{s.comment}: thread {k} reads {tensor}[{at}], which thread {owner}'s cp.async "
                                  f"wrote, with no barrier since its wait")

    def read(self, s, k: int, o, at: int):
        buf = self.array(k, o.tensor)
        if not 0 <= at < len(buf) or buf[at] is None:
            raise SimulationError(f"{s.comment}: thread {k} reads {o.tensor}[{at}], "
                                  f"{'outside it' if not 0 <= at < len(buf) else 'never written'}")
        if o.memory is MemoryType.Shared:
            self.check_shared(s, k, o.tensor, at)
        return buf[at]

    # -- mma.sync ---------------------------------------------------------------------------------
    def mma_issue(self, n: MmaIssue, loops) -> None:
        frag, inst = n.frag, n.frag.inst
        if self.block[0] != WARP or len(self.threads) % WARP:
            raise SimulationError(f"{n.comment}: blockDim is {self.block}; the lane must be threadIdx.x over whole "
                                  f"warps (blockDim.x == 32)")
        if len(n.a) != frag.elements("A") or len(n.b) != frag.elements("B"):
            raise SimulationError(f"{n.comment}: {len(n.a)} A and {len(n.b)} B registers per lane, the macro "
                                  f"takes {frag.elements('A')} and {frag.elements('B')}")
        for lanes, envs in self.issuing_warps(n, loops, "mma.sync"):
            a = self.tile(n, "A", n.a, lanes, envs, (frag.macro.m, frag.macro.k))
            b = self.tile(n, "B", n.b, lanes, envs, (frag.macro.k, frag.macro.n))
            for sk in range(frag.k_steps):
                ks = slice(inst.k * sk, inst.k * (sk + 1))
                for sn in range(frag.n_steps):
                    ns = slice(inst.n * sn, inst.n * (sn + 1))
                    product = a[:, ks] @ b[ks, ns]
                    self.accumulate(n, sk, sn, product, lanes, envs)
            self.mma_issues += 1

    def tile(self, n: MmaIssue, role: str, regs: list, lanes, envs, shape) -> np.ndarray:
        """The macro's role tile from the lanes' registers (tf32-rounded where converted)."""
        frag = n.frag
        tile = np.full(shape, np.nan)
        supplied = np.zeros(shape, dtype=int)
        for t, (k, env) in enumerate(zip(lanes, envs)):
            for sk, sn, e, v in steps(frag, role):
                row, col = frag.position(role, t, v)
                if (row, col) != ptx_position(frag, role, t, sk, sn, e):
                    raise SimulationError(f"MacroFragments puts lane {t}'s {role} element {v} at {(row, col)}; the "
                                          f"PTX ISA at {ptx_position(frag, role, t, sk, sn, e)}")
                o = regs[v]
                buf, at = self.array(k, o.tensor), self.offset(o, env, 0)
                if 0 <= at < len(buf) and buf[at] is None:  # garbage: it may only reach C's holes
                    self.garbage += 1
                    value = float("nan")
                else:
                    value = self.read(n, k, o, at)
                if frag.inst.converts_to_tf32:
                    value = tf32(value) if rounds_to_tf32(n) else tf32_truncated(value)
                tile[row, col] = value
                supplied[row, col] += 1
        if not (supplied == 1).all():
            bad = np.argwhere(supplied != 1)[0]
            raise SimulationError(f"{n.comment}: {role}[{bad[0]}, {bad[1]}] is supplied by "
                                  f"{supplied[tuple(bad)]} lane elements, not one")
        return tile

    def accumulate(self, n: MmaIssue, sk: int, sn: int, product: np.ndarray, lanes, envs) -> None:
        """One instruction's D = A B + C into the lanes' accumulator registers."""
        frag, inst = n.frag, n.frag.inst
        covered = np.zeros(product.shape, dtype=int)
        for t, (k, env) in enumerate(zip(lanes, envs)):
            acc, base = self.array(k, n.out.tensor), self.ev(n.out.offset, env)
            for e in range(frag.per_instruction("C")):
                v = frag.element("C", sk, sn, e)
                row, col = frag.position("C", t, v)
                if (row, col) != ptx_position(frag, "C", t, 0, sn, e):
                    raise SimulationError(f"MacroFragments puts lane {t}'s C element {v} at {(row, col)}; the PTX ISA "
                                          f"at {ptx_position(frag, 'C', t, 0, sn, e)}")
                col -= inst.n * sn
                at = base + v
                if not 0 <= at < len(acc):
                    raise SimulationError(f"{n.comment}: lane {t} accumulates into {n.out.tensor}[{at}], outside it")
                if acc[at] is None:
                    raise SimulationError(f"{n.comment}: the accumulator {n.out.tensor}[{at}] was not initialized")
                acc[at] = self.values.store(acc[at] + float(product[row, col]), n.out.dtype)
                covered[row, col] += 1
        assert (covered == 1).all(), "the C fragment covers each element of the instruction's tile once"


def run_mma_kernel(ir, fusion, inputs, symbols=None, blocks=None) -> tuple[list[np.ndarray], MmaSimulator]:
    """run_kernel with the MmaSimulator; returns the logical outputs (float, NaN where unwritten)
    and the simulator (its counters)."""
    sims = []

    def make(*args):
        sims.append(MmaSimulator(*args))
        return sims[-1]

    outs = run_kernel(ir, fusion, inputs, symbols, Numbers, blocks, simulator=make)
    return [np.vectorize(lambda x: np.nan if x is None else float(x), otypes=[float])(o) for o in outs], sims[0]


__all__ = ["MmaSimulator", "SimulationError", "ptx_position", "run_mma_kernel", "tf32"]
