"""Lowering an MmaOp on the tensor cores (model/mma_op.py) to its statements, in the order they run:

    init        ReduceInit: the accumulator's registers are 0, before D's first K loop
    accumulate  MmaIssue at every point of D's loop nest but its three Mma axes: the warp issues
                the macro tile's mma.sync instructions, each lane supplying the A and B registers
                its fragments hold (mma_execution's A and B views)
    store       a Compute per accumulator element, in loops of their own over the accumulator's
                axes and the C fragment's elements: D at lane threadIdx.x's element v of the C
                view = acc[...]

The operands' register offsets come from the execution model only (MMA-OPERAND-LAYOUT proved
the lane that wrote each one is the lane that supplies it). An offset the simplifier shows is the
same for every lane is emitted as a constant register index; another keeps threadIdx.x in it
(correct, but the registers then live in local memory). Predicates: the warp-uniform ones guard the
instruction; a hole of the M or N axis inside the tile only makes rows or columns the store
skips; a hole of the K axis would add what the registers past K hold, which REDUCTION-K
rejects.

A tcgen05.mma (a Blackwell1CTA macro) is its accumulate step alone: thread 0 of the block issues
it on both operands' shared-memory descriptors into D's columns in tensor memory, the first K step
without adding (enable-input-d 0) in place of an init, and its readers load D from tensor memory
themselves (TMemLoad, codegen/lower/tmem.py); the commit and the wait after it are the placed
nest's (execution/tcgen05_order.py).
"""

from __future__ import annotations

from dataclasses import replace

from ...execution.online import delta_name, rescale_conds, rescale_indices, rescaled_sums
from ...execution.statements import CondKind
from ...model.expr import const, substitute, try_int, var
from ...execution.problems import Problem
from ...model.mma_op import ELEMENT_VARS, INSTRUCTION_AXES, LANE, is_mma
from ...model.online import rescaled_in_place
from ...execution.mma import fragments, mma_axes
from ...execution.mma_execution import lane_vars, mma_execution, split_lanes, tile_conds
from ...execution.reduction import reduction_loops
from ...model.simplify import simplify
from ...model.tensor import TensorView
from ...model.types import BLOCK_TYPES, THREAD_TYPES, MemoryType, OpKind, float32
from ...execution.tcgen05 import accumulator_cells, instruction_descriptor
from ...hw.tcgen05 import SM100_SWIZZLE_MODE
from ...execution.wgmma_operands import wgmma_operand
from ..ir import Compute, Loop, LoopKind, MmaIssue, Operand, ReduceInit, WgmmaDescriptor
from ...execution.predicates import mma_element_var, mma_pair_var, mma_store_axes, mma_store_pairs, pair_claims
from .loop_nest import LoopClass, refuse
from .reduction import accumulator, store_conds, store_names, store_statement
from ...execution.conditions.mma import problems
from ...execution.indexing import vector_index


def check(fusion, order, target) -> None:
    """The MMA rules' structural conditions (verifier/rules/mma.py); a problem here is a bug."""
    for code, found in problems(fusion, order, target).items():
        refuse(code, found)


def statements(builder, tv: TensorView) -> list[tuple[list[LoopClass], object]]:
    r, acc_axes = reduction_loops(tv), mma_store_axes(tv)
    frag = fragments(tv)
    loops = len(tv.loop) - INSTRUCTION_AXES
    path = [builder.classes.of(tv, k) for k in range(loops)]
    if frag.is_tcgen05:  # the accumulation is the one step: D in tensor memory, no init, no store
        return [(path, _tcgen05_issue(builder, tv))]
    start = min(r.start, loops)
    n = try_int(r.elements)
    acc = accumulator(tv)
    init = ReduceInit(acc, n, float32, 0.0, f"{tv.name}: the accumulators start at 0", pinned=frag.is_wgmma)
    steps = [(path[:start], init)]
    if rescaled_in_place(tv):  # each iteration of the online max's loop, before its products
        steps.append((path[:start + 1], _rescale(builder, tv, acc_axes, acc)))
    return steps + [(path, _issue(builder, tv, acc_axes, acc)), (path[:start], _store(builder, tv, acc_axes, acc))]


def _tile_register(env_of, acc_axes, per_tile: int):
    """The accumulator register of element 0 of the current macro tile."""
    return vector_index([env_of(i) for i in acc_axes], [i.extent_expr for i in acc_axes]) * per_tile


def _issue(builder, tv: TensorView, acc_axes, acc: str) -> MmaIssue:
    frag = fragments(tv)
    op = tv.definition
    plain = builder.execution(tv)
    ranges = plain.guarded_ranges
    lane_uniform = _split_conds(builder, tv, plain)
    operands, descriptors = [], []
    names = {i.uid: builder.classes.of(tv, j).index_var for j, i in enumerate(tv.loop)}
    for k, role in ((0, "A"), (1, "B")):
        ex = mma_execution(tv, builder.launch, role, names)
        view_ranges = {**ranges, **ex.ranges}
        regs = []
        shared = frag.in_shared(role)
        if shared:  # wgmma: the descriptor names the tile; element 0 tells barriers what it reads
            d = wgmma_operand(tv, builder.launch, role, names)
            descriptors.append(WgmmaDescriptor(op.inputs[k].name, simplify(d.start, view_ranges), d.lbo, d.sbo,
                                               d.swizzle.value, d.major))
        for v in range(1 if shared else frag.elements(role)):
            idx = {u: substitute(e, {ELEMENT_VARS[role]: const(v)}) for u, e in ex.operand_indices(k).items()}
            regs.append(_lane_uniform(builder._operand(op.inputs[k], idx, view_ranges), view_ranges, frag.inst.threads,
                                        builder.launch))
        operands.append(regs)
    base = simplify(_tile_register(lambda i: plain.env[i.uid], acc_axes, frag.elements("C")), ranges)
    out = Operand(acc, MemoryType.Local, float32, base)
    comment = (f"{tv.name} += {op.inputs[0].name} x {op.inputs[1].name}: one {op.macro.name} tile, "
               f"{frag.k_steps * frag.n_steps} x {frag.inst.ptx}")
    return MmaIssue(OpKind.REDUCTION, op.name, out, [operands[0][0], operands[1][0]], lane_uniform, 1, comment,
                    None, frag, operands[0], operands[1], op.tf32_rounding, tuple(descriptors))


def _tcgen05_issue(builder, tv: TensorView) -> MmaIssue:
    """One tcgen05.mma tile: issued by the block's thread 0 (the emitter adds that predicate, and
    the commit after the batch is that thread's too: execution/tcgen05_order.py), its operands'
    descriptors (execution/wgmma_operands.py, proved by TCGEN05-SMEM-LAYOUT), D's column at this
    instance (execution/tcgen05.py, proved by TCGEN05-ACCUMULATOR), the instruction descriptor
    and the K loops' indices (enable-input-d: 0 at the first K step)."""
    frag = fragments(tv)
    op = tv.definition
    plain = builder.execution(tv)
    ranges = plain.guarded_ranges
    uniform = _split_conds(builder, tv, plain)
    names = {i.uid: builder.classes.of(tv, j).index_var for j, i in enumerate(tv.loop)}
    operands, descriptors = [], []
    for k, role in ((0, "A"), (1, "B")):
        d = wgmma_operand(tv, builder.launch, role, names)
        view_ranges = {**ranges, **d.ex.ranges}
        descriptors.append(WgmmaDescriptor(op.inputs[k].name, simplify(d.start, view_ranges), d.lbo, d.sbo,
                                           d.swizzle.value, d.major, SM100_SWIZZLE_MODE[d.swizzle.value]))
        idx = {u: substitute(e, {ELEMENT_VARS[role]: const(0)}) for u, e in d.ex.operand_indices(k).items()}
        operands.append(builder._operand(op.inputs[k], idx, view_ranges))
    idesc = instruction_descriptor(tv, (descriptors[0].major, descriptors[1].major)).encode()
    cells = accumulator_cells(tv, builder.launch, names)
    out = Operand(tv.name, MemoryType.Tensor, float32, simplify(cells.first_column, ranges))
    k_indices = tuple(plain.env[i.uid] for i in tv.loop[:len(tv.loop) - INSTRUCTION_AXES]
                      if i.is_reduction and i.parallel_type not in THREAD_TYPES + BLOCK_TYPES
                      and plain.env[i.uid].op == "var")
    comment = (f"{tv.name} {'+' if k_indices else ''}= {op.inputs[0].name} x {op.inputs[1].name}: one {op.macro.name} "
               f"tile, {frag.k_steps * frag.n_steps} x {frag.inst.ptx} by one thread, D in tensor memory "
               f"(TCGEN05-SMEM-LAYOUT, TCGEN05-ACCUMULATOR)")
    return MmaIssue(OpKind.REDUCTION, op.name, out, operands, uniform, 1, comment, None, frag, operands[:1],
                    operands[1:], None, tuple(descriptors), idesc=idesc, k_indices=k_indices)


def _split_conds(builder, tv: TensorView, plain) -> list:
    """D's predicates at the accumulate (model/mma_op.py tile_conds), split: those the whole warp
    shares are returned, the instruction's guard; a hole of the K tile not implied by the ranges
    and assumptions is refused (REDUCTION-K: what lies past K would be added). A hole of the M or N tile
    guards the tile by its first row or column where the index grows with the tile's own: a
    tile wholly past M or N (a block of the last group past M) stores nothing, so it issues
    nothing either. wgmma is guarded by the block tile's first row or column instead (every
    thread index at 0 too): a guard that varies by warpgroup makes ptxas serialize every wgmma
    (C7520), one the whole block shares does not."""
    holes = builder.holes(plain, plain.guarded_ranges)
    uniform, k_holes = tile_conds(tv, plain, plain.conds_of(CondKind.THREAD_EXTENT) + holes)
    if k_holes:
        refuse("REDUCTION-K", [Problem(f"{tv.name}'s K tile reads past K where {k_holes[0].lhs} < {k_holes[0].rhs} "
                                       f"fails", hint="")])
    axes = mma_axes(tv)
    first = {}
    for role in ("M", "N"):
        e = plain.env[axes.of(role).uid]
        if e.op == "var":
            first[e.value] = const(0)
    if fragments(tv).is_wgmma or fragments(tv).is_tcgen05:
        first.update({p.cuda_name: const(0) for p in THREAD_TYPES})
    for c in holes:
        used = (c.lhs.free_vars() | c.rhs.free_vars()) & set(first)
        if used and c.op == "<" and not (c.rhs.free_vars() & set(first)) and all(_grows_in(c.lhs, v) for v in used):
            uniform.append(c.renamed(first))
    return uniform


def _grows_in(e, name: str) -> bool:
    """e is a sum in which `name` appears only as a term, alone or times a non-negative constant:
    its smallest value over the tile is at name = 0."""
    if name not in e.free_vars():
        return True
    if e.op == "var":
        return True
    if e.op == "add":
        return all(_grows_in(a, name) for a in e.args)
    if e.op == "mul":
        consts = [a for a in e.args if a.op == "const"]
        rest = [a for a in e.args if a.op != "const"]
        return len(rest) == 1 and rest[0].op == "var" and all(a.value >= 0 for a in consts)
    return False


def _lane_uniform(o: Operand, ranges, threads: int, launch: dict) -> Operand:
    """o with the lane made a constant where the offset of every one of the instruction's
    `threads` (a warp's lanes, a warpgroup's threads) simplifies to one expression."""
    names = lane_vars(launch, threads)
    if not (set(names) & o.offset.free_vars()) or o.memory is not MemoryType.Local:
        return o
    bdx = split_lanes(launch, threads) or threads

    def at(t: int) -> dict:
        return {LANE.cuda_name: const(t % bdx)} if len(names) == 1 else \
            {LANE.cuda_name: const(t % bdx), names[1]: const(t // bdx)}
    offsets = {simplify(substitute(o.offset, at(t)), ranges) for t in range(threads)}
    if len(offsets) == 1:
        return Operand(o.tensor, o.memory, o.dtype, offsets.pop())
    return o


def _store(builder, tv: TensorView, acc_axes, acc: str):
    """D's elements from the accumulator: loops over the accumulator's axes and the C fragment,
    two elements at a time where they are adjacent in D (_pairs)."""
    frag = fragments(tv)
    names, private = store_names(builder, tv, acc_axes)
    base = _tile_register(lambda i: var(private[i.uid]), acc_axes, frag.elements("C"))
    loops = [(private[i.uid], i.extent_expr, f"{tv.name} {i.label()} (store)") for i in acc_axes]
    plain = mma_execution(tv, builder.launch, "C", names)
    element = mma_element_var(tv)
    ex = plain.renamed({ELEMENT_VARS["C"]: var(element)})
    ranges = {**ex.guarded_ranges, element: const(frag.elements("C"))}
    paired = _pairs(builder, tv, plain, frag.elements("C"))
    if paired is not None:
        ex, ranges, pair = paired
        source = Operand(acc, MemoryType.Local, float32, simplify(base + const(2) * var(pair), ranges))
        loops.append((pair, const(frag.elements("C") // 2), f"{tv.name} C fragment pair (store)"))
        return store_statement(builder, tv, ex, ranges, source, f"{tv.name} = the accumulators (C fragment, "
                               f"two adjacent elements a store)", loops, vector=2)
    source = Operand(acc, MemoryType.Local, float32, simplify(base + var(element), ranges))
    loops.append((element, const(frag.elements("C")), f"{tv.name} C fragment element (store)"))
    return store_statement(builder, tv, ex, ranges, source, f"{tv.name} = the accumulators (C fragment)", loops)


def _rescale(builder, tv: TensorView, acc_axes, acc: str):
    """An MmaOp an online max rescales (execution/online.py): each accumulator element of the lane,
    in loops over the accumulator's axes and the C fragment as the store's, times exp2(a delta)
    with delta the max's growth at the element's row (rescale_map), where the store would store it
    (rows past M hold values nothing reads, and no max was stored for them)."""
    rescaled = rescaled_sums(tv.fusion).get(tv.name)
    if rescaled is None:  # ONLINE-RESCALE rejects it
        refuse("ONLINE-RESCALE", [Problem(f"{tv.name} is rescaled without a proved form", hint="")])
    frag = fragments(tv)
    names, private = store_names(builder, tv, acc_axes)
    base = _tile_register(lambda i: var(private[i.uid]), acc_axes, frag.elements("C"))
    element = mma_element_var(tv)
    ex = mma_execution(tv, builder.launch, "C", names).renamed({ELEMENT_VARS["C"]: var(element)})
    ranges = {**ex.guarded_ranges, element: const(frag.elements("C"))}
    register = Operand(acc, MemoryType.Local, float32, simplify(base + var(element), ranges))
    m = rescaled.max
    delta = builder._operand(m, rescale_indices(tv, ex), ranges)
    conds = rescale_conds(tv, ex, store_conds(builder, ex, ranges))
    node: object = Compute(OpKind.BINARY, "rescale", register, [register, replace(delta, tensor=delta_name(m))], conds, 1,
                           f"{tv.name}: its accumulators at {m.name}'s new max (x exp2({rescaled.coefficient:g} delta))",
                           rescale=rescaled.coefficient)
    loops = [(private[i.uid], i.extent_expr, f"{tv.name} {i.label()} (rescale)") for i in acc_axes]
    loops.append((element, const(frag.elements("C")), f"{tv.name} C fragment element (rescale)"))
    for counter, extent, label in reversed(loops):
        node = Loop(counter, extent, LoopKind.UNROLL, label, -1, [node])
    return node


def _pairs(builder, tv: TensorView, plain, elements: int):
    """(the store at elements 2p, its ranges, p's name) where each even C element and the next are
    adjacent in D with the same predicates and D's offset of the even one is even for every
    admitted size (verify proved both: execution/predicates.py pair_claims), so the pair is one
    aligned 2-element access; None otherwise. mma.sync's C fragment gives a lane columns 2q and
    2q + 1 of a row."""
    if tv.memory_type is not MemoryType.Global or elements % 2:
        return None
    pair = mma_pair_var(tv)
    at, ranges = mma_store_pairs(plain, pair, elements)
    first, second = (builder._operand(tv, x.indices, ranges).offset for x in at)
    if store_conds(builder, at[0], ranges) != store_conds(builder, at[1], ranges):
        return None
    if not all(builder.answers.proved(claim) for claim in pair_claims(first, second, ranges)):
        return None
    return at[0], ranges, pair


__all__ = ["check", "is_mma", "statements"]
