"""Lowering of tensor memory (sm_100a): tcgen05 loads and stores, the allocation, the fences.

Three hooks in the pass list of codegen/lower/__init__.py:

    check_supported       (in `check`) tensor memory needs a target that has it; TMemStore /
                          TMemLoad must write / read a tensor-memory tensor; registers between
                          two tensor-memory tensors
    lower_accesses        (after `index`) each statement that stores into or loads from tensor
                          memory becomes a TmemAccess: one warp-collective tcgen05.st / ld per
                          point of its non-vectorized loops, moving the vectorized IDs as the
                          instruction's registers; a tcgen05.mma's accumulator gets its first
                          column and the mbarrier its commits arrive on
    allocate_and_fence    (after `sync`) one tcgen05.alloc for all tensor-memory tensors by
                          warp 0, a dealloc at the end, and tcgen05 fences around every barrier;
                          inside it each region (execution/tmem_regions.py) a power-of-two
                          block, a region's tensors one after another in it

What was proved is what runs. The addresses are the access model the verifier proves
(execution/accesses.py, lanes and columns from the tensor's allocation), not a second
derivation: the warp's address is that model at the warp's first thread and register 0
(AccessModel.warp_base_env, exactly the base of the TMEM-ACCESS-PATTERN proof), and the
instruction shape is the pattern verify recorded for the access (Report.decisions: the
pattern TMEM-ACCESS-PATTERN proved, where TMEM-WARP-COLLECTIVE and TMEM-PACKING hold too).
The proof says: for every executing thread t, loop point s and
element r, the element's (lane, 32-bit column) = base(warp of t, s) + offset_pattern(t % 32, R),
which is where tcgen05 puts register R of thread t. Element r is the one at the vectorized point
r (row-major over the vectorized IDs: model/indexing.py vector_index), and it sits in register
R = (r * bytes) / 4 from byte (r * bytes) % 4 (model/tcgen05.py Packing: 8- and 16-bit elements
share a register, the lower column bytes in its lower bits; a 64-bit element spans R and R + 1);
the proof also fixes its byte within the column to that byte.

Predicates. tcgen05.ld/st are .sync.aligned: all 32 threads of a warp execute them or none.
The instruction is predicated only by
  - the thread/block extents of the issuing tensor (AccessModel.active): warp-uniform, because
    TMEM-WARP-COLLECTIVE proved that a thread executes the access only if its whole warp does;
  - conditions free of threadIdx (loop counters and block indices are the same in a warp).
The holes of indivisible splits do not predicate it either (nvFuser's isLdStTMem predicate):
the warp runs it at the holes too, which SPLIT-DIVISIBILITY accepted only where every split of
the schedule divides or the access at its holes stays inside the tensor's allocation and (a
store) writes no valid element's cell (verifier/analysis/tmem_holes.py). The holes predicate the
data instead: a store reads no register at a hole (it stores zero there), a load writes none
back, so nothing from a hole reaches a register a valid point reads. Other per-thread conditions
(a single writer into shared memory) predicate the data too: a load's write-back of its
registers; a store with one is not lowered.
"""

from __future__ import annotations

from dataclasses import fields

from ...model.errors import InternalError
from ...model.expr import Expr, add, const, mul, substitute, try_int, var
from ...execution.indexing import block_dims, thread_dims, vector_point
from ...hw.tcgen05 import tmem_address
from ...model.tensor import TensorView
from ...model.types import BLOCK_TYPES, THREAD_TYPES, Direction, LoadStoreOpType, MemoryType, OpKind, ParallelType
from ...execution.accesses import AccessModel, packing, registers, tmem_access_models, var_name
from ...execution.tmem_regions import tmem_regions
from ..errors import UnsupportedSchedule
from ..ir import Compute, Cond, Loop, Operand, Sync
from ...model.simplify import simplify
from .statements import StatementBuilder
from ..ir import TCGEN05_OPS, MBarrier, MmaIssue, TmemAccess, TmemAlloc, TmemDealloc, TmemElement, TmemFencedSync
from ...execution.tcgen05_order import commit_barrier

TMEM_OP_TYPES = (LoadStoreOpType.TMemStore, LoadStoreOpType.TMemLoad)
THREAD_VAR_NAMES = frozenset(p.cuda_name for p in THREAD_TYPES)


def tmem_tensors(fusion) -> list[TensorView]:
    return [t for t in fusion.tensors if t.memory_type is MemoryType.Tensor and not t.is_fusion_input]


# -- check -------------------------------------------------------------------------------------


def check_supported(st) -> None:
    fusion = st.fusion
    for op in fusion.exprs:
        if op.kind is not OpKind.LOAD_STORE:
            continue
        if op.op_type is LoadStoreOpType.TMemStore and op.output.memory_type is not MemoryType.Tensor:
            raise UnsupportedSchedule(f"`{op}` is a TMemStore but {op.output.name} is in {op.output.memory_type} "
                                      f"memory; a TMemStore writes a tensor-memory tensor")
        if op.op_type is LoadStoreOpType.TMemLoad and op.inputs[0].memory_type is not MemoryType.Tensor:
            raise UnsupportedSchedule(f"`{op}` is a TMemLoad but {op.inputs[0].name} is in {op.inputs[0].memory_type} "
                                      f"memory; a TMemLoad reads a tensor-memory tensor")
    tensors = tmem_tensors(fusion)
    if not tensors:
        return
    names = ", ".join(t.name for t in tensors)
    if not st.target.has_tmem:
        raise UnsupportedSchedule(f"{names} in tensor memory, which needs sm_100a (tcgen05); {st.target.name} has none")
    for t in tensors:
        if t.is_fusion_output:
            raise UnsupportedSchedule(f"{t.name} is a fusion output in tensor memory; outputs are global tensors")
    for op in fusion.exprs:
        touched = [t.name for t in [op.output] + list(op.inputs) if t.memory_type is MemoryType.Tensor]
        if len(touched) > 1:
            raise UnsupportedSchedule(f"`{op}` touches tensor memory twice ({', '.join(touched)}); tensor memory "
                                      f"has no path to itself: go through a register (Local) tensor")


# -- accesses ----------------------------------------------------------------------------------


def lower_accesses(st) -> None:
    """Replace the statements that store into or load from tensor memory by TmemAccess nodes."""
    if not tmem_tensors(st.fusion):
        return
    # the access models the verifier proves, lanes and columns included
    models = tmem_access_models(st.fusion, block_dims(st.fusion), thread_dims(st.fusion), st.allocations)
    _, offsets, _ = column_plan(st)
    _place_tcgen05_mma(st, offsets)
    by_name = {t.name: t for t in st.order}
    builder = StatementBuilder(st.fusion, st.classes, st.allocations, st.globals, block_dims(st.fusion), st.answers,
                               target=st.target)
    for k, (_, stmt) in enumerate(st.statements):
        if not isinstance(stmt, Compute):
            continue  # a TMA copy
        tv = by_name.get(stmt.out.tensor)
        found = [m for m in models if m.acc.consumer is tv]
        if not found:
            continue
        if len(found) > 1:  # check_supported lets one op touch tensor memory once
            raise InternalError(f"{tv.name} has {len(found)} tensor-memory accesses")
        m = found[0]
        st.statements[k] = AccessLowering(st, builder, tv, m, offsets[m.acc.tensor.name]).build()


def _place_tcgen05_mma(st, offsets: dict[str, int]) -> None:
    """Each tcgen05.mma statement's accumulator at its tensor's first column in the allocation,
    and the mbarrier its commits arrive on (one tcgen05.commit, one arrival, per phase)."""
    for _, stmt in st.statements:
        if isinstance(stmt, MmaIssue) and stmt.frag.is_tcgen05:
            stmt.tmem_offset = offsets[stmt.out.tensor]
            bar = commit_barrier(stmt.out.tensor)
            if all(b.name != bar for b in st.mbarriers):
                st.mbarriers.append(MBarrier(bar, 1, stmt.out.tensor, commit=True))


class AccessLowering:
    """One TmemAccess from the verifier's AccessModel of one tensor-memory access."""

    def __init__(self, st, builder: StatementBuilder, tv: TensorView, m: AccessModel, column_offset: int):
        self.st, self.builder, self.tv, self.m = st, builder, tv, m
        self.column_offset = column_offset
        self.path = [st.classes.of(tv, k) for k in range(len(tv.loop))]
        self.env = {i.uid: const(0) if i.static_extent == 1 else var(c.index_var) for i, c in zip(tv.loop, self.path)}
        self.ranges = {c.index_var: i.extent_expr for i, c in zip(tv.loop, self.path)}
        for p, dim in zip(THREAD_TYPES, thread_dims(st.fusion)):  # thread indices the tensor does not bind
            self.ranges.setdefault(p.cuda_name, dim)
        # the verifier names a loop counter `T2.i7`; the kernel names its loop class `loop.i3`
        self.rename = {var_name(m.acc, i): self.env[i.uid] for i in tv.loop
                       if i.parallel_type not in THREAD_TYPES + BLOCK_TYPES}
        self.vector_positions = [k for k, i in enumerate(tv.loop) if i.parallel_type is ParallelType.Vectorize]

    @property
    def where(self) -> str:
        return f"the {self.m.describe} (issued by {self.tv.name})"

    def build(self) -> tuple[list, TmemAccess]:
        m, tv = self.m, self.tv
        decided, pattern = self.builder.answers.pattern(m.acc.key)
        if not decided:
            raise UnsupportedSchedule(f"no decision of tp.verify gives the tcgen05 pattern of {self.where} (it decides "
                                      f"when every rule runs); a warp-collective instruction cannot be predicated per lane")
        if pattern is None:
            raise UnsupportedSchedule(f"{self.where} has no proved warp-collective tcgen05 pattern of whole registers; "
                                      f"tp.compile lowers verified schedules only (run tp.verify for the reason)")
        regs = registers(m)
        if regs is None or regs % pattern.registers_per_repetition or not 1 <= regs <= 128:
            raise UnsupportedSchedule(f"{self.where} moves {m.num_regs} elements per thread; tcgen05 {pattern} "
                                      f"needs a constant multiple of {pattern.registers_per_repetition} registers up to 128")
        self._check_vector_loops()
        stmt = self.builder.statement(tv)  # operands at every loop index
        direction = m.acc.direction
        conds, data_conds, holes = self._split_conditions(stmt, direction)
        pk = packing(m)
        base = m.warp_base_env()
        lane = self._kernel_expr(substitute(m.addresses["lane"], base))
        column = self._kernel_expr(pk.word(substitute(m.addresses["column"], base)))
        elements = [self._element(stmt, v, data_conds + holes) for v in range(m.num_regs.value)]
        address = Operand(m.acc.tensor.name, MemoryType.Tensor, m.acc.tensor.dtype,
                          tmem_address(lane, add(column, self.column_offset)))
        first = elements[0].data  # like a vector Compute: operands at the first element
        if direction is Direction.STORE:
            out, ins = address, first.ins
        else:
            out, ins = first.out, [address if k == m.acc.input_index else o for k, o in enumerate(first.ins)]
        repeat = regs // pattern.registers_per_repetition
        packed_as = (f", {pk.per_word} {m.acc.tensor.dtype} per register" if pk.per_word > 1
                     else f", {pk.words} per {m.acc.tensor.dtype}" if pk.words > 1 else "")
        comment = (f"{stmt.comment}: tcgen05.{TCGEN05_OPS[direction]} {pattern} x{repeat} by whole warps, "
                   f"{regs} register{'s' if regs > 1 else ''} per thread{packed_as} "
                   f"(TMEM-ACCESS-PATTERN, TMEM-PACKING, TMEM-SUBPARTITION)")
        if holes:
            comment += (f"; run at the holes too, inside {m.acc.tensor.name}'s allocation (SPLIT-DIVISIBILITY), "
                        f"the {'registers stored' if direction is Direction.STORE else 'write-back'} predicated")
        access = TmemAccess(stmt.kind, stmt.name, out, ins, conds, regs, comment, stmt.scalar, direction=direction,
                            tensor=m.acc.tensor.name, pattern=pattern, repeat=repeat, lane=lane, column=column,
                            column_offset=self.column_offset, registers=regs, elements=elements,
                            data_conds=data_conds, tmem_input=m.acc.input_index)
        path = [c for k, c in enumerate(self.path) if k not in self.vector_positions]
        return path, access

    def _check_vector_loops(self) -> None:
        ids = [self.tv.loop[k] for k in self.vector_positions]
        if ids != list(self.m.vector_ids):
            raise InternalError(f"the vectorized IDs of {self.tv.name} differ from the verifier's access model")
        for k in self.vector_positions:
            cls = self.path[k]
            if len(cls.members) > 1:
                raise UnsupportedSchedule(
                    f"{self.tv.name}'s vectorized axis {k} shares a loop with {', '.join(cls.members)} through "
                    f"inlining; one tcgen05 instruction moves the whole vector, so inline {self.tv.name}'s "
                    f"consumers and producers left of it")
            if self.tv.loop[k].static_extent is None:
                raise UnsupportedSchedule(f"{self.tv.name}'s vectorized axis {k} has a symbolic extent")

    def _kernel_expr(self, e: Expr) -> Expr:
        """A verifier expression in the kernel's variables (loop counters renamed; threadIdx and
        blockIdx are the same names in both), simplified over the loop ranges."""
        return simplify(substitute(e, self.rename), self.ranges)

    def _vector_point(self, v: int) -> dict[int, Expr]:
        """Index of each vectorized loop ID (by loop position) at element v (model/indexing.py
        vector_point, the inverse of AccessModel.reg)."""
        extents = [self.tv.loop[k].extent_expr for k in self.vector_positions]
        return dict(zip(self.vector_positions, vector_point(v, extents)))

    def _element(self, stmt: Compute, v: int, data_conds: list[Cond]) -> TmemElement:
        m = self.m
        pk = packing(m)
        point = self._vector_point(v)
        in_model = {var_name(m.acc, self.tv.loop[k]): x for k, x in point.items()}
        in_kernel = {self.path[k].index_var: x for k, x in point.items()}
        lane = self._kernel_expr(substitute(m.addresses["lane"], in_model))
        column = self._kernel_expr(pk.word(substitute(m.addresses["column"], in_model)))
        cell = Operand(m.acc.tensor.name, MemoryType.Tensor, m.acc.tensor.dtype,
                       tmem_address(lane, add(column, self.column_offset)))

        def at(o: Operand) -> Operand:
            return Operand(o.tensor, o.memory, o.dtype, simplify(substitute(o.offset, in_kernel), self.ranges))

        conds = [Cond(simplify(substitute(c.lhs, in_kernel), self.ranges), c.op,
                      simplify(substitute(c.rhs, in_kernel), self.ranges), c.why) for c in data_conds]
        if m.acc.direction is Direction.STORE:  # conds: the holes only (_split_conditions)
            data = Compute(stmt.kind, stmt.name, cell, [at(o) for o in stmt.ins], conds, 1, stmt.comment, stmt.scalar)
        else:
            ins = [cell if k == m.acc.input_index else at(o) for k, o in enumerate(stmt.ins)]
            data = Compute(stmt.kind, stmt.name, at(stmt.out), ins, conds, 1, stmt.comment, stmt.scalar)
        return TmemElement(v, data, lane, column, try_int(pk.word(v)), try_int(pk.byte(v)))

    def _split_conditions(self, stmt: Compute, direction: Direction) -> tuple[list[Cond], list[Cond], list[Cond]]:
        """(instruction predicate, data predicate, hole bounds left out); see the module docstring."""
        launch = {p.cuda_name: d for p, d in block_dims(self.st.fusion).items()}
        for i in self.tv.loop:
            p = i.parallel_type
            if i.is_broadcast and (p in THREAD_TYPES or p in BLOCK_TYPES) and launch[p.cuda_name] != i.extent_expr:
                raise UnsupportedSchedule(
                    f"{self.tv.name}'s broadcast axis {i.label()} is bound to {p} (launched {launch[p.cuda_name]}): "
                    f"the verifier proved the tensor-memory access for {p.cuda_name} < 1 only; keep broadcast axes "
                    f"serial")
        conds = []
        for index, extent in self.m.active:  # warp-uniform: TMEM-WARP-COLLECTIVE
            if launch[index.value] != extent:
                kind = "thread" if index.value in THREAD_VAR_NAMES else "block"
                conds.append(Cond(index, "<", extent, f"{kind} extent, warp-uniform (TMEM-WARP-COLLECTIVE)"))
        vector_vars = {self.path[k].index_var for k in self.vector_positions}
        data, holes = [], []
        for c in stmt.conds:
            used = c.lhs.free_vars() | c.rhs.free_vars()
            if c.why == "thread extent":
                continue  # the model's extents above include these
            if c.why.startswith("hole"):
                holes.append(c)
            elif not used & (THREAD_VAR_NAMES | vector_vars):
                conds.append(c)  # loop counters and block indices are the same in the whole warp
            elif direction is Direction.LOAD:
                data.append(c)
            else:
                raise UnsupportedSchedule(
                    f"{self.where} is predicated by {c.lhs} {c.op} {c.rhs} ({c.why}), which differs between the "
                    f"threads of a warp; a tcgen05.st cannot leave some of a warp's registers out")
        return conds, data, holes


# -- allocation and fences -----------------------------------------------------------------


def column_plan(st) -> tuple[int, dict[str, int], dict[str, int]]:
    """(columns to allocate, first column of each tensor-memory tensor, the columns each owns). Each
    region (execution/tmem_regions.py: a fusion.manage("tmem_regions") list, or one tensor alone) is
    a block of its columns_allocated columns (a power of two >= 32, what TMEM-COLUMNS budgeted),
    its tensors one after another inside it; regions are placed largest first, so each starts at a
    multiple of its size."""
    regions = tmem_regions(st.fusion)
    sizes, inside, owned = [], {}, {}
    for region in regions:
        for a in region.allocations:
            cols = try_int(region.window(a.tensor.name))
            if cols is None or region.columns_allocated is None:
                raise UnsupportedSchedule(f"{a.tensor.name} needs {a.columns_expr} tensor-memory columns, "
                                          f"a symbolic count; tcgen05.alloc takes a constant: bind the sizes of its "
                                          f"column axes")
            inside[a.tensor.name], owned[a.tensor.name] = try_int(region.offset_expr(a.tensor.name)), cols
        sizes.append(region.columns_allocated)
    offsets, used = {}, 0
    for k in sorted(range(len(regions)), key=lambda k: -sizes[k]):
        for name in regions[k].names:
            offsets[name] = used + inside[name]
        used += sizes[k]
    total = max(st.target.tmem_min_alloc_columns, 1 << max(used - 1, 0).bit_length())
    if total > st.target.tmem_columns:
        each = ", ".join(f"{'+'.join(r.names)} {c}" for r, c in zip(regions, sizes))
        raise UnsupportedSchedule(f"the tensor-memory tensors need {used} columns together ({each}); "
                                  f"{st.target.name} has {st.target.tmem_columns}")
    return total, offsets, owned


def allocate_and_fence(st) -> None:
    tensors = tmem_tensors(st.fusion)
    if not tensors:
        return
    total, offsets, owned = column_plan(st)
    bx, by, bz = thread_dims(st.fusion)
    linear = add(var("threadIdx.x"), mul(var("threadIdx.y"), bx), mul(var("threadIdx.z"), bx, by))
    threads = try_int(mul(bx, by, bz))
    if threads is not None and threads < st.target.warp_size:
        raise UnsupportedSchedule(f"the block has {threads} threads; tcgen05.alloc needs a whole warp")
    _fence_barriers(st.tree)
    regions = [(t.name, offsets[t.name], owned[t.name]) for t in tensors]
    where = ", ".join(f"{n} columns {o}..{o + c - 1}" for n, o, c in regions)
    st.tree.insert(0, TmemAlloc(f"{where}; every thread reads the address",
                                columns=total, linear_thread=linear, regions=regions))
    st.tree.append(TmemDealloc("every warp's tensor-memory accesses are complete: free the columns",
                               columns=total, linear_thread=linear))


def _fence_barriers(nodes: list) -> None:
    """Every barrier of a kernel with tensor memory orders tcgen05 operations too (the fences
    cost nothing next to the barrier, and execution/nest.py placed them for tensor-memory hazards)."""
    for k, n in enumerate(nodes):
        if isinstance(n, Loop):
            _fence_barriers(n.body)
        elif type(n) is Sync:
            nodes[k] = TmemFencedSync(**{f.name: getattr(n, f.name) for f in fields(Sync)})
