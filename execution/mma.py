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

from ..model.expr import const, var
from ..model.iterdomain import IterDomain, Split
from ..hw.mma import WARP, MmaInstruction, macro_instruction
from ..model.mma_op import ELEMENT_VARS, LANE, is_mma
from ..model.options import MmaArch, MmaMacro
from ..model.tensor import TensorView
from ..model.types import ParallelType
from ..model.reduction import _derives


def well_formed(tv: TensorView) -> bool:
    """Whether tv is an MmaOp on the tensor cores whose fragments are defined: an mma.sync macro
    whose tile is tv's three innermost loop IDs, bound to Mma (no MMA-TARGET, MMA-DTYPE or
    MMA-SHAPE problem, model/mma_rules.py)."""
    from .mma_rules import CODES, shape_problems

    if not is_mma(tv):
        return False
    found: dict = {code: [] for code in CODES}
    return shape_problems(tv, None, found) and not any(found.values())


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
    return MacroFragments(op.macro, macro_instruction(op.macro, op.inputs[0].dtype))


def is_mma_sync(macro: MmaMacro) -> bool:
    return macro.arch in (MmaArch.Turing, MmaArch.Ampere)


def mma_execution(tv: TensorView, launch: dict, role: str, names: dict[int, str] | None = None):
    """tv's execution model (model/execution.py) seen from role's fragment: the Mma axes' indices
    are lane threadIdx.x's element `ELEMENT_VARS[role]` of the macro tile (the accumulate reads A
    and B at these points; C is where the accumulator's elements are stored)."""
    from .statements import CondKind, TensorExecution, store_execution, tensor_execution

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
