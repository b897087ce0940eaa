"""Where each element of an on-chip tensor lives, by enumeration: the data behind the pictures.

The tensor's loop points (thread and serial indices of one CTA) are mapped to logical
indices and to allocation offsets with the same index expressions the verifier proves
things about (execution/indexing.py), evaluated on concrete values. Pure Python, no drawing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterator

from ..execution.allocation import Allocation, compute_allocation
from ..model.expr import PY_EVAL, Expr, const, substitute, try_int
from ..execution.indexing import block_dims, indices_from_logical, linear_offset, loop_var, producer_logical, thread_dims
from ..execution.statements import tensor_execution
from ..model.tensor import TensorView
from ..model.types import BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, MemoryType

THREAD_VARS = tuple(p.cuda_name for p in THREAD_TYPES)
POINT_BUDGET = 1 << 16  # loop points enumerated per picture; beyond this the picture says it is partial
# Counterexample keys that name a place rather than a thread or loop index.
PLACE_KEYS = ("lane", "column", "offset", "address")


@dataclass(frozen=True)
class Access:
    """One loop point: the logical element it touches, and the values that identify it
    (loop variables, `thread`, `warp` and every IterDomain name)."""

    logical: tuple[int, ...]
    values: dict[str, int]


@dataclass
class Layout:
    """Cells keyed by place: an element offset (shared memory) or (lane, column) (tensor memory)."""

    tensor: TensorView
    issuer: TensorView
    allocation: Allocation
    cells: dict[object, list[Access]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None  # why no layout could be computed (symbolic extents)


class _Program:
    """Evaluates several index expressions per point, each shared subexpression once.

    Index trees of a schedule share large subtrees, so evaluating each tree on its own costs
    hundreds of times more. The expressions become one straight-line Python function whose
    operations are the model's own evaluator table (PY_EVAL), so the semantics stay the model's."""

    def __init__(self, exprs: list[Expr]):
        lines: list[str] = []
        functions: dict[str, Callable[..., int]] = {}
        index: dict[Expr, str] = {}

        def visit(e: Expr) -> str:
            if e not in index:
                if e.op == "const":
                    index[e] = repr(e.value)
                    return index[e]
                if e.op == "var":
                    source = f"env[{e.value!r}]"
                else:
                    functions[f"op_{e.op}"] = PY_EVAL[e.op]
                    source = f"op_{e.op}({', '.join(visit(a) for a in e.args)})"
                index[e] = f"v{len(lines)}"
                lines.append(f"    {index[e]} = {source}")
            return index[e]

        outputs = [visit(e) for e in exprs]
        source = "def run(env):\n" + "\n".join(lines) + f"\n    return [{', '.join(outputs)}]\n"
        namespace = dict(functions)
        exec(compile(source, "<tileproof index program>", "exec"), namespace)  # noqa: S102 - our own source
        self.run: Callable[[dict[str, int]], list[int]] = namespace["run"]


def _enumerated_ids(tv: TensorView):
    """Loop IDs whose indices the picture walks, and notes on the ones held at 0: block and
    device indices (each CTA has its own copy) and serial loops left of compute-at (they reuse
    the same memory, so the picture shows their first iteration)."""
    walked, notes = [], []
    for position, i in enumerate(tv.loop):
        p = i.parallel_type
        if p in BLOCK_TYPES or p in DEVICE_TYPES:
            notes.append(f"{i.label()} held at 0: one CTA's copy")
        elif p not in THREAD_TYPES and position < tv.compute_at:
            notes.append(f"{i.label()} held at 0: left of compute-at, its iterations reuse this memory")
        else:
            walked.append(i)
    return walked, notes


def _accesses(tensor: TensorView, issuer: TensorView, layout: Layout,
              place: Callable[[dict[int, Expr]], list[Expr]],
              keep: Callable[[tuple[int, ...]], bool],
              pinned: dict[str, int] | None = None) -> Iterator[tuple[tuple[int, ...], Access]]:
    """(place values, Access) for every loop point of `issuer` that touches `tensor` at a
    place that `keep` accepts: the points the kernel runs (the statement's execution model,
    execution/statements.py: its predicates, so a point clipped or filled by a TMA is drawn and a
    replicated store is drawn once). Loop variables named in `pinned` (a counterexample's serial and
    block indices) take that value instead of their range; its other names are sizes (symbols)."""
    pinned = pinned or {}
    ex = tensor_execution(issuer, block_dims(issuer.fusion))
    idx_issuer = ex.indices
    if issuer is tensor:
        idx_tensor = dict(idx_issuer)
    else:  # a load: the issuer's point reads the tensor at the producer's logical indices
        op = issuer.definition
        idx_tensor = indices_from_logical(tensor, producer_logical(op, op.inputs.index(tensor), idx_issuer))
    # IDs off the loop's backward path (another allocation branch) come forward from logical
    forward = indices_from_logical(tensor, [idx_tensor[i.uid] for i in tensor.logical])
    idx_tensor = {**forward, **idx_tensor}
    walked, layout.notes = _enumerated_ids(issuer)
    if pinned:  # the caller says which point it draws
        layout.notes = []
    ranges, zero = [], {}
    names_of = {loop_var(issuer, i).value for i in issuer.loop}
    sizes = {k: v for k, v in pinned.items() if k not in names_of and k not in THREAD_VARS}  # symbolic sizes
    for i in issuer.loop:
        extent = try_int(_bind(i.extent_expr, sizes))
        name = loop_var(issuer, i).value
        if name in pinned and i.parallel_type not in THREAD_TYPES:  # threads are walked: the whole warp
            ranges.append((name, range(pinned[name], pinned[name] + 1)))
        elif i in walked:
            if extent is None:
                layout.error = f"{issuer.name} loop axis {i.label()} has a symbolic extent"
                return
            ranges.append((name, range(extent)))
        else:
            zero[name] = 0
    names = [n for n, _ in ranges]
    known = set(zero) | set(names) | set(THREAD_VARS) | set(sizes)
    bounds, tests = [], []
    for cond in ex.conds:
        if (cond.lhs.free_vars() | cond.rhs.free_vars()) - known:
            layout.notes.append(f"assuming the {cond.why} predicate holds (its bound is symbolic)")
        else:
            bounds += [cond.lhs, cond.rhs]
            tests.append(cond.op)
    named = [i for i in tensor.all_ids() if i.uid in idx_tensor]
    wanted = [idx_tensor[i.uid] for i in tensor.logical] + place(idx_tensor)
    unknown = set().union(*(e.free_vars() for e in wanted)) - known
    dims = [try_int(_bind(d, sizes)) for d in thread_dims(tensor.fusion)]
    if unknown or None in dims:
        layout.error = f"an index depends on {', '.join(sorted(unknown)) or 'the symbolic block size'}"
        return
    named = [i for i in named if not idx_tensor[i.uid].free_vars() - known]
    # places first: most points of a large tensor fall outside the drawn window
    where = _Program(bounds + place(idx_tensor))
    what = _Program([idx_tensor[i.uid] for i in tensor.logical] + [idx_tensor[i.uid] for i in named])
    n_bounds, n_logical = len(bounds), len(tensor.logical)
    hole = _hole_test(tests)
    env = dict.fromkeys(THREAD_VARS, 0)
    env.update(zero)
    env.update(sizes)
    where_run, what_run, ids = where.run, what.run, [i.name for i in named]
    for count, point in enumerate(itertools.product(*(r for _, r in ranges))):
        if count >= POINT_BUDGET:
            layout.truncated = True
            layout.notes.append(f"only the first {POINT_BUDGET} loop points are drawn")
            return
        env.update(zip(names, point))  # one env, overwritten: the programs only read it
        out = where_run(env)
        if hole(out):
            continue
        places = tuple(out[n_bounds:])
        if not keep(places):
            continue
        out = what_run(env)
        values = dict(env)
        values.update(zip(ids, out[n_logical:]))
        thread = env[THREAD_VARS[0]] + env[THREAD_VARS[1]] * dims[0] + env[THREAD_VARS[2]] * dims[0] * dims[1]
        values["thread"], values["warp"] = thread, thread // 32
        yield places, Access(tuple(out[:n_logical]), values)


def _hole_test(ops: list[str]) -> Callable[[list[int]], bool]:
    """Whether a point is predicated off (touches nothing): some predicate o[2k] < o[2k + 1] or
    o[2k] == o[2k + 1] fails. One compiled test: it runs for every enumerated point."""
    fails = {"<": ">=", "==": "!="}
    test = " or ".join(f"o[{2 * k}] {fails[op]} o[{2 * k + 1}]" for k, op in enumerate(ops)) or "False"
    return eval(f"lambda o: {test}")  # noqa: S307 - our own source, indices only


def _bind(e: Expr, sizes: dict[str, int]) -> Expr:
    """e with the counterexample's sizes (symbols) put in."""
    return substitute(e, {k: const(v) for k, v in sizes.items()}) if sizes else e


def smem_layout(tv: TensorView, max_elements: int = 4096, *, issuer: TensorView | None = None,
                pinned: dict[str, int] | None = None) -> Layout:
    """Element offset -> the accesses that land there, for a shared-memory tensor as stored by
    its own loop domain or as read by `issuer`, at every loop point or (`pinned`) at one point
    of the serial and block loops; offsets from `max_elements` on are left out (and the layout
    says it is truncated)."""
    alloc = compute_allocation(tv)
    layout = Layout(tv, issuer or tv, alloc)
    strides = alloc.strides()
    window = _Window(layout, lambda offset: offset < max_elements,
                     f"only the first {max_elements} elements are drawn")
    for (offset,), access in _accesses(tv, layout.issuer, layout, lambda idx: [linear_offset(strides, idx)],
                                       window.keep, pinned):
        layout.cells.setdefault(offset, []).append(access)
    return layout


def point_accesses(tensor: TensorView, issuer: TensorView, pinned: dict[str, int]) -> Layout:
    """Every thread's accesses of `issuer` to `tensor` (any memory) at one point of the serial
    and block loops (`pinned`), the loops it leaves out walked: cells keyed by thread."""
    layout = Layout(tensor, issuer, compute_allocation(tensor))
    for _, access in _accesses(tensor, issuer, layout, lambda idx: [], lambda places: True, pinned):
        layout.cells.setdefault(access.values["thread"], []).append(access)
    return layout


def tmem_layout(tv: TensorView, issuer: TensorView | None = None, *, max_lanes: int = 256,
                max_columns: int = 64) -> Layout:
    """(lane, 32-bit column) -> accesses, for a tensor-memory tensor as stored by its own loop
    domain or as loaded by `issuer` (a tensor defined by reading it), within the window."""
    alloc = compute_allocation(tv)
    layout = Layout(tv, issuer or tv, alloc)
    lanes, columns = alloc.strides("lane"), alloc.strides("column")
    words = tv.dtype.bytes / 4  # 32-bit columns per element (a fraction for narrow types)
    window = _Window(layout, lambda lane, column: lane < max_lanes and int(column * words) < max_columns,
                     f"only lanes below {max_lanes} and columns below {max_columns} are drawn")

    def place(idx):
        return [linear_offset(lanes, idx), linear_offset(columns, idx)]

    for (lane, column), access in _accesses(tv, layout.issuer, layout, place, window.keep):
        layout.cells.setdefault((lane, int(column * words)), []).append(access)
    return layout


class _Window:
    """Which places a picture draws; notes on the layout when some are left out."""

    def __init__(self, layout: Layout, inside: Callable[..., bool], note: str):
        self.layout, self.inside, self.note = layout, inside, note

    def keep(self, places: tuple[int, ...]) -> bool:
        if self.inside(*places):
            return True
        if not self.layout.truncated:
            self.layout.truncated = True
            self.layout.notes.append(self.note)
        return False


def tmem_source(tv: TensorView) -> TensorView | None:
    """The tensor-memory tensor that `tv` reads (a tmem load), if any."""
    if tv.definition is None:
        return None
    return next((t for t in tv.definition.inputs if t.memory_type is MemoryType.Tensor), None)


def marked_cells(layout: Layout, counterexample: dict[str, object], ids: list[str] = ()) -> tuple[set, set]:
    """The cells a counterexample names, and the cells it says were expected instead.

    A cell is marked when its place agrees with every place key of the counterexample
    (lane/column, offset/address) and some access of it agrees with every thread, loop or
    IterDomain value the counterexample gives; a swizzle's `x`/`y` stand for its two IDs."""
    values = dict(counterexample)
    if len(ids) == 2 and "x" in values and "y" in values:
        values.setdefault(ids[0], values["x"])
        values.setdefault(ids[1], values["y"])
    known = set().union(*(a.values for accesses in layout.cells.values() for a in accesses[:1])) if layout.cells else set()
    wanted = {k: v for k, v in values.items() if k in known and isinstance(v, int)}
    place = _place_of(layout, values, "")
    expected = _place_of(layout, values, "expected ")
    if not wanted and place is None:
        return set(), set()
    marked = {key for key, accesses in layout.cells.items()
              if (place is None or place(key))
              and (not wanted or any(all(a.values.get(k) == v for k, v in wanted.items()) for a in accesses))}
    if not marked and place is not None and wanted:  # the values disagree with this view: trust the place
        marked = {key for key in layout.cells if place(key)}
    return marked, ({key for key in layout.cells if expected(key)} if expected else set())


def _place_of(layout: Layout, values: dict[str, object], prefix: str):
    """A predicate on cell keys from the counterexample's place keys (with `prefix`), or None."""
    def get(name):
        v = values.get(prefix + name)
        return v if isinstance(v, int) else None

    if layout.tensor.memory_type is MemoryType.Tensor:
        lane, column = get("lane"), get("column")
        if lane is None and column is None:
            return None
        if column is not None:
            column = int(column * layout.tensor.dtype.bytes / 4)
        return lambda key: (lane is None or key[0] == lane) and (column is None or key[1] == column)
    offset, address = get("offset"), get("address")
    if address is not None:
        offset = address // layout.tensor.dtype.bytes
    if offset is None:
        return None
    return lambda key: key == offset
