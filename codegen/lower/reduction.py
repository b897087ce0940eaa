"""A reduction tensor's statements (model/reduction.py), in the order its steps run:

    init        ReduceInit: the accumulator's registers hold the neutral element
    accumulate  a Compute (kind REDUCTION) in the tensor's whole loop nest: acc[k] = combine(acc[k],
                input), predicated as the execution model says (thread extents, every hole)
    combine     BlockReduce, where reduction axes are bound to thread indices: no predicate, every
                thread of the block takes part
    grid        GridReduce, where reduction axes are bound to block indices: the partials through
                the workspace, the last block of each segment combines (execution/grid_reduction.py),
                or for an allreduce every block, after a grid-wide barrier (the kernel then launches
                cooperatively: KernelIR.cooperative); no predicate, every thread of every block
                takes part
    store       a Compute in loops of its own over the accumulator's axes: the tensor's element =
                acc[k] in its dtype, predicated by model/execution.py store_execution (a single
                writer along the reduced thread indices for shared and global tensors, and the
                last block along the reduced block indices)

The reductions of a group (tp.group_reductions, model/grouped_reduction.py) share one loop nest
(execution/loops.py: their loops are siblings' and their accumulations run together, every init
before those loops and every combine and store after them), and each member's steps are its own,
as nvFuser lowers a GroupedReductionOp's block and serial reductions. Their grid combines form one
round (execution/grid_reduction.py grid_round, nvFuser's GroupedGridReduction): each member's
GridReduce names the round leader's semaphores and last-block flag, and the pass `grid-rounds`
(combine_rounds, after the nest) joins the members' adjacent GridReduce nodes into one
GroupedGridReduce: every member's partials, one count (or one grid barrier), one last block that
combines each member. REDUCTION-GROUP's condition is checked here as the verifier checks it.

A Welford's three outputs (model/welford.py) are such a group with one accumulator: registers of
states (Buffer.welford_count, tp_welford_state<T, C>), which the group's first computed member
(execution/reduction.py welford_leader) starts empty, updates with each element (or combines
with each partial state after an rfactor) and combines across the block (BlockReduce "welford");
its siblings' init, update and combine are SiblingSteps, and each member stores its field of the
state (Operand.field). Over block indices (a grid Welford) the leader's GridReduce writes each
field's partials to a workspace of its own (execution/grid_reduction.py welford_work_names: avg,
M2, N at the same slots), counts the block on its semaphore, and the last block combines the
states by Chan's formula; the siblings' grid combine is a SiblingStep and their stores test the
leader's last block (their round's).

Init, combine and store sit just outside the loop of the tensor's first reduction axis, so the
loops left of it (shared with other tensors) run them once per element of those axes. Indices
and predicates come from the execution model only, as for every other statement.
"""

from __future__ import annotations

from dataclasses import replace

from ...execution.online import delta_name, rescaled_sums
from ...execution.statements import Cond, CondKind, store_execution
from ...model.online import online_max
from ...model.mma_op import is_tcgen05_op
from ...model.expr import const, try_int, var
from ...execution.indexing import vector_index
from ...execution.problems import Problem
from ...model.reduction import COMBINE
from ...execution.reduction import ReductionLoops, combines_in_shared, reduction_loops, welford_leader
from ...execution.indexing import thread_dims
from ...execution.conditions.reduction import (accumulator_problems, grid_problems, group_problems, parallel_problems,
                                               unsupported_reductions)
from ...execution.grid_reduction import (entrance_loops, grid_layout, grid_round, is_allreduce, last_block_name,
                                          round_leader, semaphores_name, welford_work_names, work_name)
from ...model.errors import InternalError
from ...execution.reduction import grid_reductions
from ...model.simplify import simplify
from ...execution.smem_plan import SCRATCH
from ...model.tensor import TensorView
from ...model.welford import STATE_FIELDS, is_welford
from ...model.types import THREAD_TYPES, MemoryType, OpKind, ParallelType, int8
from ..ir import (BlockReduce, Buffer, Compute, GridReduce, GroupedGridReduce, Loop, LoopKind, Operand, Param,
                  ParamKind, ReduceInit, SiblingStep, WholeTile, walk)
from ...execution.predicates import store_names as store_index_names
from .loop_nest import LoopClass, refuse


def accumulator(tv: TensorView) -> str:
    """The C++ name of tv's accumulator registers."""
    return f"tp_acc_{tv.name}"


def check(fusion, order) -> None:
    """The reduction rules' conditions (verifier/rules/reduction.py); a problem here is a bug."""
    for code, problems in (("REDUCTION-PARALLEL", parallel_problems(fusion, order)),
                           ("REDUCTION-GRID", grid_problems(fusion, order)),
                           ("REDUCTION-ACCUMULATOR", accumulator_problems(fusion, order)),
                           ("REDUCTION-GROUP", group_problems(fusion, order)),
                           ("LOWERING-SUPPORTED", unsupported_reductions(fusion, order))):
        refuse(code, problems)


def buffers(order, smem, allocations) -> list[Buffer]:
    """Each reduction's accumulator (registers of its compute type), an online max's growth per
    element (execution/online.py delta_name, beside its registers) and the block reductions'
    shared scratch (the smem plan's SCRATCH)."""
    out = []
    for tv in order:
        if is_welford(tv) and welford_leader(tv) is tv:  # one state per register for the group's three outputs
            r = reduction_loops(tv)
            out.append(Buffer(accumulator(tv), MemoryType.Local, r.dtype, r.elements, welford_count=r.count_dtype))
        elif tv.definition.kind is OpKind.REDUCTION and not is_welford(tv) and not is_tcgen05_op(tv.definition):
            r = reduction_loops(tv)
            out.append(Buffer(accumulator(tv), MemoryType.Local, r.dtype, r.elements))
        if tv.online is not None:
            out.append(Buffer(delta_name(tv), MemoryType.Local, tv.dtype, allocations[tv.name].num_elements_expr))
    if SCRATCH in smem.buffers:
        b = smem.buffers[SCRATCH]
        out.append(Buffer(SCRATCH, MemoryType.Shared, int8, b.bytes, b.offset))  # bytes, cast where used
    return out


def _scratch(r: ReductionLoops) -> str | None:
    """The shared scratch r's block combine uses, or None where it is shuffles only."""
    return SCRATCH if combines_in_shared(r, thread_dims(r.tensor.fusion)) else None


def statements(builder, tv: TensorView) -> list[tuple[list[LoopClass], object]]:
    """tv's steps, each with the loop classes it is nested in (builder: lower/statements.py's)."""
    r = reduction_loops(tv)
    path = [builder.classes.of(tv, k) for k in range(len(tv.loop))]
    outer = path[:r.start]
    acc = accumulator(tv)
    n = try_int(r.elements)
    if n is None:  # REDUCTION-ACCUMULATOR rejects it
        refuse("REDUCTION-ACCUMULATOR", [Problem(f"{tv.name}'s accumulator has a symbolic size", hint="")])
    if is_welford(tv):
        return _welford_statements(builder, tv, r, path, n)
    out: list[tuple[list[LoopClass], object]] = [
        (outer, ReduceInit(acc, n, r.dtype, r.neutral, f"{tv.name}: {r.op_name} starts at {r.neutral}"))]
    if r.online:  # and the max so far, before the first iteration: the first delta is +inf
        size = try_int(builder.allocations[tv.name].num_elements_expr)
        both = [out[0][1], ReduceInit(tv.name, size, tv.dtype, r.neutral, f"{tv.name}: the online max starts at {r.neutral}")]
        out[0] = (outer, _once(tv, "init", both))
    out.append((path, _accumulate(builder, tv, r, acc)))
    if r.threads:
        reduced = tuple(p in r.threads for p in THREAD_TYPES)
        out.append((outer, BlockReduce(acc, n, r.dtype, COMBINE[r.op_name], reduced, _scratch(r),
                                       f"{tv.name}: the block's threads combine over "
                                       f"{', '.join(p.value for p in r.threads)}")))
    if r.blocks:
        out.append((outer, _grid_combine(builder, tv, r, acc, n, path)))
    out.append((path[:r.start + 1] if r.online else outer, _store(builder, tv, r, acc)))
    return out


def _welford_statements(builder, tv: TensorView, r: ReductionLoops, path: list, n: int) -> list:
    """A Welford output's steps (model/welford.py): its group's leader (welford_leader) starts the
    states empty, updates them with each element (or combines each partial state, after an
    rfactor) and combines the block's threads' states; a sibling's steps there are the leader's
    (SiblingStep). Each stores its field of the state."""
    leader = welford_leader(tv)
    acc, outer = accumulator(leader), path[:r.start]
    if leader is tv:
        steps = [(outer, ReduceInit(acc, n, r.dtype, 0.0, f"{tv.name}: the Welford states start empty (avg, M2, N = 0)",
                                    welford_count=r.count_dtype)),
                 (path, _accumulate(builder, tv, r, acc))]
        if r.threads:
            steps.append((outer, BlockReduce(acc, n, r.dtype, "welford", tuple(p in r.threads for p in THREAD_TYPES),
                                             _scratch(r), f"{tv.name}: the block's threads combine their Welford states "
                                                      f"(Chan's formula) over {', '.join(p.value for p in r.threads)}",
                                             welford_count=r.count_dtype)))
        if r.blocks:
            steps.append((outer, _grid_combine(builder, tv, r, acc, n, path)))
    else:
        done = f"done by {leader.name}'s, on the state the Welford outputs share"
        steps = [(outer, SiblingStep(f"{tv.name}'s init: {done}")), (path, SiblingStep(f"{tv.name}'s update: {done}"))]
        if r.threads:
            steps.append((outer, SiblingStep(f"{tv.name}'s block combine: {done}")))
        if r.blocks:
            steps.append((outer, SiblingStep(f"{tv.name}'s grid combine: {done}")))
    return steps + [(outer, _store(builder, tv, r, acc))]


def _grid_combine(builder, tv: TensorView, r: ReductionLoops, acc: str, n: int, path: list) -> GridReduce:
    """The grid combine of execution/grid_reduction.py at this statement's loop counters."""
    env = {i.uid: var(path[k].index_var) for k, i in enumerate(tv.loop)}
    for uid, extent in entrance_loops(r):  # the layout counts entrances by tv's loop extents: its loops' own
        k = next(k for k, i in enumerate(tv.loop) if i.uid == uid)
        if path[k].extent != extent:
            refuse("REDUCTION-GRID", [Problem(f"{tv.name}'s loop {k} runs {path[k].extent} times, its axis "
                                              f"{extent}", hint="")])
    g = grid_layout(r, builder.launch, env)
    leader = round_leader(tv).name  # a round's members share its leader's semaphores and last block
    welford, allreduce = is_welford(tv), is_allreduce(tv)
    over = ", ".join(p.value for p in r.blocks)
    what = f"their Welford states over {over} (Chan's formula)" if welford else f"over {over}"
    comment = (f"{tv.name}: the blocks combine {what} after a grid-wide barrier; every block holds the total (an "
               f"allreduce)" if allreduce else f"{tv.name}: the blocks combine {what}; the last to arrive holds the total")
    # an allreduce's blocks all combine: no last block, whose index a single writer would compare with
    last = [] if allreduce else \
        [(last_block_name(tv, p), p.cuda_name, _grid_dim(p)) for p in r.blocks if p in builder.launch]
    works = welford_work_names(leader) if welford else (work_name(tv.name),)
    return GridReduce(acc, n, r.dtype, "welford" if welford else COMBINE[r.op_name], 0.0 if welford else r.neutral,
                      tuple(p in r.threads for p in THREAD_TYPES), SCRATCH if r.threads else None, works[0],
                      semaphores_name(leader), g.slot, g.first, g.stride, g.ranks, g.semaphore,
                      [Cond(var(name), "==", value, "a writer of the partials") for name, value in g.writer],
                      g.reducer, g.reducers, f"tp_grid_last_{leader}", last, comment, allreduce=allreduce,
                      rank=g.rank if allreduce else None, welford_count=r.count_dtype if welford else None,
                      welford_work=works if welford else ())


def _grid_dim(p: ParallelType) -> str:
    return p.cuda_name.replace("blockIdx", "gridDim")


def cooperative(order) -> bool:
    """Whether the kernel has a grid-wide barrier (an allreduce's), whose blocks must all be resident."""
    return any(is_allreduce(r.tensor) for r in grid_reductions(order))


def workspace_params(order, launch: dict) -> list[Param]:
    """A grid reduction's workspace and semaphores (kernel parameters the runtime allocates),
    sized by execution/grid_reduction.py at the statement's default loop names; a round's
    members each have a workspace, its leader the semaphores."""
    out = []
    for r in grid_reductions(order):
        g = grid_layout(r, launch, {uid: var(f"entrance {k}") for k, (uid, _) in enumerate(entrance_loops(r))})
        name = r.tensor.name
        if is_welford(r.tensor):  # the leader's three workspaces (avg, M2, N) hold every sibling's partials
            if welford_leader(r.tensor) is not r.tensor:
                continue
            for work, dtype in zip(welford_work_names(name), (r.dtype, r.dtype, r.count_dtype)):
                out.append(Param(work, ParamKind.WORKSPACE, "", tensor=name, elements=g.work_elements, dtype=dtype))
        else:
            out.append(Param(work_name(name), ParamKind.WORKSPACE, "", tensor=name,
                             elements=g.work_elements, dtype=r.dtype))
        if round_leader(r.tensor).name == name:
            out.append(Param(semaphores_name(name), ParamKind.SEMAPHORES, "unsigned*", tensor=name,
                             elements=g.semaphore_count))
    return out


def combine_rounds(st) -> None:
    """The pass `grid-rounds`: in the lowered tree (st.tree), the GridReduce nodes of each round of two
    or more members (execution/grid_reduction.py grid_round), adjacent in one body (the nest holds a
    group's grid combines together, REDUCTION-GRID checks it) and naming the leader's semaphores,
    joined into one GroupedGridReduce. A round found apart or incomplete is a tileproof bug."""
    rounds = {semaphores_name(t.name): grid_round(t) for t in st.order if len(grid_round(t)) > 1
              and round_leader(t).name == t.name and not is_welford(t)}  # a Welford's: one GridReduce already
    if not rounds:
        return

    def join(nodes: list) -> list:
        out: list = []
        for n in nodes:
            if hasattr(n, "body") and not isinstance(n, WholeTile):
                n.body = join(n.body)
            if isinstance(n, GridReduce) and n.semaphores in rounds:
                last = out[-1] if out else None
                if isinstance(last, GroupedGridReduce) and last.members[0].semaphores == n.semaphores:
                    last.members.append(n)
                else:
                    out.append(GroupedGridReduce([n]))
                continue
            out.append(n)
        return out

    st.tree = join(st.tree)
    joined = [n for n in walk(st.tree) if isinstance(n, GroupedGridReduce)]
    for sems, members in rounds.items():
        found = [sorted(m.acc for m in n.members) for n in joined if n.members[0].semaphores == sems]
        want = sorted(accumulator(t) for t in members)  # in the nest's order, which need not be the group's
        if found != [want]:
            raise InternalError(f"the grid round of {', '.join(t.name for t in members)} is lowered as {found}")
    for n in joined:
        first = n.members[0]
        if any(str((m.semaphore, m.ranks, m.writer)) != str((first.semaphore, first.ranks, first.writer))
               for m in n.members):
            raise InternalError(f"the members of the grid round {first.semaphores} count on different semaphores")
        how = ("one grid-wide barrier; every block holds each total" if n.allreduce
               else "one semaphore; the last block to arrive holds each total")
        n.comment = f"{', '.join(m.acc for m in n.members)}: one grid round (nvFuser's GroupedGridReduction), {how}"


def _accumulate(builder, tv: TensorView, r: ReductionLoops, acc: str) -> Compute:
    ex = builder.execution(tv)
    ranges = ex.guarded_ranges
    register = vector_index([ex.env[i.uid] for i in r.accumulator], [i.extent_expr for i in r.accumulator])
    out = Operand(acc, MemoryType.Local, r.dtype, simplify(register, ranges))
    op = tv.definition
    ins = [builder._operand(p, ex.operand_indices(k), ranges) for k, p in enumerate(op.inputs)]
    conds = ex.conds_of(CondKind.THREAD_EXTENT) + builder.holes(ex, ranges)
    rescaled = rescaled_sums(tv.fusion).get(tv.name)
    if online_max(tv) is not None:
        if rescaled is None:  # ONLINE-RESCALE rejects it
            refuse("ONLINE-RESCALE", [Problem(f"{tv.name} is rescaled without a proved form", hint="")])
        ins[1] = replace(ins[1], tensor=delta_name(rescaled.max))  # the max's growth, where the term reads the max
        return Compute(OpKind.REDUCTION, op.name, out, ins, conds, 1,
                       f"{str(op)}: at the new max first (x exp2({rescaled.coefficient:g} delta))",
                       rescale=rescaled.coefficient)
    return Compute(OpKind.REDUCTION, op.name, out, ins, conds, 1, str(op))


def _store(builder, tv: TensorView, r: ReductionLoops, acc: str):
    """T's elements from the accumulator, in loops of their own over its axes."""
    names, private = store_names(builder, tv, r.accumulator)
    ex = store_execution(tv, builder.launch, names)
    ranges = ex.guarded_ranges
    register = vector_index([var(private[i.uid]) for i in r.accumulator], [i.extent_expr for i in r.accumulator])
    field = STATE_FIELDS.get(tv.definition.name, "")  # a Welford output: its field of the state (the count's own type)
    source = Operand(acc, MemoryType.Local, r.count_dtype if field == "n" else r.dtype, simplify(register, ranges),
                     field=field)
    loops = [(private[i.uid], i.extent_expr, f"{tv.name} {i.label()} (store)") for i in r.accumulator]
    if not r.online:
        return store_statement(builder, tv, ex, ranges, source, f"{tv.name} = the {r.op_name} (after its loops)", loops)
    # an online max: its growth first (the rescaled sums read it), then the max so far
    target = builder._operand(tv, ex.indices, ranges)
    node: object = [Compute(OpKind.BINARY, "online_delta", replace(target, tensor=delta_name(tv)), [source, target],
                            store_conds(builder, ex, ranges), 1, f"{tv.name}: how much the max grew this iteration"),
                    store_statement(builder, tv, ex, ranges, source, f"{tv.name} = the max so far", [])]
    for counter, extent, label in reversed(loops):
        node = [Loop(counter, extent, LoopKind.UNROLL, label, -1, node)]
    return node[0] if len(node) == 1 else _once(tv, "store", node)


def _once(tv: TensorView, what: str, body: list) -> Loop:
    """Statements that are one step of tv's (an online max's init and store): a loop of one."""
    return Loop(f"tp_{what}_{tv.name}", const(1), LoopKind.UNROLL, f"{tv.name} {what}", -1, body)


def store_names(builder, tv: TensorView, axes) -> tuple[dict[int, str], dict[int, str]]:
    """The index names of tv's store from its accumulator (execution/predicates.py store_names):
    its loop classes' and, for `axes`, counters of its own. Returns (all names, those counters)."""
    names = {i.uid: builder.classes.of(tv, k).index_var for k, i in enumerate(tv.loop)}
    return store_index_names(tv, names, axes)


def store_conds(builder, ex, ranges) -> list:
    """The predicates of a store from the accumulator at the point `ex`, as emitted."""
    return ex.conds_of(CondKind.THREAD_EXTENT) + builder.holes(ex, ranges) + ex.conds_of(CondKind.SINGLE_WRITER)


def store_statement(builder, tv: TensorView, ex, ranges, source: Operand, comment: str, loops,
                    vector: int = 1) -> object:
    """tv's element at the point `ex` = `source` (an accumulator register, rounded to tv's dtype),
    predicated as the store execution says, in unrolled `loops` ((counter, extent, label),
    outermost first); `vector` consecutive elements of both at once where the caller proved so."""
    target = builder._operand(tv, ex.indices, ranges)
    kind, name = (OpKind.LOAD_STORE, "set") if tv.dtype == source.dtype else (OpKind.CAST, "cast")
    node: object = Compute(kind, name, target, [source], store_conds(builder, ex, ranges), vector, comment)
    for counter, extent, label in reversed(loops):
        node = Loop(counter, extent, LoopKind.UNROLL, label, -1, [node])
    return node


__all__ = ["accumulator", "buffers", "check", "combine_rounds", "cooperative", "statements", "store_conds", "store_names",
           "store_statement",
           "workspace_params"]
