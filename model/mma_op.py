"""The MmaOp: tp.fused_multiply_sum / tp.matmul (nvFuser's MmaOp on broadcast operands), its
macro, its Mma loop axes, and how its statement runs on the tensor cores, derived once for the
verifier and the code generator.

`D = fused_multiply_sum(A, B, axes)` is a reduction (OpKind.REDUCTION, name "fms"): D[.., m, n]
= sum over k of A[.., m, 1, k] * B[.., 1, n, k], added in float32. Each output axis is an M axis
(B broadcast there), an N axis (A broadcast there), a K axis (reduced) or a batch axis. Without a
macro it runs as any reduction (one fused multiply-add per term). With
`D.definition.set_macro(macro)` and the macro's M x N x K tile as D's three innermost loop IDs,
bound to ParallelType.Mma, one warp computes each tile with `macro.issues` mma.sync
instructions: the lanes of the warp are threadIdx.x (the kernel launches 32 of them), and lane l's
element v of each operand is the tile position the instruction's fragment map gives
(`MacroFragments`). `mma_execution` is D's execution model (model/execution.py) with the Mma
axes' indices replaced by those positions, one view per operand role:

    A   the (m, k) of the tile that lane l's A element v holds   (D's N index 0)
    B   the (k, n) of B element v                                (D's M index 0)
    C   the (m, n) of accumulator element v                      (D's K index 0)

so "the element the schedule puts in (lane, register)" is the index algebra's, and the
verifier's register-ownership proof over these views is MMA-OPERAND-LAYOUT (A, B: the thread
that wrote the operand's register is the lane that the fragment map says holds it, at that
register) and MMA-ACCUM-LAYOUT (C: a consumer of D reads the accumulator in the lane that holds
it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .errors import ScheduleError
from .expr import Expr, const, var
from .fusion import Op
from .iterdomain import IterDomain, Split, wrong_enum
from .mma import WARP, MmaArch, MmaInstruction, MmaMacro, Tf32Rounding
from .tensor import TensorView
from .types import IterType, OpKind, ParallelType, float32

MMA_OP = "fms"  # the reduction name of an MmaOp (model/reduction.py treats it as a sum of products)
OPERAND_DTYPES = ("float32", "bfloat16", "float16")
LANE = ParallelType.TIDx  # the lanes of the warp that issues an instruction
ROLES = ("A", "B", "C")
INSTRUCTION_AXES = 3  # an MmaOp's loop domain ends with its M, N and K Mma axes (MMA-SHAPE)
ELEMENT_VARS = {role: f"mma.{role}" for role in ROLES}  # the element index v of each role's fragment


# -- the op -----------------------------------------------------------------------------------

def fused_multiply_sum(a: TensorView, b: TensorView, axes) -> TensorView:
    """The sum over `axes` of a * b, in float32: nvFuser's fusedMultiplySum (an MmaOp). a and b
    have the same number of axes; on every axis that is not reduced one of them may be a
    broadcast (A is broadcast on the N axes, B on the M axes).

        a = tp.broadcast(a2, [False, True, False])   # [M, 1, K]
        b = tp.broadcast(b2, [True, False, False])   # [1, N, K]
        d = tp.fused_multiply_sum(a, b, [-1])         # [M, N, rK]"""
    from .ops import _check_tv
    from .reduction import _axes, is_reduction_tensor

    func = "fused_multiply_sum"
    _check_tv(func, a, "a")
    _check_tv(func, b, "b")
    for arg, t in (("a", a), ("b", b)):
        if t.dtype.name not in OPERAND_DTYPES:
            raise ScheduleError(f"{func}: {arg} ({t.name}) is {t.dtype}; operands are float32 (tf32 on the tensor "
                                f"cores), bfloat16 or float16")
        if is_reduction_tensor(t) or any(i.is_reduction for i in t.logical):
            raise ScheduleError(f"{func}: {arg} ({t.name}) has reduction axes; copy it first (tp.set) so that its "
                                f"axes are the ones you see")
    if a.dtype != b.dtype:
        raise ScheduleError(f"{func}: a is {a.dtype} and b is {b.dtype}; the tensor cores take operands of one dtype "
                            f"(tp.cast one of them)")
    if len(a.logical) != len(b.logical):
        raise ScheduleError(f"{func}: a has {len(a.logical)} axes and b {len(b.logical)}; broadcast them to the "
                            f"same number (tp.broadcast), e.g. a [M, 1, K] and b [1, N, K]")
    reduced = _axes(func, a, axes)
    for k in reduced:
        if b.logical[k].is_broadcast:
            raise ScheduleError(f"{func}: axis {k} of b ({b.name}) is a broadcast axis, which cannot be reduced with "
                                f"a's {a.logical[k].label()}")
    ids = []
    for k, (x, y) in enumerate(zip(a.logical, b.logical)):
        if not x.is_broadcast and not y.is_broadcast and x.extent_expr != y.extent_expr:
            raise ScheduleError(f"{func}: axis {k} has extent {x.extent_expr} in a and {y.extent_expr} in b; "
                                f"make them equal, or broadcast one of them")
        src = y if x.is_broadcast else x
        kind = IterType.Reduction if k in reduced else src.iter_type
        ids.append(IterDomain(src.extent_expr, number=a.fusion.next_iterdomain_number(), iter_type=kind))
    out = TensorView(a.fusion, ids, float32)
    mapping = list(range(len(ids)))
    a.fusion._register_op(Op(OpKind.REDUCTION, [a, b], out, [mapping, list(mapping)], name=MMA_OP))
    return out


def matmul(a: TensorView, b: TensorView) -> TensorView:
    """a @ b for a [M, K] and b [K, N], in float32: fused_multiply_sum of a broadcast to
    [M, K, 1] and b to [1, K, N] over axis 1 (the output's logical domain is [M, rK, N])."""
    from .ops import _check_tv, broadcast
    from .reduction import element_axes

    for arg, t in (("a", a), ("b", b)):
        _check_tv("matmul", t, arg)
        if len(element_axes(t)) != 2:
            raise ScheduleError(f"matmul: {arg} ({t.name}) has {len(element_axes(t))} axes; matmul takes 2-D "
                                f"operands (use tp.fused_multiply_sum for others)")
    return fused_multiply_sum(broadcast(a, [False, False, True]), broadcast(b, [True, False, False]), [1])


def is_mma_op(op: Op | None) -> bool:
    return op is not None and op.kind is OpKind.REDUCTION and op.name == MMA_OP


def is_wgmma_op(op: Op | None) -> bool:
    """An MmaOp on a Hopper macro: a warpgroup's asynchronous wgmma."""
    return is_mma_op(op) and op.macro is not None and op.macro.arch is MmaArch.Hopper


def is_mma(tv: TensorView) -> bool:
    """Whether tv is computed on the tensor cores: an MmaOp with a macro."""
    return is_mma_op(tv.definition) and tv.definition.macro is not None


def well_formed(tv: TensorView) -> bool:
    """Whether tv is an MmaOp on the tensor cores whose fragments are defined: an mma.sync macro
    whose tile is tv's three innermost loop IDs, bound to Mma (no MMA-TARGET, MMA-DTYPE or
    MMA-SHAPE problem, model/mma_rules.py)."""
    from .mma_rules import CODES, shape_problems

    if not is_mma(tv):
        return False
    found: dict = {code: [] for code in CODES}
    return shape_problems(tv, None, found) and not any(found.values())


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


# -- the roles of D's axes and its Mma loop IDs ------------------------------------------------------

def axis_roles(tv: TensorView) -> list[str]:
    """The role of each root axis of an MmaOp's output: "M", "N", "K" or "batch"."""
    a, b = tv.definition.inputs
    out = []
    for j, i in enumerate(tv.root):
        x, y = a.logical[tv.definition.logical_map[0][j]], b.logical[tv.definition.logical_map[1][j]]
        if i.is_reduction:
            out.append("K")
        elif y.is_broadcast and not x.is_broadcast:
            out.append("M")
        elif x.is_broadcast and not y.is_broadcast:
            out.append("N")
        else:
            out.append("batch")
    return out


@dataclass(frozen=True)
class MmaAxes:
    """D's Mma loop IDs, one per role, and the root ID each one tiles."""

    m: IterDomain
    n: IterDomain
    k: IterDomain
    roots: tuple[IterDomain, IterDomain, IterDomain]

    def of(self, role: str) -> IterDomain:
        return {"M": self.m, "N": self.n, "K": self.k}[role]


def root_of(tv: TensorView, i: IterDomain) -> list[IterDomain]:
    """The root IDs loop ID i derives from."""
    from .reduction import _derives

    uids = _derives(tv).get(i.uid, set())
    return [r for r in tv.root if r.uid in uids]


def inner_tile(tv: TensorView, i: IterDomain) -> bool:
    """Whether ID i's index adds to its root's index with stride 1: i is the root, or the inner
    output of a split of an ID for which this holds."""
    by_output = {o.uid: t for t in tv.history for o in t.outputs}
    while i.uid in by_output:
        t = by_output[i.uid]
        if not (isinstance(t, Split) and t.inner is i):
            return False
        i = t.in_
    return any(i is r for r in tv.root)


def mma_axes(tv: TensorView) -> MmaAxes | None:
    """D's Mma loop IDs by role, or None unless there is exactly one for M, N and K, each
    derived from one root of that role."""
    roles = dict(zip((r.uid for r in tv.root), axis_roles(tv)))
    found: dict[str, list] = {"M": [], "N": [], "K": []}
    for i in tv.loop:
        if i.parallel_type is not ParallelType.Mma:
            continue
        roots = root_of(tv, i)
        if len(roots) != 1 or roles[roots[0].uid] not in found:
            return None
        found[roles[roots[0].uid]].append((i, roots[0]))
    if any(len(v) != 1 for v in found.values()):
        return None
    (m, rm), (n, rn), (k, rk) = found["M"][0], found["N"][0], found["K"][0]
    return MmaAxes(m, n, k, (rm, rn, rk))


# -- the macro's tile as fragments -------------------------------------------------------------------

@dataclass(frozen=True)
class MacroFragments:
    """One macro tile (m x n x k) as `issues` instructions over N (n_steps) then K (k_steps),
    and each role's fragment over the whole tile: lane l's element v of role A (M x K), B (K x N)
    or C (M x N), numbered instruction by instruction (A: by K step; B: by K step, then N step;
    C: by N step), each instruction's elements as PTX numbers them."""

    macro: MmaMacro
    inst: MmaInstruction

    @property
    def n_steps(self) -> int:
        return self.macro.n // self.inst.n

    @property
    def k_steps(self) -> int:
        return self.macro.k // self.inst.k

    @property
    def from_shared(self) -> bool:
        """wgmma: A and B are read from shared memory by the whole warpgroup, through descriptors;
        their "fragment" is the instruction's whole tile, element v at row v / cols, column v % cols."""
        return self.inst.threads > WARP

    def per_instruction(self, role: str) -> int:
        if self.from_shared and role != "C":
            return self.inst.m * self.inst.k if role == "A" else self.inst.k * self.inst.n
        return {"A": self.inst.a, "B": self.inst.b, "C": self.inst.c}[role].elements

    def elements(self, role: str) -> int:
        """Elements of role per lane for the whole macro tile."""
        steps = {"A": self.k_steps, "B": self.k_steps * self.n_steps, "C": self.n_steps}[role]
        return steps * self.per_instruction(role)

    def position(self, role: str, lane, v) -> tuple:
        """(row, col) in the macro tile of lane's element v of role (ints or Exprs)."""
        e = self.per_instruction(role)
        if self.from_shared and role != "C":
            cols = self.inst.k if role == "A" else self.inst.n
            row, col = (v % e) // cols, (v % e) % cols
        else:
            frag = {"A": self.inst.a, "B": self.inst.b, "C": self.inst.c}[role]
            row, col = frag.position(lane, v % e)
        step = v // e
        if role == "A":
            return row, col + self.inst.k * step
        if role == "C":
            return row, col + self.inst.n * step
        return row + self.inst.k * (step // self.n_steps), col + self.inst.n * (step % self.n_steps)

    def element(self, role: str, step_k: int, step_n: int, e: int) -> int:
        """The macro element of an instruction's element e: its A (step_k), B (step_k, step_n)
        or C (step_n) operand."""
        per = self.per_instruction(role)
        step = {"A": step_k, "B": step_k * self.n_steps + step_n, "C": step_n}[role]
        return step * per + e


def fragments(tv: TensorView) -> MacroFragments:
    op = tv.definition
    return MacroFragments(op.macro, op.macro.instruction(op.inputs[0].dtype))


def is_mma_sync(macro: MmaMacro) -> bool:
    return macro.arch in (MmaArch.Turing, MmaArch.Ampere)


# -- the execution model of each role ----------------------------------------------------------------

def mma_execution(tv: TensorView, launch: dict, role: str, names: dict[int, str] | None = None):
    """tv's execution model (model/execution.py) seen from role's fragment: the Mma axes' indices
    are lane threadIdx.x's element `ELEMENT_VARS[role]` of the macro tile (the accumulate reads A
    and B at these points; C is where the accumulator's elements are stored)."""
    from .execution import CondKind, TensorExecution, store_execution, tensor_execution

    ex = (store_execution if role == "C" else tensor_execution)(tv, launch, names)
    axes = mma_axes(tv)
    frag = fragments(tv)
    row, col = frag.position(role, var(LANE.cuda_name), var(ELEMENT_VARS[role]))
    value = {"A": {"M": row, "K": col, "N": const(0)}, "B": {"K": row, "N": col, "M": const(0)},
             "C": {"M": row, "N": col, "K": const(0)}}[role]
    subs = {}
    for r in ("M", "N", "K"):
        e = ex.env[axes.of(r).uid]
        if e.op == "var":
            subs[e.value] = value[r]
    out = ex.renamed(subs)
    # the lanes store different elements: no single writer along them
    conds = tuple(c for c in out.conds if not (c.kind is CondKind.SINGLE_WRITER and c.lhs == var(LANE.cuda_name)))
    ranges = {k: v for k, v in out.ranges.items() if k not in subs}
    ranges[ELEMENT_VARS[role]] = const(frag.elements(role))
    ranges[LANE.cuda_name] = const(frag.inst.threads)  # MMA-WARP-COLLECTIVE: blockDim.x is the warp(group)
    return TensorExecution(out.tensor, out.env, ranges, out.indices, conds, out.launch_index)


def tile_conds(tv: TensorView, ex, conds) -> tuple[list, list]:
    """`conds` (of tv's plain execution `ex`) split into (those the whole warp shares, the holes of
    the K tile); the holes of the M and N tiles are dropped: they only make rows and columns of
    the tile that no store reads."""
    axes = mma_axes(tv)
    names = {}
    for role in ("M", "N", "K"):
        e = ex.env[axes.of(role).uid]
        if e.op == "var":
            names[e.value] = role
    uniform, k_holes = [], []
    for c in conds:
        used = {names[v] for v in (c.lhs.free_vars() | c.rhs.free_vars()) if v in names}
        if not used:
            uniform.append(c)
        elif "K" in used:
            k_holes.append(c)
    return uniform, k_holes


__all__ = ["ELEMENT_VARS", "INSTRUCTION_AXES", "LANE", "MMA_OP", "MacroFragments", "MmaAxes", "axis_roles", "check_macro",
           "fragments", "fused_multiply_sum", "inner_tile", "is_mma", "is_mma_op", "is_mma_sync",
           "matmul", "mma_axes", "well_formed", "mma_execution", "root_of", "tile_conds"]
