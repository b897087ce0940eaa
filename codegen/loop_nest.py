"""The loop nest: which loops exist, which tensors share them, and in what order.

Each computed tensor iterates its loop domain. A tensor inlined at position p shares
its first p loops with its consumers (the compute-at relation maps those loop IDs,
IdMap-exact), so loop positions joined by inlining form one loop class (union-find).
Tensors are visited producers first, and a consumer's producers that are not inlined
before those that are, so an inlined producer's statement lands right before the
consumer's inside the loops they share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.expr import Expr
from ..model.fusion import Fusion
from ..model.mapping import IdMap
from ..model.tensor import TensorView
from ..model.types import BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, ParallelType
from .errors import UnsupportedSchedule
from .kernel_ir import Loop


@dataclass
class LoopClass:
    key: int
    var: str  # C++ index: a counter name, or threadIdx.x / blockIdx.x
    extent: Expr
    parallel: ParallelType
    members: list[str] = field(default_factory=list)  # "T1 axis 0"

    @property
    def kind(self) -> str:
        p = self.parallel
        if p in THREAD_TYPES:
            return "thread"
        if p in BLOCK_TYPES:
            return "block"
        return "unroll" if p in (ParallelType.Unroll, ParallelType.Vectorize) else "serial"

    @property
    def index_var(self) -> str:
        """The algebra variable of this loop's index (thread/block indices keep their CUDA
        names; a counter gets a dotted name no user extent symbol can take)."""
        return self.var if self.kind in ("thread", "block") else f"loop.{self.var}"


def execution_order(fusion: Fusion) -> list[TensorView]:
    """The tensors the kernel computes, producers first (see the module docstring)."""
    done: set[str] = set()
    order: list[TensorView] = []

    def visit(tv: TensorView) -> None:
        if tv.name in done or tv.definition is None:
            return
        done.add(tv.name)
        for p in sorted(fusion.producers(tv), key=lambda t: t.compute_at):
            visit(p)
        order.append(tv)

    for out in fusion.outputs:
        visit(out)
    return order


class LoopClasses:
    """Union-find over (tensor, loop position), joined where inlining shares a loop."""

    def __init__(self, fusion: Fusion, order: list[TensorView]):
        self._parent: dict[tuple[str, int], tuple[str, int]] = {}
        computed = {t.name for t in order}
        idmap = IdMap(fusion)
        for tv in order:
            for k in range(len(tv.loop)):
                self._parent.setdefault((tv.name, k), (tv.name, k))
        for tv in order:
            for c in fusion.consumers(tv):
                if c.name not in computed:
                    continue
                for k in range(min(tv.compute_at, len(c.loop))):
                    if not idmap.same(tv.loop[k], c.loop[k]):
                        raise UnsupportedSchedule(
                            f"{tv.name} is inlined at {tv.compute_at} but its axis {k} does not map to {c.name}'s")
                    self._union((tv.name, k), (c.name, k))
        self.classes: dict[tuple[str, int], LoopClass] = {}
        self._by_root: dict[tuple[str, int], LoopClass] = {}
        for tv in order:
            for k, ident in enumerate(tv.loop):
                self._add(tv, k, ident)

    def _find(self, x):
        while self._parent[x] != x:
            self._parent[x] = self._parent[self._parent[x]]
            x = self._parent[x]
        return x

    def _union(self, a, b) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[rb] = ra

    def _add(self, tv: TensorView, k: int, ident) -> None:
        root = self._find((tv.name, k))
        existing = self._by_root.get(root)
        p = ident.parallel_type
        if p in DEVICE_TYPES:
            raise UnsupportedSchedule(f"{tv.name} axis {k} is parallelized on {p}: multi-device lowering is not supported")
        if existing is None:
            count = len(self._by_root)
            name = p.cuda_name if (p in THREAD_TYPES or p in BLOCK_TYPES) else f"i{count}"
            existing = self._by_root[root] = LoopClass(count, name, ident.extent_expr, p)
        elif existing.parallel is not p:
            raise UnsupportedSchedule(
                f"{tv.name} axis {k} ({p}) shares a loop with {existing.members[0]} ({existing.parallel}) "
                f"through inlining; inlined axes must be parallelized alike")
        existing.members.append(f"{tv.name} axis {k}")
        self.classes[(tv.name, k)] = existing

    def of(self, tv: TensorView, k: int) -> LoopClass:
        return self.classes[(tv.name, k)]


def build_tree(items: list[tuple[list[LoopClass], object]]) -> list:
    """Nest each statement in its loop path, reusing a loop only while it is the last
    thing in its scope (a class whose loop was closed cannot be reopened)."""
    root: list = []
    opened: set[int] = set()
    for path, node in items:
        scope = root
        for cls in path:
            last = scope[-1] if scope else None
            if isinstance(last, Loop) and last.key == cls.key:
                scope = last.body
                continue
            if cls.key in opened:
                raise UnsupportedSchedule(
                    f"cannot order the loop nest: the loop of {', '.join(cls.members)} would be split in two "
                    f"around another computation; inline differently")
            opened.add(cls.key)
            loop = Loop(cls.var, cls.extent, cls.kind, ", ".join(cls.members), cls.key)
            scope.append(loop)
            scope = loop.body
        scope.append(node)
    return root
