"""Fusion: a small dataflow of TensorViews connected by Ops, plus the assumptions
under which its symbolic extents are verified."""

from __future__ import annotations

import copy
import re
import threading
from dataclasses import dataclass, field
from typing import Iterator

import sympy

from .errors import ScheduleError, user_location
from .expr import Expr, to_sympy, var
from .iterdomain import wrong_enum
from .options import MmaMacro, Tf32Rounding, checked_cluster_dims
from .producer_aliases import alias_views
from .scalar_value import ScalarValue
from .types import CacheOp, LoadStoreOpType, MemoryType, OpKind, ParallelType

_state = threading.local()


@dataclass(frozen=True)
class Scalar:
    """A value operand of a binary op or of where (`tp.mul(t, 2.0)`, `tp.sub(1, t)`,
    `tp.div(t, "N")`): `value` is the number converted to the op's compute type (DataType.compute:
    a Python float holding a float32 or float64 value, or a Python int in range), or an extent
    (an Expr of the fusion's extent symbols, which the kernel converts to the compute type), or a
    float scalar of extents (model/scalar_value.py ScalarValue, computed in the kernel in its own
    float type, then converted to the compute type);
    `position` where it stands among the op's operands (0: first), `given` the value as the
    user wrote it (what reports print)."""

    value: int | float | Expr | ScalarValue
    position: int
    given: int | float | str

    def __str__(self) -> str:
        return self.given if isinstance(self.given, str) else repr(self.given)  # an extent by its name


@dataclass(frozen=True)
class Iota:
    """tp.iota's values: element i is start + i step, `start` and `step` numbers already in the
    output's compute type (DataType.compute), computed in it (nvFuser's IotaOp)."""

    start: int | float
    step: int | float


@dataclass(eq=False)
class Op:
    """One expression. `logical_map[k][j]` is the logical axis of `inputs[k]` that the
    output's logical axis j reads (None where the output axis is a new broadcast).
    A binary op with a number operand has one tensor input and its `scalar`. `cache_op`: a
    cp.async copy's caches (tp.CacheOp; Unspecified for every other op)."""

    kind: OpKind
    inputs: list
    output: object
    logical_map: list[list[int | None]]
    name: str = "set"
    op_type: LoadStoreOpType = LoadStoreOpType.Set
    origin: str | None = field(default_factory=user_location)
    scalar: Scalar | None = None
    cache_op: CacheOp = CacheOp.Unspecified
    macro: object = None  # an MmaOp's tp.MmaMacro (model/options.py), set by set_macro
    tf32_rounding: object = None  # an MmaOp's tp.Tf32Rounding, set by set_macro (tf32 macros only)
    macro_origin: str | None = None  # the user's file:line of set_macro: rules about the macro point there
    # an MmaOp rescaled by an online max (model/online.py): the max, and the max's logical axis each of
    # the output's root axes reads it at (the wgmma's operands stay its only inputs)
    rescale_max: object = None
    rescale_map: list | None = None
    # an IotaOp (tp.iota): its start and step, each in the output's compute type; no inputs
    iota: Iota | None = None

    def set_macro(self, macro, tf32_rounding=None) -> None:
        """The tensor-core instruction tile this MmaOp (tp.fused_multiply_sum, tp.matmul) is
        computed with: its output's three innermost loop IDs, bound to tp.ParallelType.Mma, are
        the macro's M, N and K. nvFuser: MmaOp::setMacro. `tf32_rounding` (a tp.Tf32Rounding,
        tf32 macros only; RNA when left out) says how the float32 operands become tf32.

            d.definition.set_macro(tp.MmaMacro.Ampere_16_8_16)"""
        self.macro = check_macro(self, macro)
        self.tf32_rounding = check_tf32_rounding(self.macro, tf32_rounding)
        self.macro_origin = user_location()

    def __str__(self) -> str:
        args = [t.display_name for t in self.inputs]
        if self.iota is not None:  # no tensor operand: the length, start and step
            args = [str(self.output.logical[0].extent_expr), repr(self.iota.start), repr(self.iota.step)]
        if self.scalar is not None:
            args.insert(self.scalar.position, str(self.scalar))
        if self.kind is OpKind.CAST:
            args.append(str(self.output.dtype))
        what = self.name if self.kind is not OpKind.LOAD_STORE or self.op_type is LoadStoreOpType.Set else self.op_type.value
        return f"{self.output.display_name} = {what}({', '.join(args)})"


_TENSOR_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # a user's tensor name (Fusion.name_tensor)
_UNNAMED = re.compile(r"T\d+")  # the names tensors have without one

MAX_EXTENT = 2**31 - 1  # symbolic extents are assumed to fit int32 indexing


def symbol_range() -> tuple[int, int]:
    """The values every extent symbol is proved for (32-bit indexing); checked again at launch."""
    return 1, MAX_EXTENT


class Fusion:
    """A small dataflow of tensors (nvFuser's Fusion; the `with` block plays FusionGuard): tensors
    and ops created inside `with fusion:` belong to it. `name` names the kernel (tp_<name>);
    `assume` states facts about symbolic extents; `inputs`, `outputs`, `tensors`, `exprs` and
    `symbols` describe it.

        with tp.Fusion("copy") as fusion:
            t0 = tp.make_contig_tensor(1); fusion.add_input(t0)
            t1 = tp.set(t0); fusion.add_output(t1)"""

    def __init__(self, name: str | None = None):
        self.name = name or "fusion"
        self.tensors: list = []
        self.exprs: list[Op] = []
        self.inputs: list = []
        self.outputs: list = []
        self.assumptions: list[sympy.Basic] = []
        self.symbols: dict[str, sympy.Symbol] = {}
        # an extent symbol an op unified with another extent (model/extent_unification.py) -> that extent
        self.extent_aliases: dict[str, Expr] = {}
        # tp.group_reductions: each group's reduction outputs, run as one (model/grouped_reduction.py)
        self.reduction_groups: list[tuple] = []
        # fusion.manage("tmem_regions", ...): tensors that share one tensor-memory allocation region
        self.tmem_regions: list[tuple] = []
        self.tmem_regions_origin: str | None = None
        # tp.rotate_loop: (loop tensor, loop axis, the rotated tensors), nvFuser's "loop_rotation" (model/loop_rotation.py)
        self.loop_rotation: list[tuple] = []
        self.loop_rotation_origins: list[str | None] = []
        self._tensor_count = 0
        self._iterdomain_count = 0
        self.origin = user_location()
        self.assumption_origins: list[str | None] = []  # the user's file:line of each assumption
        self._cluster_dims = (1, 1, 1)
        self.frozen = False  # a snapshot: verify and compile read it, nothing schedules it again
        # a snapshot's broadcasts, copies, transposes read as views of a global input (model/producer_aliases.py)
        self.views: dict[str, Op] = {}
        self.cluster_origin: str | None = None  # the user's file:line setting cluster_dims
        self._fast_math = False
        self._dependent_launch = False
        self._reversed_blocks: tuple[ParallelType, ...] = ()

    @property
    def cluster_dims(self) -> tuple[int, int, int]:
        """Blocks per thread-block cluster (x, y, z), (1, 1, 1) by default: `fusion.cluster_dims =
        (2, 1, 1)` makes blocks 2j and 2j + 1 along x a cluster (sm_90a), whose blocks may share a
        TMA load (TensorView.multicast). CLUSTER-MULTICAST checks it (at most 8 blocks, the grid a
        multiple of it). nvFuser: the matmul scheduler's cluster_dims."""
        return self._cluster_dims

    @cluster_dims.setter
    def cluster_dims(self, value) -> None:
        self._cluster_dims = checked_cluster_dims(value)
        self.cluster_origin = user_location()

    # -- context ------------------------------------------------------------------
    @property
    def fast_math(self) -> bool:
        """Whether the kernel compiles with NVRTC's --use_fast_math (nvFuser's
        EnableOption::FastMath), False by default: exp2, exp, division, sqrt and rsqrt by their
        one-instruction approximations, denormal floats flushed to zero. What the verifier proves
        is unchanged (it proves where values go, not how they round); the values differ from the
        default's by a few units in the last place, and below 2^-126 by a flush to zero."""
        return self._fast_math

    @fast_math.setter
    def fast_math(self, value) -> None:
        if not isinstance(value, bool):
            raise ScheduleError(f"fast_math must be True or False, got {value!r}")
        self._fast_math = value

    @property
    def dependent_launch(self) -> bool:
        """Whether the kernel is launched as a programmatic dependent launch (sm_90 on), False by
        default: nvFuser's wait_for_prior_grid at the kernel's start, then launch_dependent_grid.
        Every thread first waits (griddepcontrol.wait) until the kernels before it on the stream
        have completed and their memory is visible, then lets the next kernel on the stream
        launch (griddepcontrol.launch_dependents), which, launched so too, waits at its start
        likewise. The kernel touches memory only after its wait, so it computes what it computes
        without (what the verifier proves is unchanged); the next kernel's launch and its blocks'
        setup overlap this one's run (split-K's sum after its partials: recipes/split_k.py)."""
        return self._dependent_launch

    @dependent_launch.setter
    def dependent_launch(self, value) -> None:
        if not isinstance(value, bool):
            raise ScheduleError(f"dependent_launch must be True or False, got {value!r}")
        self._dependent_launch = value

    @property
    def reversed_blocks(self) -> tuple[ParallelType, ...]:
        """The block indices the kernel reads in reverse, () by default: with
        `fusion.reversed_blocks = (tp.ParallelType.BIDx,)` the work of block x is done by the block
        the GPU numbers gridDim.x - 1 - x. The GPU starts blocks in the order of their numbers, so
        the work of the highest indices starts first (causal attention's row tiles, the last of
        which have the most key tiles: FlashAttention's heaviest-first order, which leaves the
        light tiles for the grid's tail). A relabelling of the blocks: every proof holds as it
        did, the kernel computes the same values. Not with clusters or grid reductions
        (LOWERING-SUPPORTED: their ranks and last blocks are the hardware's numbers)."""
        return self._reversed_blocks

    @reversed_blocks.setter
    def reversed_blocks(self, value) -> None:
        types = tuple(value) if isinstance(value, (tuple, list)) else None
        if types is None or any(p not in (ParallelType.BIDx, ParallelType.BIDy, ParallelType.BIDz) for p in types):
            raise ScheduleError(f"reversed_blocks must be a tuple of block types (tp.ParallelType.BIDx, BIDy, BIDz), "
                                f"got {value!r}")
        self._reversed_blocks = tuple(dict.fromkeys(types))

    def __enter__(self) -> "Fusion":
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _state.stack.pop()

    # -- construction ---------------------------------------------------------------
    def _next_tensor_name(self) -> str:
        name = f"T{self._tensor_count}"
        self._tensor_count += 1
        return name

    def next_iterdomain_number(self) -> int:
        """The number of the next IterDomain made for this fusion (named i0, i1, ... in creation
        order, as nvFuser numbers them per fusion)."""
        number = self._iterdomain_count
        self._iterdomain_count += 1
        return number

    def _register_tensor(self, tv) -> None:
        self.tensors.append(tv)

    def name_tensor(self, tv, name, op: str, *, check_only: bool = False) -> None:
        """Give tv the user's `name` (make_tensor(name=)), checked at the door of `op`: a letter
        then letters, digits or underscores (it becomes a C++ parameter name), not T<n> (the
        names of unnamed tensors), and no other tensor of this fusion has it. `check_only`:
        only check (tv may be None)."""
        if not isinstance(name, str) or not _TENSOR_NAME.fullmatch(name):
            raise ScheduleError(f"{op}: name must be a letter followed by letters, digits or underscores "
                                f"(it names the kernel parameter), got {name!r}")
        if _UNNAMED.fullmatch(name):
            raise ScheduleError(f"{op}: name {name!r} looks like an unnamed tensor's T<n>; choose another")
        if any(t.user_name == name and t is not tv for t in self.tensors):
            raise ScheduleError(f"{op}: fusion {self.name} already has a tensor named {name!r}")
        if not check_only:
            tv.user_name = name

    def _register_op(self, op: Op) -> None:
        self.exprs.append(op)
        op.output.definition = op

    def add_input(self, tv) -> None:
        """Make `tv` (a new tensor of this fusion, not computed by an op) an input; it lives in
        global memory. nvFuser: Fusion::addInput(tv)."""
        self._check_own(tv, "add_input")
        if tv.definition is not None:
            raise ScheduleError(f"add_input: {tv.name} is computed by `{tv.definition}`; only a new tensor can be an input")
        if tv not in self.inputs:
            self.inputs.append(tv)
        tv.memory_type = MemoryType.Global

    def add_output(self, tv) -> None:
        """Make `tv` (a tensor of this fusion) an output; it lives in global memory.
        nvFuser: Fusion::addOutput(tv)."""
        self._check_own(tv, "add_output")
        if tv not in self.outputs:
            self.outputs.append(tv)
        tv.memory_type = MemoryType.Global

    def manage(self, key: str, value) -> None:
        """nvFuser's Fusion::manage for the one key lowering reads: `manage("tmem_regions",
        [[tv2, tv6], ...])` puts each list's tensors in one tensor-memory allocation region,
        laid out one after another (execution/allocation.py tmem_regions); a tensor-memory tensor
        in no list keeps a region of its own. Each listed tensor must be in tensor memory when
        the fusion is verified (it may be set after this call, as in nvFuser)."""
        if key != "tmem_regions":
            raise ScheduleError(f"manage: unknown key {key!r}; tileproof knows only \"tmem_regions\"")
        if not isinstance(value, (list, tuple)) or any(not isinstance(r, (list, tuple)) for r in value):
            raise ScheduleError(f"manage: tmem_regions must be a list of lists of tensors, got {value!r}")
        seen: dict = {}
        for k, region in enumerate(value):
            if not region:
                raise ScheduleError(f"manage: tmem_regions region {k} is empty")
            for tv in region:
                self._check_own(tv, "manage")
                if tv.name in seen:
                    raise ScheduleError(f"manage: {tv.name} is in tmem_regions regions {seen[tv.name]} and {k}; "
                                        f"a tensor lives in one region")
                seen[tv.name] = k
        self.tmem_regions = [tuple(r) for r in value]
        self.tmem_regions_origin = user_location()

    def symbol(self, name: str) -> sympy.Symbol:
        """The sympy symbol of a symbolic extent, created on first use."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ScheduleError(f"a symbolic extent needs an identifier name, got {name!r}")
        if name in self.extent_aliases:
            raise ScheduleError(f"{name} is no symbol of this fusion any more: an op unified it with "
                                f"{self.extent_aliases[name]} (the axes it maps have one extent); use that")
        if name not in self.symbols:
            self.symbols[name] = sympy.Symbol(name, integer=True, nonnegative=True)
        return self.symbols[name]

    def extent(self, name: str) -> Expr:
        """The extent a symbol name in a shape stands for: the symbol (created on first use), or
        the extent an op unified it with (Fusion.extent_aliases)."""
        if name in self.extent_aliases:
            return self.extent_aliases[name]
        self.symbol(name)
        return var(name)

    def assume(self, condition) -> None:
        """State a fact about symbolic extents, e.g. `fusion.assume("N % 4 == 0")`
        or a sympy relation. Proofs hold for every size that satisfies all assumptions."""
        if isinstance(condition, str):
            cond = self._parse(condition)
        elif isinstance(condition, sympy.Basic):
            cond = condition
        else:
            raise ScheduleError(f"assume: expected a string or a sympy relation, got {type(condition).__name__}")
        aliased = {s: to_sympy(self.extent_aliases[s.name]) for s in getattr(cond, "free_symbols", ())
                   if s.name in self.extent_aliases}
        if aliased:  # a symbol an op unified with another extent: the assumption is about that one
            cond = cond.subs(aliased)
        if cond is sympy.true:
            return
        if cond is sympy.false:
            raise ScheduleError(f"assume: {condition!r} is false for every size")
        if not isinstance(cond, (sympy.core.relational.Relational, sympy.logic.boolalg.BooleanFunction)):
            raise ScheduleError(f"assume: {condition!r} is not a condition (use ==, <, <=, >, >=, And, Or)")
        unknown = {s.name for s in cond.free_symbols} - set(self.symbols)
        if unknown:
            raise ScheduleError(f"assume: unknown extent symbol(s) {', '.join(sorted(unknown))}")
        self.assumptions.append(cond)
        self.assumption_origins.append(user_location())

    def _parse(self, text: str) -> sympy.Basic:
        import ast

        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as e:
            raise ScheduleError(f"assume: cannot parse {text!r}: {e.msg}") from None
        return _AssumptionParser(self).visit(tree.body)

    # -- queries ----------------------------------------------------------------------
    def uses_of(self, tv) -> list[Op]:
        """The ops that read `tv`, in creation order (nvFuser's Fusion::unordered_uses(tv))."""
        return [op for op in self.exprs if tv in op.inputs]

    def consumers(self, tv) -> list:
        """The tensors computed from `tv` (nvFuser's ir_utils::consumerTvsOf(tv))."""
        return [op.output for op in self.uses_of(tv)]

    def producers(self, tv) -> list:
        """The tensors `tv` is computed from; none for an input (nvFuser's ir_utils::producerTvsOf(tv))."""
        return list(tv.definition.inputs) if tv.definition is not None else []

    def tensor(self, name: str):
        """The tensor named `name` ("T2", or the name make_tensor(name=) gave); KeyError when
        there is none."""
        for t in self.tensors:
            if name in (t.name, t.user_name):
                return t
        raise KeyError(name)

    def topo_tensors(self) -> Iterator:
        """Tensors in definition order (inputs first)."""
        done: set[int] = set()
        order: list = []

        def visit(t):
            if id(t) in done:
                return
            done.add(id(t))
            for p in self.producers(t):
                visit(p)
            order.append(t)

        for t in self.tensors:
            visit(t)
        return iter(order)

    def snapshot(self) -> "Fusion":
        """A frozen deep copy: what `verify` and `compile` work on (execution/derive.py derives
        its execution facts once), with each broadcast of a global input into global memory read
        as a view of that input (model/producer_aliases.py alias_views)."""
        snap = copy.deepcopy(self)
        alias_views(snap)
        snap.frozen = True
        return snap

    def __repr__(self) -> str:
        return f"Fusion({self.name}: {len(self.tensors)} tensors, {len(self.exprs)} ops)"

    def _check_own(self, tv, op: str) -> None:
        if getattr(tv, "fusion", None) is not self:
            raise ScheduleError(f"{op}: {tv!r} does not belong to fusion {self.name}")


def current_fusion() -> Fusion:
    stack = getattr(_state, "stack", None)
    if not stack:
        raise ScheduleError("no active fusion: create tensors inside `with tp.Fusion() as fusion:`")
    return stack[-1]


class _AssumptionParser:
    """A whitelist parser for assumption strings: ints, known symbols, + - * // % and comparisons."""

    def __init__(self, fusion: Fusion):
        self.fusion = fusion

    def visit(self, node):
        import ast

        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return sympy.Integer(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.fusion.extent_aliases:
                return to_sympy(self.fusion.extent_aliases[node.id])
            if node.id not in self.fusion.symbols:
                raise ScheduleError(f"assume: unknown extent symbol {node.id}")
            return self.fusion.symbols[node.id]
        if isinstance(node, ast.BinOp):
            a, b = self.visit(node.left), self.visit(node.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: sympy.floor(a / b), ast.Mod: lambda: sympy.Mod(a, b),
                   ast.Pow: lambda: a ** b}
            if type(node.op) in ops:
                return ops[type(node.op)]()
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("ceil", "floor")
                and len(node.args) == 1 and not node.keywords):  # ceil(a / b), as reports print it
            inner = node.args[0]
            q = (self.visit(inner.left) / self.visit(inner.right)
                 if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Div) else self.visit(inner))
            return (sympy.ceiling if node.func.id == "ceil" else sympy.floor)(q)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.visit(node.operand)
        if isinstance(node, ast.Compare):
            rel = {ast.Eq: sympy.Eq, ast.NotEq: sympy.Ne, ast.Lt: sympy.Lt, ast.LtE: sympy.Le,
                   ast.Gt: sympy.Gt, ast.GtE: sympy.Ge}
            left, parts = self.visit(node.left), []
            for op, comp in zip(node.ops, node.comparators):
                right = self.visit(comp)
                if type(op) not in rel:
                    break
                parts.append(rel[type(op)](left, right))
                left = right
            else:
                return sympy.And(*parts)
        if isinstance(node, ast.BoolOp):
            vals = [self.visit(v) for v in node.values]
            return sympy.And(*vals) if isinstance(node.op, ast.And) else sympy.Or(*vals)
        import ast as _ast

        raise ScheduleError(f"assume: unsupported syntax {_ast.unparse(node)!r}")


def symbol_bound(rel) -> tuple[str, int | None, int | None, int] | None:
    """(symbol, lo, hi, step) when `rel` says exactly that one symbol lies in [lo, hi] (None:
    unbounded on that side) and is a multiple of step; None for any other condition."""
    if not isinstance(rel, sympy.core.relational.Relational):
        return None
    lhs, rhs, op = rel.lhs, rel.rhs, type(rel)
    if op is sympy.Eq and isinstance(lhs, sympy.Mod) and rhs == 0:
        s, m = lhs.args
        if isinstance(s, sympy.Symbol) and isinstance(m, sympy.Integer) and m > 0:
            return s.name, None, None, int(m)
        return None
    if isinstance(rhs, sympy.Symbol) and isinstance(lhs, sympy.Integer):  # 128 >= M is M <= 128
        lhs, rhs = rhs, lhs
        op = {sympy.StrictLessThan: sympy.StrictGreaterThan, sympy.LessThan: sympy.GreaterThan,
              sympy.StrictGreaterThan: sympy.StrictLessThan, sympy.GreaterThan: sympy.LessThan}.get(op, op)
    if not (isinstance(lhs, sympy.Symbol) and isinstance(rhs, sympy.Integer)):
        return None
    c = int(rhs)
    sides = {sympy.StrictLessThan: (None, c - 1), sympy.LessThan: (None, c), sympy.StrictGreaterThan: (c + 1, None),
             sympy.GreaterThan: (c, None), sympy.Eq: (c, c)}
    return (lhs.name, *sides[op], 1) if op in sides else None


MMA_OP = "fms"  # the reduction name of an MmaOp (model/reduction.py treats it as a sum of products)


def is_mma_op(op: Op | None) -> bool:
    return op is not None and op.kind is OpKind.REDUCTION and op.name == MMA_OP


def check_macro(op: Op, macro) -> MmaMacro:
    """Op.set_macro's argument check."""
    if not is_mma_op(op):
        raise ScheduleError(f"set_macro: `{op}` is not an MmaOp; the macro belongs to the op of "
                            f"tp.fused_multiply_sum / tp.matmul")
    if not isinstance(macro, MmaMacro):
        raise wrong_enum("set_macro", "macro", MmaMacro, macro)
    return macro


def check_tf32_rounding(macro, rounding):
    """Op.set_macro's tf32_rounding check: a tp.Tf32Rounding, for a macro with float32 operands
    (None: RNA there, nothing for the others)."""
    if rounding is None:
        return Tf32Rounding.RNA if macro.input_dtypes == ("float32",) else None
    if not isinstance(rounding, Tf32Rounding):
        raise wrong_enum("set_macro", "tf32_rounding", Tf32Rounding, rounding)
    if macro.input_dtypes != ("float32",):
        raise ScheduleError(f"set_macro: tf32_rounding applies to the tf32 macro (Ampere_16_8_8); "
                            f"MmaMacro.{macro.name} takes {' or '.join(macro.input_dtypes)} operands, which are "
                            f"not rounded")
    return rounding
