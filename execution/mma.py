"""How an MmaOp (model/mma_op.py) maps onto the tensor cores: the role of each output axis (M, N,
K or batch: axis_roles), D's Mma loop IDs by role (mma_axes), the macro as its instructions with
each role's fragment over the whole macro tile (MacroFragments, from hw/mma.py's maps), and the
MMA-TARGET, MMA-DTYPE and MMA-SHAPE problems (shape_problems), which conditions/mma.py gathers with
the MMA rules' other structural conditions. mma_execution.py views D's statement through these
fragments.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.iterdomain import IterDomain, Split
from ..hw.mma import WARP, MmaInstruction, macro_instruction
from ..model.mma_op import is_mma
from ..model.options import MmaArch, MmaMacro
from ..model.tensor import TensorView
from ..model.types import MemoryType, ParallelType
from ..model.reduction import _derives
from ..model.mma_op import INSTRUCTION_AXES
from .derive import per_fusion
from .problems import Problem


def well_formed(tv: TensorView) -> bool:
    """Whether tv is an MmaOp on the tensor cores whose fragments are defined: an mma.sync macro
    whose tile is tv's three innermost loop IDs, bound to Mma (no MMA-TARGET, MMA-DTYPE or
    MMA-SHAPE problem: shape_problems)."""
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


@per_fusion
def _derived(tv: TensorView) -> dict[int, set[int]]:
    """model/reduction.py's _derives, once per tensor of a frozen fusion (read, never changed)."""
    return _derives(tv)


def root_of(tv: TensorView, i: IterDomain) -> list[IterDomain]:
    """The root IDs loop ID i derives from."""
    uids = _derived(tv).get(i.uid, set())
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


@per_fusion
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
    C: by N step), each instruction's elements as PTX numbers them. `a_in_registers`: a wgmma
    whose A is a register tensor (RS: the instruction's A register fragment, hw/mma.py
    wgmma_a16_position) rather than a shared tile read through a descriptor. A tcgen05.mma's
    roles are all whole tiles: A and B in shared memory, C (D) in tensor memory (in_tmem)."""

    macro: MmaMacro
    inst: MmaInstruction
    a_in_registers: bool = False

    @property
    def n_steps(self) -> int:
        return self.macro.n // self.inst.n

    @property
    def k_steps(self) -> int:
        return self.macro.k // self.inst.k

    @property
    def is_wgmma(self) -> bool:
        """wgmma: the whole warpgroup issues it asynchronously; B (and A unless a_in_registers)
        is read from shared memory through a descriptor (in_shared)."""
        return self.inst.threads > WARP

    @property
    def is_tcgen05(self) -> bool:
        """tcgen05.mma: one thread issues it asynchronously, A and B read from shared memory through
        descriptors, D accumulated in tensor memory (in_tmem)."""
        return self.macro.arch is MmaArch.Blackwell1CTA

    def in_shared(self, role: str) -> bool:
        """Whether operand `role` is a shared tile read through a descriptor: its "fragment" is
        the instruction's whole tile, element v at row v / cols, column v % cols."""
        return (self.is_wgmma or self.is_tcgen05) and role != "C" and not (role == "A" and self.a_in_registers)

    def in_tmem(self, role: str) -> bool:
        """Whether role is a tcgen05.mma's D: the whole tile in tensor memory, element v at row
        v / n, column v % n (hw/tcgen05.py accumulator_cell puts it in lane row, column col)."""
        return self.is_tcgen05 and role == "C"

    def whole_tile(self, role: str) -> bool:
        return self.in_shared(role) or self.in_tmem(role)

    def per_instruction(self, role: str) -> int:
        if self.whole_tile(role):
            return {"A": self.inst.m * self.inst.k, "B": self.inst.k * self.inst.n, "C": self.inst.m * self.inst.n}[role]
        return {"A": self.inst.a, "B": self.inst.b, "C": self.inst.c}[role].elements

    def elements(self, role: str) -> int:
        """Elements of role per lane for the whole macro tile."""
        steps = {"A": self.k_steps, "B": self.k_steps * self.n_steps, "C": self.n_steps}[role]
        return steps * self.per_instruction(role)

    def position(self, role: str, lane, v) -> tuple:
        """(row, col) in the macro tile of lane's element v of role (ints or Exprs)."""
        e = self.per_instruction(role)
        if self.whole_tile(role):
            cols = {"A": self.inst.k, "B": self.inst.n, "C": self.inst.n}[role]
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
    inst = macro_instruction(op.macro, op.inputs[0].dtype)
    return MacroFragments(op.macro, inst, inst.threads > WARP and op.inputs[0].memory_type is MemoryType.Local)


def is_mma_sync(macro: MmaMacro) -> bool:
    return macro.arch in (MmaArch.Turing, MmaArch.Ampere)


def is_tcgen05(macro: MmaMacro) -> bool:
    """A Blackwell1CTA macro: tcgen05.mma, sm_100a."""
    return macro.arch is MmaArch.Blackwell1CTA


def instruction_family(macro: MmaMacro) -> str:
    """"mma.sync", "wgmma" or "tcgen05.mma": the instruction a macro's tiles issue."""
    return "mma.sync" if is_mma_sync(macro) else "tcgen05.mma" if is_tcgen05(macro) else "wgmma"


CODES = ("MMA-TARGET", "MMA-DTYPE", "MMA-SHAPE", "MMA-WARP-COLLECTIVE", "MMA-OPERAND-LAYOUT")


def shape_problems(tv, target, out: dict[str, list[Problem]] | None = None) -> bool:
    """Add to `out` the MMA-TARGET, MMA-DTYPE and MMA-SHAPE problems of MmaOp output tv (every
    code of CODES a key); whether the other rules can go on (tv has a macro and Mma axes by role)."""
    out = out if out is not None else {code: [] for code in CODES}
    op = tv.definition
    where = dict(tensor=tv.name, location=op.origin or tv.origin)
    mma_ids = [(k, i) for k, i in enumerate(tv.loop) if i.parallel_type is ParallelType.Mma]
    macro = op.macro
    if macro is None:
        if mma_ids:
            out["MMA-SHAPE"].append(Problem(
                f"{tv.name} binds {len(mma_ids)} axes to Mma but its op has no macro: which instruction computes "
                f"the tile is not said",
                hint=f"{tv.name}.definition.set_macro(tp.MmaMacro.Ampere_16_8_16) (bfloat16 / float16) or "
                     f"tp.MmaMacro.Ampere_16_8_8 (float32 as tf32), with the macro's M, N, K tile as the Mma axes",
                values={"mma_axes": len(mma_ids)}, **where))
        return False
    # the macro's target and operand types are the set_macro call's choice: point there
    at_macro = dict(where, location=op.macro_origin or where["location"])
    if macro.arch is MmaArch.Hopper and target is not None and target.name != "sm_90a":
        out["MMA-TARGET"].append(Problem(
            f"MmaMacro.{macro.name} is a wgmma, which exists on sm_90a only; {target.name} has none",
            hint="use tp.MmaMacro.Ampere_16_8_16 (bfloat16 / float16) or tp.MmaMacro.Ampere_16_8_8 (float32 as tf32), "
                 "or target sm_90a" + (f"; on {target.name} the tensor cores take tcgen05.mma: "
                                       f"tp.MmaMacro.Blackwell1CTA_128_N_16, D in tensor memory" if target.has_tmem else ""),
            values={"m": macro.m, "n": macro.n, "k": macro.k}, **at_macro))
        return False
    if is_tcgen05(macro) and target is not None and not target.has_tmem:
        out["MMA-TARGET"].append(Problem(
            f"MmaMacro.{macro.name} is a tcgen05.mma, which exists on sm_100a only (tensor memory, Blackwell); "
            f"{target.name} has none",
            hint=f"verify for target sm_100a, or use tp.MmaMacro.Hopper_64_{macro.n}_16 (wgmma, sm_90a) with the "
                 f"accumulators in registers",
            values={"m": macro.m, "n": macro.n, "k": macro.k}, **at_macro))
        return False
    dtypes = [t.dtype.name for t in op.inputs]
    if any(d not in macro.input_dtypes for d in dtypes):
        out["MMA-DTYPE"].append(Problem(
            f"MmaMacro.{macro.name} takes {' or '.join(macro.input_dtypes)} operands; {tv.name}'s are "
            f"{' and '.join(sorted(set(dtypes)))}",
            hint=("float32 operands run on the tensor cores as tf32: set_macro(tp.MmaMacro.Ampere_16_8_8)"
                  if dtypes[0] == "float32" else
                  "bfloat16 / float16 operands: set_macro(tp.MmaMacro.Ampere_16_8_16)"),
            values={"operand_bits": 8 * op.inputs[0].dtype.bytes}, **at_macro))
        return False
    axes = mma_axes(tv)
    want = {"M": macro.m, "N": macro.n, "K": macro.k}
    if axes is None or [i for _, i in mma_ids] != list(tv.loop[-INSTRUCTION_AXES:]):
        out["MMA-SHAPE"].append(Problem(
            f"{tv.name}'s Mma axes must be its three innermost loop IDs, one tiling each of its M, N and K axes; "
            f"it has {len(mma_ids)} Mma axes" + (f" at positions {[k for k, _ in mma_ids]}" if mma_ids else ""),
            hint=f"split {tv.name}'s M, N and K axes by {macro.m}, {macro.n} and {macro.k}, move the inner parts to "
                 f"the end (reorder) and bind them to tp.ParallelType.Mma",
            values={"mma_axes": len(mma_ids), "loop_axes": len(tv.loop)}, **where))
        return False
    for role in ("M", "N", "K"):
        i = axes.of(role)
        if i.static_extent != want[role] or not inner_tile(tv, i):
            out["MMA-SHAPE"].append(Problem(
                f"{tv.name}'s {role} Mma axis {i.label()} must be the inner {want[role]} of a split of its {role} axis "
                f"(MmaMacro.{macro.name} is {macro.m} x {macro.n} x {macro.k})"
                + ("" if inner_tile(tv, i) else "; it is not an inner split of that axis"),
                hint=f"split {tv.name}'s {role} axis by {want[role]} and bind the inner part to Mma",
                ids=(i.name,), values={"extent": i.static_extent or -1, "macro_extent": want[role]}, **where))
    return True
