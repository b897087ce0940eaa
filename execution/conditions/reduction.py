"""What a reduction needs to be lowered (REDUCTION-PARALLEL, REDUCTION-GRID, REDUCTION-ACCUMULATOR,
REDUCTION-GROUP, and LOWERING-SUPPORTED through lowering.py): reduction axes on loops, a block's threads or the
grid's blocks, never as a vector; a grid reduction's total stored, and read by the other
statements of the kernel, in the last block of its segment only, or for an allreduce in every
block after a grid-wide barrier (no cluster launch, the total in registers or shared memory); accumulators that fit a thread's
registers. How a reduction runs is execution/reduction.py and execution/grid_reduction.py."""

from __future__ import annotations


from ...model.expr import evaluate, to_sympy, try_int
from ...model.grouped_reduction import grouping_mismatch
from ...model.loop_map import inline_joins
from ...model.mapping import IdMap
from ...model.mma_op import is_mma, is_tcgen05_op
from ...model.reduction import is_reduction_tensor
from ...model.welford import is_welford
from ...model.notation import user_str
from ...model.types import (
    BLOCK_TYPES, INSTRUCTION_AXES, THREAD_TYPES,
    IterType, MemoryType, ParallelType,
)
from ..problems import Problem
from ..circular import specialization
from ..reduction import (MAX_ACCUMULATOR_REGISTERS, Phase, ReductionLoops, accumulator_registers, reduction_loops,
                         welford_leader)
from ..cluster import NO_CLUSTER, cluster_dims
from ..grid_reduction import (entrance_loops, grid_round, is_allreduce, is_grid_reduction, last_block_totals,
                              read_totals, round_leader, spread_blocks, spread_reader)
from ..loops import loop_groups, statement_items, statement_path
from ..statements import bound_types


def group_problems(fusion, order) -> list:
    """REDUCTION-GROUP: the reductions of a group (tp.group_reductions, model/grouped_reduction.py)
    are still scheduled alike when the kernel is made, as nvFuser keeps a GroupedReductionOp's
    outputs: the same logical iteration, loop axes derived by the same transforms (so the same
    extents), the same parallel type on each loop axis (after the types siblings give each other:
    model/loop_map.py sibling_joins) and the same compute-at position. Checked against the group's
    first member the kernel computes."""
    out = []
    computed = {t.name for t in order}
    idmap = IdMap(fusion)
    for group in fusion.reduction_groups:
        members = [t for t in group if t.name in computed]
        if len(members) < 2:
            continue
        ref = members[0]
        names = ", ".join(t.name for t in group)
        for tv in members[1:]:
            where = dict(tensor=tv.name, location=tv.origin)
            why = grouping_mismatch(ref, tv, idmap)
            if why is None:
                k = next((k for k, (a, b) in enumerate(zip(ref.loop, tv.loop)) if a.parallel_type is not b.parallel_type),
                         None)
                if k is None:
                    continue
                a, b = ref.loop[k], tv.loop[k]
                why = (f"loop axis {k} runs on {a.parallel_type.value} in {ref.name} ({a.label()}) but on "
                       f"{b.parallel_type.value} in {tv.name} ({b.label()})")
                where = dict(tensor=tv.name, ids=(b.name,), location=b.parallel_origin or b.origin or tv.origin)
                values = {"loop axis": k}
            else:
                values = _group_values(ref, tv, idmap)
                k = values["first different loop axis"]
                ids = [t.loop[k] for t in (ref, tv) if k < len(t.loop)]  # the transform that differs: where it was written
                where = dict(tensor=tv.name, ids=tuple(i.name for i in ids),
                             location=next((i.origin for i in ids if i.origin), None) or tv.origin)
            out.append(Problem(f"{ref.name} and {tv.name} are grouped reductions ({names}) scheduled differently: "
                               f"{why}",
                               hint=f"schedule one member of the group and copy it to the others "
                                    f"(tp.propagate_transforms({ref.name}); tp.parallelize_all_like({ref.name})), or "
                                    f"do not group them",
                               values=values,
                               notes=("nvFuser runs a group as one GroupedReductionOp, whose outputs share one loop "
                                      "nest and one parallelization",), **where))
    return out


# nvFuser's kMaxNumGroupedReductions (csrc/type.h): reductions one GroupedReductionOp may do together
MAX_GROUPED_REDUCTIONS = 16


def group_axis_problems(fusion, order) -> list:
    """REDUCTION-GROUP-AXIS: where a loop axis runs on ParallelType.Group (after the types a loop
    gives its Serial members and siblings), as nvFuser's validateAndConvertIterDomainGrouping and
    validateGroupedReductions: an iteration axis of constant extent of a reduction's output, right
    of its compute-at position and of every producer's inlining into it, and at most 16 reductions
    done together (the group's members times the grouped extents)."""
    out = []
    idmap = IdMap(fusion)
    produced_at = {}
    for j in inline_joins(fusion, order, idmap):
        if j.consumer is not None:
            produced_at[j.consumer.name] = max(produced_at.get(j.consumer.name, 0), j.shared)
    for tv in order:
        grouped = [(k, i) for k, i in enumerate(tv.loop) if i.parallel_type is ParallelType.Group]
        for k, i in grouped:
            where = dict(tensor=tv.name, ids=(i.name,), location=i.parallel_origin or i.origin or tv.origin)
            why = None
            if not is_reduction_tensor(tv):
                why = (f"{tv.name} is not a reduction's output (its definition is {tv.definition.name}); grouping "
                       f"does the reductions of an axis together")
            elif i.iter_type is not IterType.Iteration:
                why = f"{i.label()} is a {i.iter_type.name.lower()} axis, not an iteration axis"
            elif i.static_extent is None:
                why = f"{i.label()} has the symbolic extent {user_str(i.extent)}, not a constant"
            elif tv.compute_at > k:
                why = f"{tv.name} is inlined at {tv.compute_at}, past its grouped axis {k}"
            elif produced_at.get(tv.name, 0) > k:
                why = f"a producer is inlined into {tv.name} at {produced_at[tv.name]}, past its grouped axis {k}"
            if why is not None:
                out.append(Problem(f"{tv.name} axis {k} ({i.label()}) runs on Group, but {why}",
                                   hint="put Group on an iteration axis of constant extent of a reduction's output, "
                                        "right of where it and its producers are inlined (tp.inline_most stops "
                                        "there), or leave the axis Serial",
                                   values={"axis": k, "compute_at": tv.compute_at,
                                           "producer_position": produced_at.get(tv.name, 0)},
                                   notes=("nvFuser's validateAndConvertIterDomainGrouping refuses the same: a "
                                          "GroupedReductionOp holds one value per index of the grouped axes",),
                                   **where))
        if not grouped or not is_reduction_tensor(tv):
            continue
        # a Welford's three outputs are one reduction (nvFuser's GroupedGridWelford counts WelfordOps)
        members = 1 if is_welford(tv) else \
            next((len(g) for g in fusion.reduction_groups if any(t.name == tv.name for t in g)), 1)
        together = members
        for _, i in grouped:
            together *= i.static_extent or 1
        if together > MAX_GROUPED_REDUCTIONS:
            k, i = grouped[0]
            out.append(Problem(f"{tv.name} groups {together} reductions ({members} grouped tensor(s) times the grouped "
                               f"extents), more than nvFuser's {MAX_GROUPED_REDUCTIONS}",
                               hint="group fewer indices (split the grouped axis smaller) or fewer reductions",
                               values={"reductions": together, "limit": MAX_GROUPED_REDUCTIONS},
                               tensor=tv.name, ids=(i.name,), location=i.parallel_origin or i.origin or tv.origin))
    return out


def _group_values(ref, tv, idmap: IdMap) -> dict[str, int]:
    """The numbers of two group members scheduled differently: their loop axes, the first loop
    axis that differs and its extents (where constant), their compute-at positions."""
    k = next((k for k, (a, b) in enumerate(zip(ref.loop, tv.loop)) if not idmap.same(a, b)),
             min(len(ref.loop), len(tv.loop)))
    values = {f"{ref.name} loop axes": len(ref.loop), f"{tv.name} loop axes": len(tv.loop), "first different loop axis": k}
    for t in (ref, tv):
        extent = try_int(t.loop[k].extent_expr) if k < len(t.loop) else None
        if extent is not None:
            values[f"{t.name} axis {k} extent"] = extent
    if ref.compute_at != tv.compute_at:
        values.update({f"{ref.name} compute-at": ref.compute_at, f"{tv.name} compute-at": tv.compute_at})
    return values


def parallel_problems(fusion, order) -> list:
    """REDUCTION-PARALLEL: a reduction axis bound to Vectorize or Bulk, or a Vectorize / Bulk
    iteration axis of a reduction (it stores one element at a time). A reduction axis on a block
    index is a grid reduction: grid_problems says what it needs."""
    out = []
    for tv in order:
        if not is_reduction_tensor(tv):
            continue
        for k, i in enumerate(tv.loop):
            p = i.parallel_type
            where = dict(tensor=tv.name, ids=(i.name,), location=i.parallel_origin or i.origin or tv.origin)
            if i.is_reduction and p in INSTRUCTION_AXES:
                out.append(Problem(
                    f"{tv.name}'s reduction axis {k} ({i.label()}) is bound to {p}; a reduction adds its terms one "
                    f"at a time into a register, not as one {'vector access' if p is ParallelType.Vectorize else 'TMA tile'}",
                    hint=f"make axis {k} of {tv.name} Unroll (or Serial), and vectorize the load instead: "
                         f"t = {tv.definition.inputs[0].name}.cache_after(), schedule t like {tv.name} with its "
                         f"innermost axis Vectorize, inline t into {tv.name}",
                    values={"axis": k}, **where))
            elif p in INSTRUCTION_AXES:
                out.append(Problem(
                    f"{tv.name}'s axis {k} ({i.label()}) is bound to {p}, but {tv.name} is a reduction: it stores "
                    f"each element once after its loops, one element at a time",
                    hint=f"make axis {k} of {tv.name} Unroll (or Serial); vectorize a copy instead (a tp.set of "
                         f"{tv.name}, or the cached load of its input)",
                    values={"axis": k}, **where))
            elif i.is_reduction and is_mma(tv) and p in THREAD_TYPES + BLOCK_TYPES:
                out.append(Problem(
                    f"{tv.name}'s reduction axis {k} ({i.label()}) is bound to {p}, but {tv.name} is an MmaOp: its "
                    f"accumulators live in the tensor-core tile of each {'thread group' if p in THREAD_TYPES else 'block'}"
                    f", and tileproof does not combine those of several across {p}",
                    hint=f"make axis {k} of {tv.name} Serial (or Unroll), or rfactor it: "
                         f"part = {tv.name}.rfactor([...the others...]) leaves {tv.name} a tp.sum over {p}",
                    values={"axis": k}, **where))
    return out


def accumulator_problems(fusion, order) -> list:
    """REDUCTION-ACCUMULATOR: a reduction's accumulator has a compile-time size that fits a thread's
    registers."""
    out = []
    for tv in order:
        if not is_reduction_tensor(tv):
            continue
        r = reduction_loops(tv)
        regs = accumulator_registers(r)
        if regs is not None and regs <= MAX_ACCUMULATOR_REGISTERS:
            continue
        axes = ", ".join(f"{i.label()} (axis {tv.loop.index(i)})" for i in r.accumulator)
        symbols = sorted(r.elements.free_vars())
        values = _too_many(r, symbols)
        size = (f"{user_str(to_sympy(r.elements))} running totals per thread, a number that depends on {', '.join(symbols)}"
                if regs is None else f"{try_int(r.elements)} running totals per thread ({regs} 32-bit registers)")
        out.append(Problem(
            f"{tv.name} keeps {size}: one {r.dtype} register for each point of its loop axes {axes}, which lie "
            f"inside its first reduction loop (axis {r.start}, {tv.loop[r.start].label()})",
            hint=f"move {tv.name}'s iteration axes out of its reduction loops (reorder them left of axis "
                 f"{r.start}), or bind them to threads or blocks",
            tensor=tv.name, ids=tuple(i.name for i in r.accumulator),
            values={**values, "limit": MAX_ACCUMULATOR_REGISTERS},
            notes=("a reduction keeps a running total for every element its reduction loops update at once; "
                   "registers are sized when the kernel is compiled",),
            location=r.accumulator[0].origin or tv.origin))
    return out


def _too_many(r: ReductionLoops, symbols: list[str]) -> dict[str, int]:
    """The registers at the smallest power of two, given to every symbol, that exceeds the limit."""
    v = 1
    while True:
        n = evaluate(r.elements, {s: v for s in symbols})
        regs = -(-n * r.register_bytes // 4)
        if regs > MAX_ACCUMULATOR_REGISTERS or v >= 1 << 20 or not symbols:
            return {**{s: v for s in symbols}, "registers": regs}
        v *= 2


def unsupported_reductions(fusion, order) -> list:
    """LOWERING-SUPPORTED: reductions the code generator does not lower (tensor memory)."""
    out = []
    for tv in order:
        if not is_reduction_tensor(tv):
            continue
        touched = [t.name for t in [tv] + list(tv.definition.inputs) if t.memory_type is MemoryType.Tensor]
        if touched == [tv.name] and is_tcgen05_op(tv.definition):
            continue  # tcgen05.mma accumulates in tensor memory itself (codegen/lower/mma.py)
        if touched:
            out.append(Problem(
                f"`{tv.definition}` reads or writes tensor memory ({', '.join(touched)}); tileproof lowers "
                f"reductions over registers, shared and global memory",
                hint="copy through a register (Local) tensor: tensor memory -> registers -> the reduction",
                tensor=tv.name, values={"tensor_memory_operands": len(touched)}, location=tv.definition.origin))
    return out


def grid_problems(fusion, order) -> list:
    """REDUCTION-GRID: a reduction over block indices (execution/grid_reduction.py) leaves its total
    in the last block of each segment only, so the statements that read it (directly or through
    others: grid_reduction.read_totals) run in that block only (reader_problems says where that
    holds), and it is computed by no MmaOp, in no warp-specialized kernel, with no broadcast
    loop axis; the members of a round (grid_round) combine at one point of the kernel."""
    out = []
    grid = [tv for tv in order if is_grid_reduction(tv)]
    if not grid:
        return out
    specialized = [t.name for t in order if specialization(t) is not None]
    apart = _rounds_apart(fusion, order, grid)
    for tv in grid:
        r = reduction_loops(tv)
        axis = next(i for i in tv.loop if i.is_reduction and i.parallel_type in r.blocks)
        where = dict(tensor=tv.name, ids=(axis.name,), location=axis.parallel_origin or axis.origin or tv.origin)
        over = ", ".join(p.value for p in r.blocks)
        found = _reader_problems(fusion, order, tv, r, over, where)
        if found:
            out.append(found)
        elif is_welford(tv) and welford_leader(tv) is not tv:
            continue  # a Welford's outputs combine as one state: the combine's conditions once, on its leader
        elif tv.name in apart:
            members = ", ".join(t.name for t in grid_round(tv))
            out.append(Problem(f"{tv.name} is reduced over {over} in one grid round with {members} (a group's grid "
                               f"reductions: one semaphore, one last block), but the kernel combines them at "
                               f"different points ({apart[tv.name]} statements between, or in other loops)",
                               hint=f"schedule {members} alike and inline them alike (tp.propagate_transforms, "
                                    f"tp.inline_most), or do not group them",
                               values={"members": len(grid_round(tv)), "statements_between": apart[tv.name]},
                               **where))
        elif is_mma(tv):
            out.append(Problem(f"{tv.name} is an MmaOp reduced over {over}; tileproof combines tensor-core "
                               f"accumulators within a block only",
                               hint=f"bind {tv.name}'s K axes to loops", values={}, **where))

        elif specialized:
            out.append(Problem(f"{tv.name} is reduced over {over} in a warp-specialized kernel "
                               f"({', '.join(specialized)}): its producer warps return early, but every thread of "
                               f"every block takes part in the grid combine",
                               hint="drop the warp specialization, or the grid reduction", values={}, **where))
        elif any(i.is_broadcast for i in tv.loop):
            b = next(i for i in tv.loop if i.is_broadcast)
            out.append(Problem(f"{tv.name} is reduced over {over} and has a broadcast loop axis ({b.label()}): "
                               f"tileproof's grid combine stores each element from one entrance",
                               hint=f"drop the broadcast axis from {tv.name} (reduce before broadcasting)",
                               values={}, **where))
    return out


def _rounds_apart(fusion, order, grid) -> dict[str, int]:
    """name -> how many statements lie between the grid combines of its round (grid_round, two or more
    members), for the members of rounds whose combines are not adjacent in the kernel's statements
    (execution/loops.py statement_items) or not in the same loops: one round is one point of the kernel."""
    rounds = {round_leader(t).name: grid_round(t) for t in grid if len(grid_round(t)) > 1}
    if not rounds:
        return {}
    items = statement_items(order, loop_groups(fusion, order))
    at = {leaf[0].name: k for k, (_, leaf) in enumerate(items)
          if isinstance(leaf, tuple) and leaf[1] is Phase.GRID_COMBINE}
    out = {}
    for members in rounds.values():
        where = sorted(at[t.name] for t in members if t.name in at)
        gap = where[-1] - where[0] + 1 - len(members) if len(where) == len(members) else len(items)
        if gap or len({tuple(items[k][0]) for k in where}) > 1:  # adjacent, and in the same loops
            out.update({t.name: gap for t in members})
    return out


ALLREDUCE = ("an allreduce (a reader spread over the reduced block types) runs the partials through a grid-wide "
             "barrier, after which every block combines them: each block keeps its own copy of the total")


def _reader_problems(fusion, order, tv, r: ReductionLoops, over: str, where: dict) -> Problem | None:
    """The first reason the statements reading tv's total (a grid reduction) cannot read it where
    it is: for a plain grid reduction, in the last block of its segment, after its combine (a
    grid reduction or an MmaOp or tensor memory access among them, one that reads grid totals of
    two rounds held by last blocks, a combine entered more than once per block, a reader outside a loop scope
    the combine is in); for an allreduce (a reader spread over a block type tv reduces), in every
    block after its barrier (allreduce_problem)."""
    readers = [t for t in order if tv in read_totals(t)]
    if not readers:
        return None
    if is_allreduce(tv):
        return _allreduce_problem(fusion, tv, readers, over, where)
    start = f"{tv.name} is reduced over {over} (a grid reduction), whose total only the last block of each segment holds"
    names = ", ".join(t.name for t in readers)
    for t in readers:
        if is_grid_reduction(t):
            return Problem(f"{start}, but {t.name}, which reads it, is a grid reduction too, combining every block "
                           f"of its segment",
                           hint=f"keep {t.name}'s axes off {over} (its statement then runs in the last block), or "
                                f"make {tv.name} an output and compute {t.name} in a second fusion",
                           values={"readers": len(readers)}, **where)
        problem = _reader_kind_problem(start, tv, t, readers, where)
        if problem is not None:
            return problem
    entrances = entrance_loops(r)
    if entrances:
        loops = ", ".join(tv.loop[k].label() for k, i in enumerate(tv.loop) if i.uid in {u for u, _ in entrances})
        return Problem(f"{start}, read in the same kernel by {names}, but {tv.name} enters its grid combine at each "
                       f"point of its loops {loops}, and the last block to arrive can differ each time",
                       hint=f"bind {tv.name}'s axes left of its reduction axes to threads or blocks, or make "
                            f"{tv.name} an output and read it in a second fusion",
                       values={"readers": len(readers), "entrance_loops": len(entrances)}, **where)
    groups = loop_groups(fusion, order)
    scopes = [g for g in statement_path(tv, groups)[:r.start] if not g.launched]
    for t in readers:
        path = statement_path(t, groups)
        outside = [g for g in scopes if g not in path]
        if outside:
            return Problem(f"{start}, and {t.name}, which reads it, is not nested in the loop of "
                           f"{outside[0].labels()[0]}, inside which the combine names the last block",
                           hint=f"inline {t.name} into {tv.name}'s loops (tp.inline_most)",
                           values={"readers": len(readers)}, **where)
    return None


def _reader_kind_problem(start: str, tv, t, readers, where: dict) -> Problem | None:
    """A reader t of tv's total that tileproof cannot run where the total is: an MmaOp or tensor
    memory access, or a statement reading totals that the last blocks of two rounds hold (which
    need not be one block; the totals of one round, grid_round, are in its one last block)."""
    if is_mma(t) or MemoryType.Tensor in [x.memory_type for x in [t, *t.definition.inputs]]:
        return Problem(f"{start}, and {t.name}, which reads it, is an MmaOp or touches tensor memory: tileproof "
                       f"issues those warp-collective instructions in every block",
                       hint=f"make {tv.name} an output and compute {t.name} in a second fusion",
                       values={"readers": len(readers)}, **where)
    both = last_block_totals(read_totals(t))
    rounds = {round_leader(x).name: grid_round(x) for x in both}
    if len(rounds) > 1:
        apart = "; ".join(", ".join(x.name for x in r) for r in rounds.values())
        return Problem(f"{start}, and {t.name} reads the totals of {', '.join(x.name for x in both)}, whose last "
                       f"blocks need not be one block: they combine in {len(rounds)} rounds ({apart}), each with "
                       f"its own semaphore",
                       hint=f"group {', '.join(x.name for x in both)} (tp.group_reductions: one round, one last "
                            f"block), or make them outputs and compute {t.name} in a second fusion",
                       values={"readers": len(readers), "totals": len(both), "rounds": len(rounds)}, **where)
    return None


def _allreduce_problem(fusion, tv, readers, over: str, where: dict) -> Problem | None:
    """What an allreduce (execution/grid_reduction.py) needs: its blocks wait for each other at a
    grid-wide barrier, so the kernel launches cooperatively (every block resident at once), which
    a cluster launch cannot be; each block keeps the total in its own registers or shared memory
    (a global total is stored by one block, after the barrier, and read by the others unordered);
    its readers are no MmaOp or tensor memory access and read at most one total held by last blocks."""
    spread, total = spread_reader(tv)  # a Welford output's sibling's reader makes the three allreduces
    whose = "its total" if total is tv else f"the total of {total.name}, {tv.name}'s Welford sibling,"
    start = (f"{tv.name} is reduced over {over} and {spread.name} reads {whose} in every block of the segment "
             f"(an allreduce: spread over {', '.join(p.value for p in spread_blocks(spread, total))})")
    clusters = cluster_dims(fusion)
    if clusters != NO_CLUSTER:
        x, y, z = clusters
        return Problem(f"{start}, whose blocks wait for each other at a grid-wide barrier, but the kernel is launched "
                       f"in clusters of {x} x {y} x {z}: tileproof launches a grid barrier's kernel cooperatively "
                       f"(every block resident at once, else the waiting blocks hang), and a cooperative launch "
                       f"takes no cluster dimensions",
                       hint="drop fusion.cluster_dims (and the multicasts that need it), or make "
                            f"{tv.name} an output and compute {spread.name} in a second fusion",
                       values={"cluster blocks": x * y * z, "readers": len(readers)}, notes=(ALLREDUCE,),
                       **{**where, "location": fusion.cluster_origin or where.get("location")})  # the knob: cluster_dims
    if tv.memory_type not in (MemoryType.Local, MemoryType.Shared):
        return Problem(f"{start}, but {tv.name} is in {tv.memory_type.value} memory: one block stores it after the "
                       f"barrier, and nothing orders that store before the other blocks read it",
                       hint=f"keep {tv.name} in registers (its default) or shared memory, where each block holds "
                            f"its own copy; to output the total, copy it (tp.set) into a global tensor",
                       values={"readers": len(readers)}, notes=(ALLREDUCE,), **where)
    for t in readers:
        problem = _reader_kind_problem(start, tv, t, readers, where)
        if problem is not None:
            return problem
    return None
