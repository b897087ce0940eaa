"""A CPU simulator of lowered kernels with reductions, for tests without a GPU.

It runs the kernel IR (codegen/ir.py) block by block, the threads of a block in lockstep,
statement by statement, on Python values: every Loop, every Compute under its predicate
(copies, casts, arithmetic, an iota's start + step times its index, and a reduction's accumulation), the index names declared before an
unrolled nest (IndexNames, each thread's own values), a circular buffer's Prologue and Prefetched
copies (done when issued: a stage overwritten before it is read shows in the values), cp.async
copies (in flight per thread until a cp.async.wait_group completes their commit group: the elements
they land in read as in flight meanwhile, a SimulationError; past a zero_fill bound they write
zeros), 1-D bulk loads (cp.async.bulk, issued by their one issuer and in flight until a wait on
their mbarrier, their stage's, completes them), a WholeTile's guard (the same in every
thread of the block: checked) and the version it picks, ReduceInit, a Welford's update and
Chan's combine of its states (tuples of avg, m2, n; a sibling's SiblingStep does nothing), and BlockReduce by the
algorithm of codegen/emit/reduction.py's tp_block_reduce written out again here (warp butterfly
over __shfl_xor_sync lanes with its mask, then the shared scratch), with its requirements
checked: every shuffle partner is a lane of the warp that exists and is in the mask, every
scratch slot read was written by this combine and lies inside the scratch buffer; and
GridReduce as codegen/emit/reduction.py's tp_grid_reduce does it, the blocks arriving in the order
they run: each workspace element written once, each read written before, every semaphore back to
0 when the launch ends (a grid Welford's GridReduce: each field of its states to its own workspace, the
last block's states combined by Chan's formula in rank order); a GroupedGridReduce (a round of a group's grid reductions) as its helpers do
it: every member's partials, one count on the round's one semaphore (the members must name the same),
each member combined in the last block. An allreduce's GridReduce (tp_grid_allreduce) is a grid-wide barrier:
in a kernel launched cooperatively (KernelIR.cooperative) every block runs as a coroutine (a
thread of its own, one running at a time), which parks at the barrier after adding to the
semaphore exactly as the kernel does (32 bits: 1, or 2^31 - (ranks - 1) in the block of the last
rank) and resumes only once bit 31 differs from the value its add returned; blocks run in order
until each parks or ends, then the released ones again. A barrier that never releases is a
SimulationError (the kernel would hang), as is a barrier outside a cooperative kernel; after the
launch each barrier semaphore's low 31 bits must be 0 again, and `barrier_semaphores` is kept
from one run() to the next, so a second run is the next launch finding the state the first left.

A statement whose tensor runs at its holes unpredicated (execution/clipped_holes.py unread_holes,
and reduced_at_holes at its iteration axes' holes) reads there registers no statement wrote, or wrote at a hole: it gets and writes HOLE, and any other
statement reading a HOLE is a SimulationError (a hole's value reached an element that matters).

Values come in two kinds: numbers (rounded to each buffer's dtype as the kernel stores them,
`Numbers`), or `Terms`: the multiset of input elements a value is the sum of, so that a test
can check that each output element is the sum of exactly its own inputs, each once, and that
no hole of an indivisible split and no other element ever contributes.
"""

from __future__ import annotations

import itertools
import struct
import threading
from collections import Counter

import numpy as np

from tileproof.codegen.ir import (BLOCK_DIMS, ELEMENT_VAR, GRID_DIMS, BlockReduce, Compute, GridReduce, GroupedGridReduce,
                                  CpAsyncCommit, CpAsyncCopy, CpAsyncWait, Direction, IndexNames, Loop, LoopKind, Prefetched,
                                  Prologue, ReduceInit, SiblingStep, Sync, TmaCopy, TmaWait, WholeTile)
from tileproof.codegen.runtime.reference import BINARY, TERNARY, UNARY, cast, operand_value, round_to
from tileproof.codegen.lower.reduction import accumulator
from tileproof.execution.clipped_holes import reduced_at_holes, unread_holes
from tileproof.execution.online import delta_name
from tileproof.model.expr import evaluate
from tileproof.model.reduction import COMBINE
from tileproof.model.welford import WELFORD_OPS

from .tmem_sim import compiled

WARP = 32
THREAD_VARS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_VARS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
GENERATION_BIT = 1 << 31  # tp_grid_allreduce's barrier flips bit 31 of its 32-bit semaphore
BLOCK_STATE = ("block_env", "local", "index_names", "shared", "current_block")  # what a parked block keeps


class SimulationError(AssertionError):
    pass


HOLE = object()  # a register computed at a hole (its operands unwritten or themselves holes)
INFLIGHT = object()  # a shared element a cp.async copy lands in, until a cp.async.wait_group completes it
FIELDS = ("avg", "m2", "n")  # a Welford state's (codegen/emit/reduction.py tp_welford_state), a tuple here; n an int


def welford_update(s: tuple, x: float) -> tuple:
    """tp_welford_update: the state after one more element."""
    avg, m2, n = s
    n, delta = n + 1, x - avg
    new = avg + delta / n
    return new, m2 + delta * (x - new), n


def welford_combine(a: tuple, b: tuple) -> tuple:
    """tp_welford_combine: Chan's formula, the larger count first (then the smaller mean, m2), an
    empty state leaving the other."""
    if b[2] > a[2] or (b[2] == a[2] and (b[0] < a[0] or (b[0] == a[0] and b[1] < a[1]))):
        a, b = b, a
    if b[2] == 0:
        return a
    n = int(a[2]) + int(b[2])
    w, delta = b[2] / n, b[0] - a[0]
    return a[0] + delta * w, a[1] + b[1] + delta * delta * a[2] * w, n


def _register_bytes(n: BlockReduce) -> int:
    """A combined value's bytes in the scratch: the dtype's, or a tp_welford_state state's (two values
    and the count, padded to the widest)."""
    if n.combine != "welford":
        return n.dtype.bytes
    align = max(n.dtype.bytes, n.welford_count.bytes)
    return -(-(2 * n.dtype.bytes + n.welford_count.bytes) // align) * align


# float64 -> a float dtype and back for one number, as round_to rounds an array (an array a number
# costs round_to's time in the simulator, which stores every element it computes): inside the
# dtype's range or infinite, float16 and float32 by numpy's and C's conversion, which round to
# nearest even as round_to's does; bfloat16 inside float32's range as arrays.to_raw rounds (to
# float32 rounding to odd, then to nearest even); round_to itself takes the others (NaN, overflow,
# the integers' wrapping).
_F32, _U32 = struct.Struct("<f"), struct.Struct("<I")
_F32_MAX = float(np.finfo(np.float32).max)
_INFINITIES = (float("inf"), float("-inf"))


def _float32(value: float) -> float:
    return _F32.unpack(_F32.pack(value))[0]


def _bfloat16(value: float) -> float:
    nearest = _F32.pack(value)
    bits = _U32.unpack(nearest)[0]
    back = _F32.unpack(nearest)[0]
    if back != value:  # inexact: toward zero, last bit set (round to odd)
        if abs(back) > abs(value):
            bits -= 1  # one float32 closer to zero (the sign is apart from the magnitude)
        bits |= 1
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # to nearest even
    return _F32.unpack(_U32.pack(rounded << 16))[0]


_SCALAR_ROUNDING = {"float16": (lambda v: float(np.float16(v)), float(np.finfo(np.float16).max), True),
                    "float32": (_float32, _F32_MAX, True), "bfloat16": (_bfloat16, _F32_MAX, False)}


class Numbers:
    """Values are float64 numbers rounded to the dtype of the buffer that holds them (a Welford
    state: a tuple of three, each rounded)."""

    zero = 0.0

    @staticmethod
    def store(value, dtype):
        if isinstance(value, tuple):  # a Welford state: its count is an integer
            return Numbers.store(value[0], dtype), Numbers.store(value[1], dtype), int(value[2])
        if isinstance(value, float):  # a Python float or numpy's float64
            if dtype.name == "float64":
                return float(value)
            scalar = _SCALAR_ROUNDING.get(dtype.name)
            if scalar is not None:
                rounding, largest, infinite = scalar
                if -largest <= value <= largest or (infinite and value in _INFINITIES):
                    return rounding(float(value))
        return float(round_to(np.array([value], dtype=np.float64), dtype)[0])

    @staticmethod
    def combine(name: str, a, b):
        if name == "welford":
            return welford_combine(a, b)
        if name == "add":
            return a + b
        if np.isnan(a) or np.isnan(b):
            return float("nan")
        return min(a, b) if name == "minimum" else max(a, b)

    @staticmethod
    def compute(s: Compute, args, symbols: dict[str, int]):
        import numpy

        if s.kind in ("load_store", "broadcast", "transpose"):
            return args[0]
        if s.kind == "cast":
            return float(cast(numpy, np.array([args[0]]), s.ins[0].dtype, s.out.dtype)[0])
        values = [np.float64(a) for a in args]
        if s.name == "online_delta":  # an online max's growth (execution/online.py): 0 where equal
            return 0.0 if values[0] == values[1] else float(values[0] - values[1])
        if s.scalar is not None:  # a number, or an extent at these sizes
            values.insert(s.scalar.position, operand_value(numpy, s.scalar, s.ins[-1].dtype, symbols))
        with np.errstate(all="ignore"):
            if s.kind == "unary":
                return float(UNARY[s.name](numpy, values[0]))
            if s.kind == "binary":
                return float(BINARY[s.name](numpy, *values))
            if s.kind == "ternary":
                return float(TERNARY[s.name](numpy, *values))
        raise NotImplementedError(f"{s.kind} {s.name}")


class Terms:
    """Values are Counters of input elements (sums only): a copy moves one, a sum adds them."""

    zero = Counter()  # no element

    @staticmethod
    def store(value, dtype):
        return value

    @staticmethod
    def combine(name: str, a, b):
        if name != "add":
            raise NotImplementedError("terms are tracked for sums")
        return a + b

    @staticmethod
    def compute(s: Compute, args, symbols: dict[str, int]):
        if s.kind in ("load_store", "broadcast", "transpose", "cast"):
            return args[0]
        if s.kind == "binary" and s.name == "add" and s.scalar is None:  # a sum of sums: their terms together
            return args[0] + args[1]
        raise NotImplementedError(f"{s.kind} {s.name}")


class Simulator:
    """Runs `ir` on flat buffers of values: `buffers[name]` for every global tensor."""

    def __init__(self, ir, symbols: dict[str, int] | None = None, values=Numbers):
        self.ir = ir
        self.values = values
        self.symbols = dict(symbols or {})
        self.algebra = {cpp: alg for alg, cpp in ir.names.items()}  # C++ loop counter -> algebra variable
        self.block = [evaluate(e, self.symbols) for e in ir.block]
        self.grid = [evaluate(e, self.symbols) for e in ir.grid]
        # blockDim / gridDim (codegen/lower/launch_dims.py): the launch's, as the runtime evaluates them
        self.symbols.update({**dict(zip(BLOCK_DIMS, self.block)), **dict(zip(GRID_DIMS, self.grid))})
        self.neutral = Counter() if values is Terms else None
        self._functions: dict = {}
        self.shuffles = 0
        self.scratch_rounds = 0
        self.barrier_semaphores: dict[str, dict[int, int]] = {}  # an allreduce's, kept across run()s (launches)
        self.barrier_waits = 0  # how many times a block parked at a barrier (tests check the barrier ran)
        self._scheduler = None
        self.unread: frozenset[str] = frozenset()  # tensors computed at their holes (run_kernel sets them)

    def ev(self, e, env) -> int:
        f = self._functions.get(e)
        if f is None:
            f = self._functions[e] = compiled(e)
        return f(env)

    def run(self, buffers: dict[str, list], blocks=None) -> None:
        """Run every block, or the blocks (blockIdx tuples) listed in `blocks`, in that order."""
        self.buffers = buffers
        bx, by, bz = self.block
        self.threads = [dict(zip(THREAD_VARS, (x, y, z))) for z in range(bz) for y in range(by) for x in range(bx)]
        self.work: dict[str, dict[int, object]] = {}  # a grid reduction's workspace, element -> value
        self.semaphores: dict[str, dict[int, int]] = {}
        every = list(itertools.product(*(range(g) for g in self.grid)))
        order = list(blocks if blocks is not None else every)
        if getattr(self.ir, "cooperative", False):
            _Cooperative(self, order).run()
        else:
            for b in order:
                self.run_block(b)
        if sorted(order) == every:  # the whole launch ran (in any order): its semaphores are back
            left = {(name, at): v for name, sems in self.semaphores.items() for at, v in sems.items() if v}
            if left:
                raise SimulationError(f"semaphores left counting after the launch: {left}")
            left = {(name, at): v for name, sems in self.barrier_semaphores.items() for at, v in sems.items()
                    if v % GENERATION_BIT}
            if left:
                raise SimulationError(f"barrier semaphores left mid-count after the launch: {left}")

    def run_block(self, b: tuple) -> None:
        """Run block b (its blockIdx) from the start: its buffers allocated, then its statements."""
        self.current_block = b
        self.block_env = {**self.symbols, **dict(zip(BLOCK_VARS, b))}
        self.local = [dict() for _ in self.threads]
        self.index_names = [{} for _ in self.threads]  # per thread: IndexNames' name -> value
        self.shared = {}
        self.cp_groups = [[] for _ in self.threads]  # per thread: its committed cp.async groups, oldest first
        self.cp_open = [[] for _ in self.threads]  # per thread: its cp.async copies not yet committed
        self.bulk_pending: dict = {}  # (mbarrier, stage) -> its 1-D bulk copies in flight
        for buf in self.ir.buffers:
            n = evaluate(buf.elements, self.symbols)
            if buf.memory.value == "Shared":
                self.shared[buf.tensor] = [None] * n
            else:
                for regs in self.local:
                    regs[buf.tensor] = [None] * n
        self.begin_block()
        self.nodes(self.ir.body, {})
        self.end_block()

    def begin_block(self) -> None:
        """Called before each block runs, its buffers allocated (for subclasses' own state)."""

    def end_block(self) -> None:
        """Called after each block has run."""

    def nodes(self, nodes: list, loops: dict[str, int]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                if n.kind in (LoopKind.THREAD, LoopKind.BLOCK):
                    self.nodes(n.body, loops)
                else:
                    name = self.algebra.get(n.var, n.var)
                    for v in range(evaluate(n.extent, self.block_env)):
                        self.nodes(n.body, {**loops, name: v})
            elif isinstance(n, Sync):
                pass  # lockstep: every thread has finished the statements above
            elif isinstance(n, ReduceInit):
                for regs in self.local:
                    regs[n.acc][:n.elements] = [self.start(n)] * n.elements
            elif isinstance(n, BlockReduce):
                self.block_reduce(n)
            elif isinstance(n, SiblingStep):
                pass  # a Welford sibling's step, done by its leader's statement
            elif isinstance(n, GridReduce):
                (self.grid_allreduce if n.allreduce else self.grid_reduce)(n, loops)
            elif isinstance(n, GroupedGridReduce):
                self.grid_round(n, loops)
            elif isinstance(n, Compute):
                self.compute(n, loops)
            elif isinstance(n, IndexNames):
                for k, names in enumerate(self.index_names):
                    env = self.env(k, loops)
                    names.update({name: self.ev(value, env) for name, value in n.names})
            elif isinstance(n, WholeTile):
                self.nodes([n.whole if self.block_uniform(n.guard, loops) else n.lowered], loops)
            elif isinstance(n, CpAsyncCommit):
                self.cp_commit()
            elif isinstance(n, CpAsyncWait):
                if n.commit:
                    self.cp_commit()
                for groups in self.cp_groups:  # every group but the newest `pending` lands
                    done = groups[:len(groups) - n.pending] if n.pending else groups[:]
                    del groups[:len(done)]
                    for out, at, value in (w for g in done for w in g):
                        out[at] = value
            elif isinstance(n, TmaWait):
                self.bulk_wait(n, loops)
            elif isinstance(n, TmaCopy) and n.gmem is not None and n.direction is Direction.LOAD:
                self.bulk_load(n, loops)
            elif isinstance(n, Prologue):  # a circular buffer's first copies: cp.async ones a group an iteration
                name, extent = self.algebra.get(n.index, n.index), evaluate(n.extent, self.block_env)
                for v in range(max(n.prefetch, 0)):  # (codegen/emit/cp_async.py prologue_lines: every thread
                    if v < extent:                    # commits as often, however short the loop)
                        self.nodes(n.body, {**loops, name: v})
                    if n.asynchronous and not n.tma:
                        self.cp_commit()
            elif isinstance(n, Prefetched):  # the copies of iteration i + prefetch (indices shifted)
                if loops[self.algebra.get(n.index, n.index)] + n.prefetch < evaluate(n.extent, self.block_env):
                    self.nodes(n.body, loops)
            else:
                raise NotImplementedError(type(n).__name__)

    def bulk_load(self, n: TmaCopy, loops) -> None:
        """A 1-D bulk copy (cp.async.bulk) global -> shared by the threads meeting its issuer (one:
        checked) where its bounds hold, complete when issued: nbytes from the run's first element."""
        issuers = [k for k in range(len(self.threads)) if self.holds(n.issuer, self.env(k, loops))]
        if len(issuers) != 1:
            raise SimulationError(f"{n.comment}: issued by {len(issuers)} threads, not one")
        env = self.env(issuers[0], loops)
        if not self.holds(n.bounds, env):
            return
        size = next(b.dtype.bytes for b in self.ir.buffers if b.tensor == n.smem)
        src, dst = self.buffers[n.gmem], self.shared[n.smem]
        first, at, count = self.ev(n.gmem_offset, env), self.ev(n.smem_offset, env) // size, self.ev(n.nbytes, env) // size
        if not (0 <= first and first + count <= len(src) and 0 <= at and at + count <= len(dst)):
            raise SimulationError(f"{n.comment}: {count} elements from {n.gmem}[{first}] to {n.smem}[{at}] leave a buffer")
        # in flight until a wait on its mbarrier (its stage's) completes it
        key = (n.barrier, None if n.stage is None else self.ev(n.stage, env))
        self.bulk_pending.setdefault(key, []).append((dst, at, src[first:first + count]))
        dst[at:at + count] = [INFLIGHT] * count

    def bulk_wait(self, n: TmaWait, loops) -> None:
        """Every thread's wait on a load's mbarrier (a circular buffer's: iteration i's stage,
        i % stages): the 1-D bulk copies issued to it land."""
        stage = None
        if n.stages > 1:
            stage = loops[self.algebra.get(n.index, n.index)] % n.stages
        for dst, at, values in self.bulk_pending.pop((n.barrier, stage), []):
            dst[at:at + len(values)] = values

    def block_uniform(self, conds, loops) -> bool:
        """Whether conds hold, which the kernel tests once for the whole block: in every thread
        alike (else SimulationError)."""
        held = {self.holds(conds, self.env(k, loops)) for k in range(len(self.threads))}
        if len(held) != 1:
            raise SimulationError(f"a block-uniform guard holds in some threads only: {conds}")
        return held.pop()

    def start(self, n: ReduceInit):
        if getattr(n, "welford_count", None) is not None:  # an empty Welford state
            return (0.0, 0.0, 0)
        return self.neutral if self.neutral is not None else float(n.neutral)

    def env(self, k: int, loops) -> dict[str, int]:
        return {**self.block_env, **self.threads[k], **self.index_names[k], **loops}

    def holds(self, conds, env) -> bool:
        for c in conds:
            a, b = self.ev(c.lhs, env), self.ev(c.rhs, env)
            if not (a < b if c.op == "<" else a == b):
                return False
        return True

    def array(self, k: int, tensor: str) -> list:
        if tensor in self.local[k]:
            return self.local[k][tensor]
        if tensor in self.shared:
            return self.shared[tensor]
        return self.buffers[tensor]

    def cp_commit(self) -> None:
        """cp.async.commit_group in every thread: its copies so far one group (empty where none)."""
        for k, copies in enumerate(self.cp_open):
            self.cp_groups[k].append(copies)
            self.cp_open[k] = []

    def compute(self, s: Compute, loops) -> None:
        writes = []
        for k in range(len(self.threads)):
            env = self.env(k, loops)
            if not self.holds(s.conds, env):
                continue
            mine = []
            if isinstance(s, CpAsyncCopy) and not self.holds(s.zero_fill, env):  # src-size 0: zeros written
                out = self.array(k, s.out.tensor)
                mine = [(out, self.offset(s.out, env, v), self.values.zero) for v in range(s.vector)]
            else:
                for v in range(s.vector):  # a vector: consecutive elements (a per-element operand: its own offset)
                    mine += self.element(s, k, {**env, ELEMENT_VAR: v}, v)
            if isinstance(s, CpAsyncCopy):  # in flight until a wait_group completes its group
                self.cp_open[k] += mine
                mine = [(out, at, INFLIGHT) for out, at, _ in mine]
            writes += mine
        for out, at, value in writes:  # lockstep: every thread reads before any writes
            out[at] = value

    def combine(self, name: str, a, b):
        """Two partials combined across threads or rounds: a hole's (a row past its extent, reduced at
        its holes: reduced_at_holes) stays one, and reaching an element that matters is an error there."""
        return HOLE if a is HOLE or b is HOLE else self.values.combine(name, a, b)

    def offset(self, o, env, v: int) -> int:
        return self.ev(o.offset, env) + (0 if o.per_element else v)

    def element(self, s: Compute, k: int, env, v: int) -> list:
        args, hole = [], False
        for o in s.ins:
            buf, at = self.array(k, o.tensor), self.offset(o, env, v)
            if 0 <= at < len(buf) and (buf[at] is None or buf[at] is HOLE) and s.out.tensor in self.unread:
                hole = True  # computed at a hole: what it reads there is arbitrary
                continue
            if 0 <= at < len(buf) and buf[at] is INFLIGHT:
                raise SimulationError(f"{s.comment}: thread {k} reads {o.tensor}[{at}] while an asynchronous copy "
                                      f"lands there (no cp.async.wait_group or mbarrier wait has completed it)")
            if not 0 <= at < len(buf) or buf[at] is None or buf[at] is HOLE:
                why = ("outside it" if not 0 <= at < len(buf) else "never written" if buf[at] is None
                       else "a value computed at a hole")
                raise SimulationError(f"{s.comment}: thread {k} reads {o.tensor}[{at}], {why}")
            args.append(buf[at][FIELDS.index(o.field)] if o.field else buf[at])  # a Welford state's field
        out = self.array(k, s.out.tensor)
        at = self.offset(s.out, env, v)
        if not 0 <= at < len(out):
            raise SimulationError(f"{s.comment}: thread {k} writes {s.out.tensor}[{at}] outside it")
        if hole:
            return [(out, at, HOLE)]
        if s.kind == "reduction":
            if out[at] is None:
                raise SimulationError(f"{s.comment}: the accumulator {s.out.tensor}[{at}] was not initialized")
            acc = out[at] if s.rescale is None else out[at] * float(np.exp2(s.rescale * np.float64(args[1])))
            if s.name in WELFORD_OPS:  # an element, or a partial state (avg, var_sum, n)
                value = welford_update(acc, args[0]) if len(args) == 1 else welford_combine(acc, tuple(args))
            else:
                value = self.values.combine(COMBINE[s.name], acc, args[0])
        elif s.iota is not None:  # an iota: start + step times the element's logical index, at this point
            value = s.iota.start + self.ev(s.iota.index, env) * s.iota.step
        else:
            value = self.values.compute(s, args, self.symbols)
        return [(out, at, self.values.store(value, s.out.dtype))]

    # -- codegen/emit/reduction.py tp_grid_reduce ----------------------------------------------------
    def grid_reduce(self, n: GridReduce, loops) -> None:
        self.grid_round(GroupedGridReduce([n]), loops)

    # -- codegen/emit/reduction.py tp_grid_allreduce ------------------------------------------------
    def grid_allreduce(self, n: GridReduce, loops) -> None:
        self.grid_round(GroupedGridReduce([n]), loops)

    # -- a round (codegen/emit/reduction.py tp_grid_partials, tp_grid_arrive / tp_grid_barrier,
    #    tp_grid_combine, tp_grid_release); one member: tp_grid_reduce / tp_grid_allreduce --------------
    def grid_round(self, n: GroupedGridReduce, loops) -> None:
        """Every member's partials written, one count on the first member's semaphore (or one barrier),
        then each member combined in the last block (every block): the members must name one semaphore,
        count and rank, as the kernel uses the first's."""
        envs = [self.env(k, loops) for k in range(len(self.threads))]
        for m in n.members:
            self.write_partials(m, envs)
        first = n.members[0]
        uniform = {(m.semaphores, self.ev(m.semaphore, env), self.ev(m.ranks, env),
                    self.ev(m.rank, env) if m.allreduce else None, m.allreduce) for m in n.members for env in envs}
        if len(uniform) != 1:
            raise SimulationError(f"{first.comment}: the threads or members of a round name different semaphores, "
                                  f"counts or ranks: {sorted(map(str, uniform))}")
        _, sem, ranks, rank, allreduce = uniform.pop()
        if allreduce:
            self.barrier(first, sem, ranks, rank)
            for m in n.members:
                self.combine_partials(m, envs, ranks, f"block {self.current_block}, after the barrier,")
            return
        sems = self.semaphores.setdefault(first.semaphores, {})
        ticket = sems.get(sem, 0)
        if ticket >= ranks:
            raise SimulationError(f"{first.comment}: semaphore {sem} counted past its {ranks} blocks")
        sems[sem] = ticket + 1
        last = ticket == ranks - 1
        if last:
            for m in n.members:
                self.combine_partials(m, envs, ranks, "the last block")
            sems[sem] = 0
        for name, index, dim in first.last:
            for k, env in enumerate(envs):
                self.index_names[k][name] = env[index] if last else self.grid["xyz".index(dim[-1])]

    def write_partials(self, n: GridReduce, envs) -> None:
        """Each writer's N registers of n's accumulator to its slot of n's workspace (each element once)."""
        works = [self.work.setdefault(w, {}) for w in n.welford_work or (n.work,)]
        for k, env in enumerate(envs):
            if self.holds(n.writer, env):
                base = self.ev(n.slot, env)
                for e in range(n.elements):
                    value = self.local[k][n.acc][e]
                    # a grid Welford: each field of the state to its own workspace (tp_grid_welford_partials)
                    for work, part in zip(works, value if n.welford_work else (value,)):
                        if base + e in work:
                            raise SimulationError(f"{n.comment}: workspace element {base + e} written twice")
                        work[base + e] = part

    def barrier(self, n: GridReduce, sem: int, ranks: int, rank: int) -> None:
        """tp_grid_allreduce's (tp_grid_barrier's) grid-wide barrier: the block parks until bit 31 flips."""
        if self._scheduler is None:
            raise SimulationError(f"{n.comment}: a grid-wide barrier in a kernel not launched cooperatively")
        sems = self.barrier_semaphores.setdefault(n.semaphores, {})
        arrived = sems.get(sem, 0)
        increment = (GENERATION_BIT - (ranks - 1)) % (1 << 32) if rank == ranks - 1 else 1
        sems[sem] = (arrived + increment) % (1 << 32)
        self._scheduler.park(lambda: bool((arrived ^ sems.get(sem, 0)) & GENERATION_BIT),
                             f"{n.comment}: semaphore {sem}")

    def combine_partials(self, n: GridReduce, envs, ranks: int, who: str) -> None:
        """Each thread combines the partials of the ranks it reduces from the workspace (a grid
        Welford's states from its three, tp_grid_welford_combine), in rank order, then the block's
        threads combine theirs (the last block of a grid reduction; every block of an allreduce)."""
        works = [self.work.get(w, {}) for w in n.welford_work or (n.work,)]
        for k, env in enumerate(envs):
            acc = [(0.0, 0.0, 0) if n.welford_work else self.start(n)] * n.elements
            first, stride = self.ev(n.first, env), self.ev(n.stride, env)
            for j in range(self.ev(n.reducer, env), ranks, self.ev(n.reducers, env)):
                for e in range(n.elements):
                    at = first + j * stride + e
                    if any(at not in work for work in works):
                        raise SimulationError(f"{n.comment}: {who} reads workspace element {at}, which no block wrote")
                    part = tuple(work[at] for work in works) if n.welford_work else works[0][at]
                    acc[e] = self.combine(n.combine, acc[e], part)
            self.local[k][n.acc][:n.elements] = acc
        if any(n.threads):
            self.block_reduce(BlockReduce(n.acc, n.elements, n.dtype, n.combine, n.threads, n.scratch,
                                          welford_count=n.welford_count))

    # -- codegen/emit/reduction.py tp_block_reduce, step by step -------------------------------------
    def block_reduce(self, n: BlockReduce) -> None:
        rx, ry, rz = n.threads
        bx, by, bz = self.block
        total = bx * by * bz
        accs = [regs[n.acc] for regs in self.local]
        info = []
        for t in self.threads:
            x, y, z = (t[v] for v in THREAD_VARS)
            r = g = 0
            G = NG = 1
            if rz:
                r, G = z, bz
            else:
                g, NG = z, bz
            if ry:
                r, G = r * by + y, G * by
            else:
                g, NG = g * by + y, NG * by
            if rx:
                r, G = r * bx + x, G * bx
            else:
                g, NG = g * bx + x, NG * bx
            lanes = (not ry or rx or bx == 1) and (not rz or ((ry or by == 1) and (rx or bx == 1)))
            W = min(G & -G, WARP) if lanes else 1
            info.append((r, g, G, NG, W))
        W = info[0][4]
        if any(i[4] != W or i[2] != info[0][2] for i in info):
            raise SimulationError("threads of one block disagree on the group size")
        off = W >> 1
        while off:
            new = []
            for k in range(total):
                base = k & ~(WARP - 1)
                present = total - base
                mask = (1 << min(present, WARP)) - 1
                partner = k ^ off
                if partner >= total or not (mask >> (partner - base)) & 1:
                    raise SimulationError(f"lane {k} shuffles with lane {partner}, which is not in the warp's mask")
                if info[partner][1] != info[k][1]:
                    raise SimulationError(f"lane {k} shuffles with lane {partner} of another group")
                new.append([self.combine(n.combine, a, b) for a, b in zip(accs[k], accs[partner])])
            for k in range(total):
                accs[k][:n.elements] = new[k]
            self.shuffles += 1
            off >>= 1
        G, NG = info[0][2], info[0][3]
        P = G // W
        if P > 1:
            self.scratch_rounds += 1
            size = len(self.shared[n.scratch]) // _register_bytes(n)
            scratch: dict[int, object] = {}
            for k, (r, g, _, _, _) in enumerate(info):
                if r % W == 0:
                    for e in range(n.elements):
                        at = (e * NG + g) * P + r // W
                        if not 0 <= at < size:
                            raise SimulationError(f"scratch slot {at} is outside the {size} slots")
                        if at in scratch:
                            raise SimulationError(f"two threads write scratch slot {at}")
                        scratch[at] = accs[k][e]
            if W == WARP and P <= WARP and not P & (P - 1):
                self._combine_partials_by_shuffles(n, accs, info, scratch, P)
                return
            for k, (r, g, _, _, _) in enumerate(info):
                for e in range(n.elements):
                    part = [(e * NG + g) * P + j for j in range(P)]
                    missing = [a for a in part if a not in scratch]
                    if missing:
                        raise SimulationError(f"thread {k} reads scratch slot {missing[0]}, which no thread wrote")
                    v = scratch[part[0]]
                    for a in part[1:]:
                        v = self.combine(n.combine, v, scratch[a])
                    accs[k][e] = v

    def _combine_partials_by_shuffles(self, n: BlockReduce, accs, info, scratch, P: int) -> None:
        """Whole warps, P a power of two: lane k reads partial k % P, then a butterfly over the
        offsets P/2 .. 1, every partner a lane of the same warp and group."""
        total = len(info)
        vals = []
        for k, (_, g, _, NG, _) in enumerate(info):
            row = []
            for e in range(n.elements):
                at = (e * NG + g) * P + (k & (P - 1))
                if at not in scratch:
                    raise SimulationError(f"thread {k} reads scratch slot {at}, which no thread wrote")
                row.append(scratch[at])
            vals.append(row)
        off = P >> 1
        while off:
            new = []
            for k in range(total):
                partner = k ^ off
                if partner >= total or partner // WARP != k // WARP or info[partner][1] != info[k][1]:
                    raise SimulationError(f"lane {k} shuffles with lane {partner}, outside its warp or group")
                new.append([self.combine(n.combine, a, b) for a, b in zip(vals[k], vals[partner])])
            vals = new
            self.shuffles += 1
            off >>= 1
        for k in range(total):
            accs[k][:n.elements] = vals[k]


class _Aborted(BaseException):
    """Ends a parked block's thread when the launch has failed."""


class _Cooperative:
    """A cooperative launch of `sim`: each block of `order` a thread of its own, one running at a
    time (the Simulator's per-block state, BLOCK_STATE, saved and restored around a park). Rounds:
    the runnable blocks run in order until each parks at a barrier or ends; then those whose
    barrier has released run again. No runnable block while some are parked: the kernel hangs."""

    def __init__(self, sim: Simulator, order: list):
        self.sim, self.order = sim, order
        self.cv = threading.Condition()
        self.turn = None  # the block whose thread runs now; None: the scheduler's turn
        self.aborted = False
        self.parked: dict[tuple, tuple] = {}  # block -> (released?, what it waits for)
        self.errors: list[BaseException] = []

    def run(self) -> None:
        self.sim._scheduler = self
        threads = [threading.Thread(target=self._block, args=(b,), daemon=True) for b in self.order]
        for t in threads:
            t.start()
        try:
            runnable = list(self.order)
            while runnable:
                for b in runnable:
                    self._hand_to(b)
                    if self.errors:
                        raise self.errors[0]
                waiting = [b for b in self.order if b in self.parked]
                runnable = [b for b in waiting if self.parked[b][0]()]
                if waiting and not runnable:
                    raise SimulationError(f"the launch hangs: blocks {waiting[:4]}{'...' if len(waiting) > 4 else ''} "
                                          f"wait at a grid-wide barrier ({self.parked[waiting[0]][1]}) that never "
                                          f"releases")
                for b in runnable:
                    del self.parked[b]
        finally:
            with self.cv:
                self.aborted = True
                self.cv.notify_all()
            for t in threads:
                t.join()
            self.sim._scheduler = None

    def _hand_to(self, b) -> None:
        with self.cv:
            self.turn = b
            self.cv.notify_all()
            while self.turn is not None:
                self.cv.wait()

    def _wait_turn(self, b) -> None:
        with self.cv:
            while self.turn != b and not self.aborted:
                self.cv.wait()
            if self.aborted:
                raise _Aborted()

    def _block(self, b) -> None:
        try:
            self._wait_turn(b)
            self.sim.run_block(b)
        except _Aborted:
            return
        except BaseException as e:  # reported by the scheduler
            self.errors.append(e)
        with self.cv:
            self.turn = None
            self.cv.notify_all()

    def park(self, released, what: str) -> None:
        """Called in the running block's thread at a barrier: give the turn back until `released()`."""
        sim = self.sim
        b = sim.current_block
        state = {name: getattr(sim, name) for name in BLOCK_STATE}
        sim.barrier_waits += 1
        with self.cv:
            self.parked[b] = (released, what)
            self.turn = None
            self.cv.notify_all()
        self._wait_turn(b)
        for name, value in state.items():
            setattr(sim, name, value)


def global_view(g, flat: list, symbols: dict[str, int]) -> np.ndarray:
    """The logical (shape) array of objects over flat buffer `flat` laid out by GlobalTensor g."""
    shape = [evaluate(e, symbols) for e in g.extents]
    strides = [0] * len(shape)
    for axis, s in zip(g.alloc_axes, g.strides):
        strides[axis] = evaluate(s, symbols)
    out = np.empty(shape, dtype=object)
    for point in itertools.product(*(range(n) for n in shape)):
        out[point] = flat[sum(p * s for p, s in zip(point, strides))]
    return out


def _flat_size(g, symbols) -> int:
    return 1 + sum((evaluate(g.extents[a], symbols) - 1) * evaluate(s, symbols) for a, s in zip(g.alloc_axes, g.strides))


def computed_at_holes(fusion) -> frozenset[str]:
    """The arrays statements write at holes: the tensors of unread_holes and reduced_at_holes, and the
    latter's accumulators and (an online max's) growth registers."""
    frozen = fusion if getattr(fusion, "frozen", False) else fusion.snapshot()  # its analyses memoized
    reduced = [t for t in frozen.tensors if t.name in reduced_at_holes(frozen)]
    return unread_holes(frozen) | {n for t in reduced for n in (t.name, accumulator(t), delta_name(t))}


def run_kernel(ir, fusion, inputs: list[np.ndarray], symbols=None, values=Numbers, blocks=None,
               simulator=None) -> list[np.ndarray]:
    """Simulate on logical input arrays (numbers, or for Terms anything: each input element becomes
    the term (input name, index)); returns the logical outputs (None where unwritten). `blocks`:
    only these blocks (blockIdx tuples); `simulator`: what makes the Simulator from (ir, symbols, values) (default Simulator)."""
    symbols = dict(symbols or {})
    buffers: dict[str, list] = {}
    for g in ir.globals:
        buffers[g.name] = [None] * _flat_size(g, symbols)
    for v in getattr(ir, "views", ()):  # a broadcast read as a view of an input: the input's memory, as at launch
        buffers[v.name] = buffers[v.view_of]
    for t, a in zip(fusion.inputs, inputs):
        g = next(g for g in ir.globals if g.name == t.name)
        strides = [0] * len(g.extents)
        for axis, s in zip(g.alloc_axes, g.strides):
            strides[axis] = evaluate(s, symbols)
        a = np.asarray(a)
        for point in itertools.product(*(range(n) for n in a.shape)):
            value = Counter({(t.name, point): 1}) if values is Terms else Numbers.store(float(a[point]), t.dtype)
            buffers[g.name][sum(p * s for p, s in zip(point, strides))] = value
    sim = (simulator or Simulator)(ir, symbols, values)
    sim.unread = computed_at_holes(fusion)
    sim.run(buffers, blocks)
    outs = []
    for t in fusion.outputs:
        g = next(g for g in ir.globals if g.name == t.name)
        outs.append(global_view(g, buffers[g.name], symbols))
    return outs
