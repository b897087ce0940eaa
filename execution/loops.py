"""The kernel's loop structure, derived once: the order its statements run in (execution_order),
which tensors' loop axes are one loop of the kernel through inlining (loop_groups, with what
stops them: INLINE-LOOP-MAP, INLINE-PARALLEL-MATCH), and the nest of loops around the statements
(statement_items, nest; a loop that would have to reopen is LOOP-NEST-ORDER's problem).

The placed nest (execution/nest.py) is built on these loops; the verifier's rules prove it and the
code generator lowers it (codegen/lower/loop_nest.py), so the rules check the loops that are emitted.
"""

from __future__ import annotations

import copy

from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

from .allocation import Allocation, compute_allocation
from ..model.expr import Expr, const
from ..model.loop_map import (
    SHARED_TYPES, Join, inline_joins, loop_sets, loop_type, runs_once, sibling_joins, sizes_the_loop, takes_the_type,
)
from ..model.mapping import IdMap, unit_broadcast
from ..model.tensor import TensorView
from ..model.types import BLOCK_TYPES, INSTRUCTION_AXES, THREAD_TYPES, ParallelType
from ..hw.bulk_copy import is_async_bulk_op
from .problems import Problem
from .promotion import promotion_problems
from .reduction import Phase, insert_init, phases
from .derive import per_fusion


def _allocations(fusion, allocations) -> dict[str, Allocation]:
    if allocations is not None:
        return allocations
    return {t.name: compute_allocation(t) for t in fusion.tensors if not t.is_fusion_input}


def execution_order(fusion) -> list[TensorView]:
    """The computed tensors in statement order (_execution_order), a fresh list per call."""
    return list(_execution_order(fusion))


@per_fusion
def _execution_order(fusion) -> tuple[TensorView, ...]:
    """The tensors the kernel computes, producers first: a consumer's producers that are not
    inlined before those that are, so an inlined producer's statement lands right before the
    consumer's inside the loops they share; and what all of a consumer's producers need before
    any of them, level by level (the longest path to the consumer first), so that sibling
    producers inlined alike stay together (the shared-memory copies of both operands of a
    matmul, then both register caches, then both broadcasts). Tensors no output needs are not
    computed."""
    rank = {t.name: r for r, t in enumerate(_depth_first_order(fusion))}
    done: set[str] = set()
    order: list[TensorView] = []
    for out in fusion.outputs:
        if out.definition is None or out.name in done:
            continue
        distance = {out.name: 0}
        for t in sorted(_pending_ancestors(fusion, out, done), key=lambda t: -rank[t.name]):  # consumers first
            distance[t.name] = 1 + max(distance[c.name] for c in fusion.consumers(t) if c.name in distance)
        for t in sorted((t for t in rank if t in distance), key=lambda n: (-distance[n], rank[n])):
            done.add(t)
            order.append(fusion.tensor(t))
    for group in {id(g): g for g in _grouped_members(order).values()}.values():
        order = _group_together(fusion, order, group)
    return tuple(_loops_kept_whole(fusion, order))


def _group_together(fusion, order: list[TensorView], members: set[str]) -> list[TensorView]:
    """order with a reduction group's members (tp.group_reductions) and what they need that runs
    after the first of them moved up to it, before what does not need them (the readers of the
    first member's total): the group's accumulations can then share its loops. What moves needs
    nothing that stays behind, so every producer stays before its consumers."""
    first = min(n for n, t in enumerate(order) if t.name in members)
    later = order[first:]
    needed = {t.name for t in later if t.name in members}
    for t in reversed(later):  # consumers after producers: a needed consumer's producers are needed
        if t.name in needed:
            needed.update(p.name for p in fusion.producers(t))
    return order[:first] + [t for t in later if t.name in needed] + [t for t in later if t.name not in needed]


def _loops_kept_whole(fusion, order: list[TensorView]) -> list[TensorView]:
    """order with statements that do not depend on one another moved so that each loop is one
    contiguous range (nvFuser's expression sort orders a kernel's loop nests the same way): where a
    loop would reopen, the statements between its two parts move after the loop's last statement
    when nothing up to there reads them, or else before its first when they read nothing in it.
    Softmax's x - max for the output, which inline_most puts in the output's loop, moves after the
    sum's loop it landed in. Where neither move is possible (or none ends the conflicts) the order
    stays as it was, and LOOP-NEST-ORDER reports it."""
    current = list(order)
    for _ in range(2 * len(order)):
        groups = loop_groups(fusion, current)
        if groups.unmapped or groups.mismatched:
            return list(order)
        items = statement_items(current, groups)
        _, conflict = nest(items)
        if conflict is None:
            return current
        moved = _move_between(fusion, current, items, conflict)
        if moved is None:
            return list(order)
        current = moved
    return list(order)


def _move_between(fusion, order: list[TensorView], items, conflict) -> list[TensorView] | None:
    """order with the statements between a reopened loop's parts moved (see _loops_kept_whole);
    None when neither move keeps every producer before its consumers."""
    key = conflict.key
    inside = [j for j, (keys, _) in enumerate(items[:conflict.statement]) if key in keys]
    first, last = inside[0], inside[-1]
    between = _names_of(items[last + 1:conflict.statement])
    loop = _names_of(items[first:last + 1]) | _names_of(it for it in items[conflict.statement:] if key in it[0])
    between -= loop
    if not between:
        return None
    end = max(j for j, (keys, _) in enumerate(items) if key in keys)
    after = _names_of(items[conflict.statement:end + 1]) - between
    if not any(p.name in between for t in after for p in fusion.producers(fusion.tensor(t))):
        kept = [t for t in order if t.name not in between]
        tail = max(kept.index(fusion.tensor(t)) for t in after)
        moving = [t for t in order if t.name in between]
        return kept[:tail + 1] + moving + kept[tail + 1:]
    span = _names_of(items[first:last + 1])
    if not _reads_any(fusion, between, span):
        kept = [t for t in order if t.name not in between]
        head = min(kept.index(fusion.tensor(t)) for t in span)
        moving = [t for t in order if t.name in between]
        return kept[:head] + moving + kept[head:]
    return None


def _names_of(items) -> set[str]:
    return {statement_tensor(t).name for _, t in items}


def _reads_any(fusion, names: set[str], sources: set[str]) -> bool:
    """Whether a tensor of `names` reads one of `sources`, directly or through other tensors."""
    seen: set[str] = set()
    stack = list(names)
    while stack:
        t = stack.pop()
        for p in fusion.producers(fusion.tensor(t)):
            if p.name in sources:
                return True
            if p.name not in seen and p.definition is not None:
                seen.add(p.name)
                stack.append(p.name)
    return False


def _pending_ancestors(fusion, out: TensorView, done: set[str]) -> list[TensorView]:
    """The computed tensors `out` needs that are not in `done` yet."""
    seen: dict[str, TensorView] = {}
    stack = list(fusion.producers(out))
    while stack:
        t = stack.pop()
        if t.definition is None or t.name in done or t.name in seen:
            continue
        seen[t.name] = t
        stack.extend(fusion.producers(t))
    return list(seen.values())


def _depth_first_order(fusion) -> list[TensorView]:
    """The tensors in depth-first order from the outputs, a consumer's least inlined producers
    first: _execution_order's ties."""
    done: set[str] = set()
    order: list[TensorView] = []

    def emit(tv: TensorView) -> None:
        if tv.name not in done and tv.definition is not None:
            done.add(tv.name)
            order.append(tv)

    def needs(tv: TensorView) -> None:
        """Emit what tv's producers need, then its producers (least inlined first)."""
        producers = sorted(fusion.producers(tv), key=lambda t: t.compute_at)
        for p in producers:
            if p.name not in done:
                needs(p)
        for p in producers:
            emit(p)

    for out in fusion.outputs:
        needs(out)
        emit(out)
    return order


@dataclass(eq=False)
class LoopGroup:
    """Loop positions joined by inlining: one loop of the kernel. `members` in execution order;
    the first member that sizes it (model/loop_map.py sizes_the_loop) gives the loop its extent,
    the members' non-Serial type its parallel type."""

    index: int
    members: list[tuple[TensorView, int]] = field(default_factory=list)
    idmap: IdMap | None = None  # the exact map the loop's members were joined by

    @property
    def first(self):
        """The member that gives the loop its extent and type: the first that is not a promoted
        broadcast or a merge of one (mapping.promoted: it shares a consumer's loop). Found once
        for a frozen fusion's group (loop_groups builds it whole; nothing changes it after)."""
        got = self.__dict__.get("_first")
        if got is None:
            ids = [tv.loop[k] for tv, k in self.members]
            got = sizes_the_loop(ids, self.idmap)[0]
            if getattr(self.members[0][0].fusion, "frozen", False):
                self._first = got
        return got

    @property
    def parallel(self) -> ParallelType:
        """The loop's type (model/loop_map.py loop_type): its members' non-Serial type, which a
        snapshot gives its Serial members (model/loop_map.py propagate_parallel_types); the first
        member's where two differ (INLINE-PARALLEL-MATCH rejects that)."""
        got = self.__dict__.get("_parallel")
        if got is None:
            got = loop_type([tv.loop[k] for tv, k in self.members], self.idmap) or self.first.parallel_type
            if getattr(self.members[0][0].fusion, "frozen", False):
                self._parallel = got
        return got

    @property
    def runs_once(self) -> bool:
        """Whether the loop runs once, with index 0: all its members are broadcasts (model/loop_map.py
        runs_once, nvFuser's trivial loop; promotion.py loop_extents gives its members extent 1)."""
        return runs_once([tv.loop[k] for tv, k in self.members], self.idmap)

    @property
    def extent(self) -> Expr:
        return const(1) if self.runs_once else self.first.extent_expr

    def labels(self) -> list[str]:
        return [f"{tv.name} axis {k}" for tv, k in self.members]

    @property
    def launched(self) -> bool:
        return self.parallel in THREAD_TYPES or self.parallel in BLOCK_TYPES

    @property
    def var(self) -> str:
        """The kernel's name for this loop's index: threadIdx.x / blockIdx.y where the loop is a
        launched type, else its counter i<index>."""
        return self.parallel.cuda_name if self.launched else f"i{self.index}"

    @property
    def index_var(self) -> str:
        """The index algebra's variable for this loop's index (the statements' execution models
        are written in it): a thread/block index keeps its CUDA name, a counter gets a dotted name
        no user extent symbol can take."""
        return self.var if self.launched else f"loop.{self.var}"


@dataclass
class LoopGroups:
    """(tensor name, loop position) -> its LoopGroup, with what stops inlined loops from being one."""

    of: dict[tuple[str, int], LoopGroup]
    groups: list[LoopGroup]
    unmapped: list[Problem]
    mismatched: list[Problem]


@per_fusion
def loop_groups(fusion, order: Sequence[TensorView] | None = None, idmap: IdMap | None = None) -> LoopGroups:
    """Union-find over (tensor, loop position): a tensor inlined at p shares its first p loops with
    each computed consumer, where the loop IDs map (IdMap-exact), and grouped reductions
    (tp.group_reductions) share their loops as siblings (model/loop_map.py sibling_joins: nvFuser's
    GroupedReductionOp is one expression, in one loop nest). Groups are numbered in execution
    order of their first member."""
    order = list(execution_order(fusion) if order is None else order)
    idmap = idmap or IdMap(fusion)
    joins = list(inline_joins(fusion, order, idmap))
    unmapped = [_unjoined(j) for j in joins if j.stop is not None] + promotion_problems(fusion)
    sets = loop_sets(order, [j for j in joins if j.consumer is not None] + sibling_joins(fusion, order, idmap))
    of: dict[tuple[str, int], LoopGroup] = {}
    by_root: dict[tuple[str, int], LoopGroup] = {}
    groups: list[LoopGroup] = []
    for tv in order:
        for k in range(len(tv.loop)):
            root = sets[(tv.name, k)]
            g = by_root.get(root)
            if g is None:
                g = by_root[root] = LoopGroup(len(groups), idmap=idmap)
                groups.append(g)
            g.members.append((tv, k))
            of[(tv.name, k)] = g
    mismatched = [p for g in groups for p in _mismatch(g)]
    return LoopGroups(of, groups, unmapped, mismatched)


def _unjoined(j: Join) -> Problem:
    """INLINE-LOOP-MAP's problem: the inlining of j.producer joins fewer loops than its position."""
    tv, c, ca = j.producer, j.consumer, j.producer.compute_at
    if j.stop == "changed":
        return Problem(
            f"{tv.name} is inlined at position {ca} but has {len(tv.loop)} loop axes: its loop domain "
            f"changed after the inlining",
            hint=f"transform {tv.name} before inlining it (the scheduling calls refuse to change inlined axes)",
            tensor=tv.name, values={"compute_at": ca, "loop_axes": len(tv.loop)},
            location=tv.compute_at_origin or tv.origin)
    if j.stop == "short":
        return Problem(
            f"{tv.name} is inlined at position {ca} but its consumer {c.name} has {len(c.loop)} loop axes",
            hint=f"inline {tv.name} at most at position {len(c.loop)}, or make and schedule {c.name} before "
                 f"inlining {tv.name}",
            tensor=tv.name, values={"compute_at": ca, "loop_axes": len(c.loop)},
            location=tv.compute_at_origin or tv.origin)
    k = j.shared
    return Problem(
        f"{tv.name} is inlined at position {ca} but its loop axis {k} "
        f"({tv.loop[k].label()}) is not {c.name}'s loop axis {k} ({c.loop[k].label()})",
        hint=f"inline {tv.name} at most at position {k} (inline_at({k})), or make and schedule {c.name} "
             f"before inlining {tv.name}, so that their first {ca} loop axes are the same",
        tensor=tv.name, ids=(tv.loop[k].name, c.loop[k].name),
        values={"compute_at": ca, "axis": k},
        notes=(f"{tv.name}'s axis {k} is a reduction axis: its consumers read totals, after "
               f"the reduction's loops" if tv.loop[k].is_reduction else
               f"inline_at checks the consumers it is called with, and the scheduling calls keep inlined "
               f"axes as they are: {c.name} was made after {tv.name} was inlined",),
        # the knob: the inlining past a reduction axis, else the consumer's axis (made after the inlining)
        location=(tv.compute_at_origin if tv.loop[k].is_reduction else c.loop[k].origin or c.origin)
        or tv.loop[k].origin or tv.origin)


def _mismatch(g: LoopGroup) -> list[Problem]:
    """INLINE-PARALLEL-MATCH's problem with one loop, if any: two of its members bound to different
    non-Serial types, a member left Serial (or a promoted one bound otherwise) where the loop's type
    is not one another statement takes (model/loop_map.py: Vectorize, Bulk, Mma), or an
    instruction's axis (Vectorize, Bulk) shared by two statements."""
    if len(g.members) < 2:
        return []
    sizing = {id(i) for i in sizes_the_loop([tv.loop[k] for tv, k in g.members], g.idmap)}
    typed = [(tv, k) for tv, k in g.members if id(tv.loop[k]) in sizing
             and tv.loop[k].parallel_type is not ParallelType.Serial]
    head_tv, head_k = typed[0] if typed else next((tv, k) for tv, k in g.members if id(tv.loop[k]) in sizing)
    kind = head_tv.loop[head_k].parallel_type
    takes = {id(i) for i in takes_the_type([tv.loop[k] for tv, k in g.members], g.idmap)} if kind in SHARED_TYPES else set()
    differ = [(tv, k) for tv, k in g.members if tv.loop[k].parallel_type is not kind
              and not tv.loop[k].is_broadcast and id(tv.loop[k]) not in takes]
    if not differ and kind in INSTRUCTION_AXES:
        (tv, k), (other, j) = g.members[0], g.members[1]
        return [Problem(
            f"{tv.name} axis {k} ({tv.loop[k].label()}) shares a loop with {other.name} axis {j} through "
            f"inlining, but a {kind} axis is covered by one instruction of each statement, not a loop "
            f"they can share",
            hint=f"inline {tv.name} left of its {kind} axis (inline_at({k}); tp.inline_most stops there)",
            tensor=tv.name, ids=(tv.loop[k].name, other.loop[j].name),
            values={"axis": k, "loops_sharing": len(g.members)},
            notes=(f"{tv.name}'s statement would move the whole {tv.loop[k].label()} at once, into storage "
                   f"allocated for one element of it",),
            location=tv.compute_at_origin or tv.loop[k].origin or tv.origin)]
    if not differ:
        return []
    tv, k = differ[0]
    serial = tv.loop[k].parallel_type is ParallelType.Serial
    why = (f"a {kind} loop is not given to an inlined Serial axis: it is covered by one instruction of "
           f"the statement that binds it" if serial else
           f"it runs on one index, so its members' types must agree (a Serial member takes the loop's "
           f"type)")
    return [Problem(
        f"{tv.name} axis {k} ({tv.loop[k].parallel_type}) shares a loop with {head_tv.name} axis {head_k} "
        f"({kind}) through inlining, but they are parallelized differently",
        hint=f"parallelize inlined axes alike (tp.parallelize_all_like({head_tv.name}) after scheduling), "
             f"or inline {head_tv.name if head_tv is not tv else tv.name} left of that axis",
        tensor=tv.name, ids=(tv.loop[k].name, head_tv.loop[head_k].name),
        values={"axis": k, "loops_sharing": len(g.members)},
        notes=(f"one loop of the kernel iterates {', '.join(g.labels())}; {why}",),
        location=tv.loop[k].parallel_origin or tv.loop[k].origin or tv.origin)]  # its parallelize call


def statement_path(tv: TensorView, groups: LoopGroups) -> list[LoopGroup]:
    """The loops tv's statement is nested in (a TMA or bulk copy covers its Bulk axes itself)."""
    tma = is_async_bulk_op(tv.definition)
    return [groups.of[(tv.name, k)] for k, i in enumerate(tv.loop)
            if not (tma and i.parallel_type is ParallelType.Bulk)]


@dataclass
class Nest:
    """A loop of the nest: `key` names its loop group, `body` holds Nests and statements."""

    key: Hashable
    body: list = field(default_factory=list)


@dataclass(frozen=True)
class NestConflict:
    statement: int  # the position of the statement that would reopen the loop
    key: Hashable  # the loop


def nest(items: Sequence[tuple[Sequence[Hashable], Any]],
         reopenable: frozenset = frozenset()) -> tuple[list, NestConflict | None]:
    """Nest each statement (in order) in its loop path, reusing a loop only while it is the last
    thing in its scope: a loop that was closed cannot be reopened (the conflict), but for those in
    `reopenable` (launched_loops: a thread or block index, which no C++ loop iterates), which
    close and open again as a scope of their own."""
    root: list = []
    opened: set = set()
    for n, (path, node) in enumerate(items):
        scope = root
        for key in path:
            last = scope[-1] if scope else None
            if isinstance(last, Nest) and last.key == key:
                scope = last.body
                continue
            if key in opened and key not in reopenable:
                return root, NestConflict(n, key)
            opened.add(key)
            loop = Nest(key)
            scope.append(loop)
            scope = loop.body
        scope.append(node)
    return root, None


def launched_loops(groups: LoopGroups) -> frozenset:
    """The loop groups on a thread or block index: no C++ loop iterates them (every thread of every
    block runs the statements in them, each at its own index), so the statements that share one
    need not be adjacent: an inlined producer's value is the same thread's, whatever runs between
    it and its consumer. nest() lets their scopes close and reopen."""
    return frozenset(g.index for g in groups.groups if g.launched)


def statement_items(order: Sequence[TensorView], groups: LoopGroups) -> list[tuple[list[int], object]]:
    """Each statement of the kernel in order, as (the loop groups it is nested in, the statement):
    a tensor for its one statement, a (tensor, Phase) pair for each step of a reduction
    (model/reduction.py phases). The code generator nests the same statements
    (codegen/lower/__init__.py) and execution/nest.py places the barriers on them."""
    items: list[tuple[list[int], object]] = []
    waiting = _grouped_members(order)  # a group's members whose accumulation is still to come
    held: dict[int, list] = {}  # a group's steps after its members' accumulations, held until the last
    for tv in order:
        for group in [g for g, steps in held.items() if any(_reads(tv, statement_tensor(s)) for _, s in steps)]:
            items.extend(_by_phase(held.pop(group)))  # a reader of a held total: the group ends early
        path = statement_path(tv, groups)
        group = waiting.get(tv.name)
        for steps, phase in phases(tv, path):
            keys = [g.index for g in steps]
            if phase is Phase.INIT:  # before the producers inlined into its reduction loop
                insert_init(items, keys, path[len(steps)].index, (tv, phase))
            elif group is not None and phase not in (Phase.ACCUMULATE, Phase.RESCALE):
                held.setdefault(id(group), []).append((keys, (tv, phase)))
            else:
                items.append((keys, tv if phase is Phase.STATEMENT else (tv, phase)))
        if group is not None:
            group.discard(tv.name)
            if not group and id(group) in held:
                items.extend(_by_phase(held.pop(id(group))))
    for steps in held.values():
        items.extend(_by_phase(steps))
    return items


def _grouped_members(order: Sequence[TensorView]) -> dict[str, set[str]]:
    """name -> the names of its group's computed members (tp.group_reductions, two or more computed):
    one set per group, shared by its members. Their accumulations run in the loops they share
    (loop_groups joins them as siblings), each init before and each combine and store after them,
    as nvFuser's one GroupedReductionOp does. An online max's rescaled sums are held alike."""
    names = {t.name for t in order}
    fusion = order[0].fusion if order else None
    out: dict[str, set[str]] = {}
    # an online max's rescaled sums (model/online.py) share its loop alike: every store after the last
    online = [t.online for t in order if t.online is not None]
    for group in list(getattr(fusion, "reduction_groups", ())) + online:
        members = {t.name for t in group if t.name in names}
        if len(members) > 1:
            out.update({name: members for name in members})
    return out


def _reads(tv: TensorView, other: TensorView) -> bool:
    return any(p.name == other.name for p in tv.definition.inputs)


def _by_phase(steps: list) -> list:
    """A group's held steps, each phase's for every member before the next phase's."""
    rank = {phase: n for n, phase in enumerate(Phase)}
    return sorted(steps, key=lambda item: rank[item[1][1]])


def copied_nest(nodes: list) -> list:
    """A copy of a nest (a pipeline's prologue, a rotated loop's first iteration): loops and placed
    nodes copied, the verifier's leaves (tensors, (tensor, phase) pairs) kept, so that they still
    name the fusion's tensors."""
    out = []
    for n in nodes:
        if isinstance(n, (TensorView, tuple)):
            out.append(n)
        elif hasattr(n, "body"):
            c = copy.copy(n)
            c.body = copied_nest(n.body)
            out.append(c)
        else:
            out.append(copy.deepcopy(n))
    return out


def statements_in(node):
    """The statements of a nest node and of the nodes nested in it (a tensor, or a reduction's
    (tensor, Phase) step), in order; placed nodes (waits, barriers) hold none."""
    if isinstance(node, (TensorView, tuple)):
        yield node
    elif hasattr(node, "body"):
        for c in node.body:
            yield from statements_in(c)


def statement_tensor(item) -> TensorView:
    """The tensor a statement of statement_items computes."""
    return item[0] if isinstance(item, tuple) else item
