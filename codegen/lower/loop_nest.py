"""The loop nest: which loops exist, which tensors share them, and the kernel's tree.

Each computed tensor iterates its loop domain. A tensor inlined at position p shares
its first p loops with its consumers (the compute-at relation maps those loop IDs,
IdMap-exact), so loop positions joined by inlining form one loop class (execution/loops.py
loop_groups, the function the verifier's lowering rules check: a schedule whose loops do not
form one nest is rejected there by INLINE-LOOP-MAP, INLINE-PARALLEL-MATCH or LOOP-NEST-ORDER,
so reaching one here is a tileproof bug). The tree is the verifier's placed nest
(execution/nest.py) with its leaves lowered: the code generator places no barrier itself.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ...model.errors import InternalError
from ...model.expr import Expr
from ...model.fusion import Fusion
from ...execution.loops import Nest, execution_order, loop_groups, statement_items
from ...execution.nest import PlacedNest
from ...execution.barriers import WgmmaFence, WgmmaWait
from ...execution.reduction import Phase
from ...execution.warp_roles import WarpRoles
from ...execution.problems import Problem
from ...execution.skip import trip_counts
from ...execution.conditions.lowering import UNROLLED, nest_problems
from ...model.tensor import TensorView
from ...model.types import BLOCK_TYPES, THREAD_TYPES, ParallelType
from ..errors import UnsupportedSchedule
from ..ir import Loop, LoopKind

__all__ = ["LoopClass", "LoopClasses", "NotLowered", "execution_order", "lower_nest", "refuse"]


class NotLowered(InternalError, UnsupportedSchedule):
    """A condition of model/lowerable.py failed while lowering. The rule named in `.rule`
    rejects such a schedule, so tp.compile never gets here (a tileproof bug); for
    tileproof.testing.compile_unverified it is the code generator refusing (UnsupportedSchedule)."""


def refuse(code: str, problems: list[Problem]) -> None:
    """Raise NotLowered for the first problem, if any."""
    if problems:
        raise NotLowered(f"{problems[0].message} (the verifier rejects this schedule with {code})", rule=code)


@dataclass
class LoopClass:
    key: int
    var: str  # C++ index: a counter name, or threadIdx.x / blockIdx.x
    index_var: str  # the algebra variable of this loop's index (execution/loops.py LoopGroup.index_var)
    extent: Expr
    parallel: ParallelType
    members: list[str] = field(default_factory=list)  # "T1 axis 0"

    @property
    def kind(self) -> LoopKind:
        p = self.parallel
        if p in THREAD_TYPES:
            return LoopKind.THREAD
        if p in BLOCK_TYPES:
            return LoopKind.BLOCK
        return LoopKind.UNROLL if p in UNROLLED else LoopKind.SERIAL  # Group: one reduction round per index


class LoopClasses:
    """(tensor, loop position) -> its LoopClass: one per loop group of model.lowerable."""

    def __init__(self, fusion: Fusion, order: list[TensorView]):
        self.groups = groups = loop_groups(fusion, order)
        refuse("INLINE-LOOP-MAP", groups.unmapped)
        refuse("INLINE-PARALLEL-MATCH", groups.mismatched)
        refuse("LOOP-NEST-ORDER", nest_problems(fusion, order, groups))
        self.classes: dict[tuple[str, int], LoopClass] = {}
        trips = trip_counts(fusion)  # a loop that skips masked iterations runs its trip count, in every role
        for g in groups.groups:
            cls = LoopClass(g.index, g.var, g.index_var, trips.get(g.index, g.extent), g.parallel, g.labels())
            for tv, k in g.members:
                self.classes[(tv.name, k)] = cls

    def of(self, tv: TensorView, k: int) -> LoopClass:
        return self.classes[(tv.name, k)]


def lower_nest(placed: PlacedNest | None, order: list[TensorView], statements: list[tuple[list[LoopClass], object]],
               classes: LoopClasses) -> list:
    """The kernel's tree: the placed nest (execution/nest.py, the object the verifier proved) with
    each loop lowered to its Loop, each leaf to the statement lowered for it (`statements`, in the
    order of execution/loops.py statement_items) and each placed node kept, copied (the later
    passes fill them in). A statement whose instruction covers its innermost loops (a vector, an
    ldmatrix's registers, a TMA box) is lowered in fewer loops: those loops hold that statement
    alone and vanish (innermost, or with only thread and block indices inside them: a Vectorize
    axis of one element left of the threads). A leaf met again (a pipeline prologue's copy) gets a
    copy of its statement."""
    items = statement_items(order, classes.groups)
    if placed is not None:  # a rotation the nest could not take (the kernel would not be the one asked for)
        refuse("LOOP-ROTATION", [p for plan in placed.rotations for p in plan.problems])
    if placed is None or len(items) != len(statements):
        raise InternalError(f"the lowered statements ({len(statements)}) are not the placed nest's ({len(items)})")
    lowered, covers = {}, {}
    for (keys, leaf), (path, node) in zip(items, statements):
        own = [cls.key for cls in path]
        if own != [k for k in keys if k in own] or len(set(own)) != len(own):
            raise InternalError(f"{_leaf_key(leaf)} is lowered in other loops than the placed nest's")
        lowered[_leaf_key(leaf)] = node
        covers[_leaf_key(leaf)] = set(keys) - set(own)  # its instruction's loops (innermost, or only threads inside)
    by_key = {cls.key: cls for cls in classes.classes.values()}
    made: dict[int, object] = {}
    used: set = set()

    def render(n) -> list:
        if isinstance(n, (TensorView, tuple)):
            key = _leaf_key(n)
            node = lowered[key] if key not in used else copy.deepcopy(lowered[key])
            used.add(key)
            return [node]
        if isinstance(n, Nest) and _covered(n, covers):
            return [c for child in n.body for c in render(child)]
        if id(n) not in made:
            made[id(n)] = _lowered_node(n, by_key)
            if hasattr(n, "body"):
                made[id(n)].body = [c for child in n.body for c in render(child)]
            if isinstance(n, WarpRoles):
                made[id(n)].loops = [(made_of(p), made_of(c), *rest) for p, c, *rest in n.loops]
        return [made[id(n)]]

    def made_of(n):
        (out,) = render(n)
        return out

    return [c for n in placed.tree for c in render(n)]


def _lowered_node(n, by_key: dict[int, LoopClass]):
    """A node of the placed nest as the kernel's (its body filled in by the caller)."""
    if isinstance(n, Nest):
        cls = by_key[n.key]
        return Loop(cls.var, cls.extent, cls.kind, ", ".join(cls.members), cls.key, [])
    return copy.copy(n) if hasattr(n, "body") else copy.deepcopy(n)


def _covered(loop: Nest, covers: dict) -> bool:
    """Whether the loop is one its statements' instructions cover (see lower_nest); such a loop
    holding anything else (a barrier, another statement) is a tileproof bug, but for the
    wgmma.fence and wait around the instruction: a single-tile wgmma's M and N loops hold its
    whole batch (they run once, as the instruction)."""
    leaves, others = [], []

    def gather(nodes: list) -> None:
        for c in nodes:
            if isinstance(c, Nest):
                gather(c.body)
            elif isinstance(c, (TensorView, tuple)):
                leaves.append(_leaf_key(c))
            elif not isinstance(c, (WgmmaFence, WgmmaWait)):
                others.append(c)

    gather(loop.body)
    covering = [k for k in leaves if loop.key in covers[k]]
    if not covering:
        return False
    if others or len(covering) != len(leaves):
        raise InternalError(f"the loop over {', '.join(k for k, _ in covering)}'s instruction holds more than it")
    return True


def _leaf_key(leaf) -> tuple[str, Phase]:
    tv, phase = leaf if isinstance(leaf, tuple) else (leaf, Phase.STATEMENT)
    return tv.name, phase
