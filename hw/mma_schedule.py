"""Scheduling a register tensor as a tensor-core fragment: tp.schedule_mma_fragment.

A fragment map of hw/mma.py sends (lane, element v) to a tile position whose row and column
are sums of digits of the lane (g = l / 4: 8 values, q = l % 4: 4 values) and of v. For
mma.sync m16n8k8 tf32, A: row = g + 8 v0, col = q + 4 v1 (v = 2 v1 + v0). Splitting the tile's
row and column axes into those digits, merging g and q into the lane axis (bound to TIDx) and
the v digits, most significant first, into the element axis, makes the schedule place in each
lane's registers exactly what the instruction reads. The verifier still proves it
(MMA-OPERAND-LAYOUT, MMA-ACCUM-LAYOUT): this only writes the splits, merges and reorders a
user would.

A wgmma (Hopper_64_N_16) spreads its fragments over a warpgroup: the thread T = 32 w + 4 g + q
adds the warp w (16 rows each) to the lane digits. Its accumulators ("C") and its A in registers
(the RS form, a 64 x 16 tile whatever N is: the accumulator digits of N = 16) are fragments; its
B is always read from shared memory through a descriptor.

A macro of several instructions (Ampere_16_16_16: two m16n8k16 along N) adds its step digits
above the instruction's: the N step j moves B and C by 8 columns, the K step by the
instruction's k (MacroFragments numbers elements instruction by instruction).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.errors import ScheduleError
from ..model.fusion import is_mma_op
from ..model.tensor import TensorView
from .mma import WARP, macro_instruction
from ..model.options import MmaMacro, MmaOperand
from ..model.types import ParallelType

# instruction fragments as digits: (row digits, col digits), each outermost first, a digit
# (name, extent); v digits are named by their weight in v ("v1": v // 2 % 2, ...)
QUAD = 4  # the lanes q = l % 4 that share a fragment row (quads=True puts them on TIDx)
_C = ((("v2", 2), ("g", 8)), (("q", 4), ("v1", 2)))  # C: (g + 8 (v / 2), 2q + v % 2)


def _wgmma_c(n: int):
    """wgmma's D over the warpgroup's threads T = 32 w + 4 g + q: (16 w + g + 8 ((v / 2) % 2),
    8 (v / 4) + 2q + v % 2), hw/mma.py wgmma_d_position."""
    return (("w", 4), ("v2", 2), ("g", 8)), (("v4", n // 8), ("q", 4), ("v1", 2))


# wgmma m64nNk16's A from registers (RS), 16-bit: (16 w + g + 8 ((v / 2) % 2), 2q + v % 2 + 8 (v / 4)),
# hw/mma.py wgmma_a16_position: D's digits with N = 16, each warp's 16 rows holding mma.sync m16n8k16's A
_WGMMA_A16 = _wgmma_c(16)


_RECIPES = {
    ("tf32", 8, "A"): ((("v1", 2), ("g", 8)), (("v2", 2), ("q", 4))),  # (g + 8 (v % 2), q + 4 (v / 2))
    ("tf32", 8, "B"): ((("g", 8),), (("v1", 2), ("q", 4))),  # (n, k) = (g, q + 4 v)
    ("16", 16, "A"): ((("v2", 2), ("g", 8)), (("v4", 2), ("q", 4), ("v1", 2))),
    ("16", 16, "B"): ((("g", 8),), (("v2", 2), ("q", 4), ("v1", 2))),  # (g, 2q + v % 2 + 8 (v / 2))
    ("16", 8, "A"): ((("v2", 2), ("g", 8)), (("q", 4), ("v1", 2))),
    ("16", 8, "B"): ((("g", 8),), (("q", 4), ("v1", 2))),
}


@dataclass(frozen=True)
class _Digit:
    name: str
    extent: int
    weight: int  # in v (0 for the lane digits)


def _digits(macro: MmaMacro, operand: str, dtype) -> tuple[list[_Digit], list[_Digit]]:
    """The row and column digits of the macro tile's fragment, outermost first."""
    inst = macro_instruction(macro, dtype)
    key = ("tf32" if inst.input_type == "tf32" else "16", inst.k, operand)
    if inst.threads > WARP:
        rows, cols = _WGMMA_A16 if operand == "A" else _wgmma_c(inst.n)
    else:
        rows, cols = _C if operand == "C" else _RECIPES[key]
    per = {"A": inst.a, "B": inst.b, "C": inst.c}[operand].elements

    def digit(name: str, extent: int) -> _Digit:
        return _Digit(name, extent, int(name[1:]) if name.startswith("v") else 0)

    rows = [digit(*d) for d in rows]
    cols = [digit(*d) for d in cols]
    n_steps, k_steps = macro.n // inst.n, macro.k // inst.k
    # macro steps, above the instruction's elements: A by K step; B by K step then N step; C by N step
    if operand == "A" and k_steps > 1:
        cols.insert(0, _Digit("k_step", k_steps, per))
    if operand == "B":
        if n_steps > 1:
            rows.insert(0, _Digit("n_step", n_steps, per))
        if k_steps > 1:
            cols.insert(0, _Digit("k_step", k_steps, per * n_steps))
    if operand == "C" and n_steps > 1:
        cols.insert(0, _Digit("n_step", n_steps, per))
    return rows, cols


def _check_tensor(fn: str, tv) -> None:
    if not isinstance(tv, TensorView):
        raise ScheduleError(f"{fn}: expected a TensorView, got {type(tv).__name__} {tv!r:.60}")


def _lay_out(tv, rows: list[_Digit], cols: list[_Digit], quads: bool = False, split_elements: bool = False) -> None:
    """tv's two innermost loop axes, the tile's rows and columns, split into their digits and
    merged into [.., lane (TIDx), element]; with `quads`, [.., TIDy, TIDx{4}, element]: the lane
    split into the quad (its 4 threads, q, on TIDx) and the quads (on TIDy). Columns that are
    reduction axes (a row reduction of the tile) keep their element digits apart, the rows' first:
    [.., TIDy, rTIDx{4}, v2, rv4, rv1]; a broadcast column axis (a row vector, `cols` empty) stays
    innermost: [.., TIDy, v2, b]; a broadcast row axis (a column vector, `rows` empty, quads) stays
    where it is: [.., b, TIDx{4}, v4 v1]. With `split_elements` the element digits stay separate
    axes in the fragment's order, reduced or not ([.., TIDy, TIDx{4}, v4, v2, v1] and
    [.., TIDy, rTIDx{4}, rv4, v2, rv1]), so that the tile's elementwise ops and a row reduction's
    in-thread part can share one loop."""
    reduced = tv.loop[-1].is_reduction
    at = len(tv.loop) - 2 + (not rows)  # where the digits start: after a column vector's broadcast rows
    for digits, pos in ((cols, at + bool(rows)), (rows, at)):  # the columns first: the rows' position stays
        for d in reversed(digits[1:]):
            tv.split(pos, d.extent)
            # [.., outer, d]: the outer part is split further at the same position
    order = rows + cols  # the loop axes now, outermost first
    lane = [d for d in order if d.name in ("w", "g", "q")]  # w: a wgmma's warp in the warpgroup
    reduced_last = reduced and not split_elements
    elements = sorted((d for d in order if d.weight), key=lambda d: (d in cols and reduced_last, -d.weight))
    wanted = lane + elements
    tv.reorder({at + order.index(d): at + k for k, d in enumerate(wanted)})
    quad = [d for d in lane if d.name == "q"]
    for _ in range(len(lane) - 1 - (quads and bool(quad))):  # (w,) g, q -> the thread; (w,) g with quads
        tv.merge(at)
    if not reduced and not split_elements:
        for _ in range(len(elements) - 1):
            tv.merge(at + 1 + (quads and bool(quad) and bool(rows)))  # after the thread axes
    if quads and quad and not rows:  # a column vector: the quad's threads, every quad holding the columns
        tv.axis(at).parallelize(ParallelType.TIDx)
    elif quads and quad:
        tv.axis(at).parallelize(ParallelType.TIDy)
        tv.axis(at + 1).parallelize(ParallelType.TIDx)
    elif quads:
        tv.axis(at).parallelize(ParallelType.TIDy)  # a row vector: the quad's threads all hold its rows
    else:
        tv.axis(at).parallelize(ParallelType.TIDx)


def schedule_mma_fragment(tv, macro: MmaMacro, operand, dtype=None, *, quads: bool = False,
                          split_elements: bool = False):
    """Schedule tv's two innermost loop axes, one instruction tile of `macro` for `operand`, as
    that operand's register fragment: [.., rows, cols] -> [.., lane (TIDx), v]; with `quads`,
    [.., quad (TIDy), lane in the quad (TIDx{4}), v]: the same threads (the linear thread index
    threadIdx.x + 4 threadIdx.y is the lane), with the 4 threads that share each fragment row
    alone on TIDx, so that a reduction over the tile's columns (a row max of attention's scores)
    combines over TIDx by warp shuffles. With quads, a C tile's row reduction ([.., M, rN]: its
    rows as the fragment's, [.., TIDy, rTIDx{4}, v2, rv4, rv1]) and a row vector broadcast along
    the tile ([.., M, b]: [.., TIDy, v2, b], every thread of a quad holding its rows) are laid out
    too, so that a row's max or sum and its use in the tile stay in the threads that hold the row;
    so is a column vector broadcast along the tile's rows ([.., b, N]: [.., b, TIDx{4}, v], every
    quad holding the columns its threads hold in the tile: attention's key indices).
    The tile is (M, K) for A, (N, K) for B and (M, N) for C (the accumulators), of the macro's extents. For a
    wgmma (Hopper) macro, A (64 x 16: the RS form, A read from registers) and C, over the
    warpgroup's 128 threads; its B has no register fragment (ScheduleError).
    `dtype`: the operands' dtype (default tv's; for C, the MmaOp's operands', default
    bfloat16 for the 16-bit macros). `split_elements`: a thread's elements as one loop axis
    per digit, in the fragment's order ([.., TIDx, v4, v2, v1] for a C tile; a row reduction's
    [.., rTIDx{4}, rv4, v2, rv1]) rather than one merged axis, so that the tile's elementwise ops
    and a row reduction's in-thread part, inlined at the innermost position, share one loop
    (attention's fused softmax). Returns tv.

        tp.schedule_mma_fragment(a_regs, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.A)"""
    _check_tensor("schedule_mma_fragment", tv)
    if not isinstance(macro, MmaMacro):
        raise ScheduleError(f"schedule_mma_fragment: macro must be a tp.MmaMacro, got {macro!r:.60}")
    role = operand.value if isinstance(operand, MmaOperand) else operand
    if role not in ("A", "B", "C"):
        raise ScheduleError(f"schedule_mma_fragment: operand must be tp.MmaOperand.A / .B or \"C\", got {operand!r}")
    if macro.arch.name == "Blackwell1CTA":
        raise ScheduleError(f"schedule_mma_fragment: MmaMacro.{macro.name} is a tcgen05.mma: one thread issues it on "
                            f"shared tiles read through descriptors, and its accumulators live in tensor memory "
                            f"({tv.name}.set_memory_type(tp.MemoryType.Tensor), read back by a TMemLoad); no operand "
                            f"is a register fragment")
    if macro.arch.name not in ("Turing", "Ampere") and not (macro.arch.name == "Hopper" and role in ("A", "C")):
        raise ScheduleError(f"schedule_mma_fragment: MmaMacro.{macro.name} is a wgmma, whose B is read from shared "
                            f"memory through a descriptor; only its A (wgmma's register form, RS) and its "
                            f"accumulators (\"C\") are register fragments")
    if not isinstance(split_elements, bool):
        raise ScheduleError(f"schedule_mma_fragment: split_elements must be True or False, got {split_elements!r}")
    if dtype is None:
        dtype = tv.dtype if role != "C" else macro.input_dtypes[-1]
    rows, cols = _digits(macro, role, dtype)
    want = {"A": (macro.m, macro.k), "B": (macro.n, macro.k), "C": (macro.m, macro.n)}[role]
    if len(tv.loop) < 2:
        raise ScheduleError(f"schedule_mma_fragment: {tv.name} needs two loop axes (the tile's rows and columns)")
    got = (tv.loop[-2].static_extent, tv.loop[-1].static_extent)
    rows_only = role == "C" and tv.loop[-1].is_broadcast  # a row vector broadcast along the tile's columns
    cols_only = role == "C" and tv.loop[-2].is_broadcast and not rows_only  # a column vector along its rows
    if rows_only:
        got, want, cols = (got[0], None), (want[0], None), []
    if cols_only:
        got, want, rows = (None, got[1]), (None, want[1]), []
    if (rows_only or tv.loop[-1].is_reduction) and not (role == "C" and quads):
        raise ScheduleError(f"schedule_mma_fragment: {tv.name}'s innermost axis {tv.loop[-1].label()} is a "
                            f"{'broadcast' if rows_only else 'reduction'} axis: a row "
                            f"{'vector' if rows_only else 'reduction'} of the C tile, laid out with quads=True "
                            f"(its rows on TIDy, the four threads of a row on TIDx) and operand \"C\"")
    if cols_only and not quads:
        raise ScheduleError(f"schedule_mma_fragment: {tv.name}'s rows axis {tv.loop[-2].label()} is a broadcast "
                            f"axis: a column vector of the C tile, laid out with quads=True (its columns on TIDx{{4}} "
                            f"and the registers, every quad holding them)")
    if got != want:
        raise ScheduleError(f"schedule_mma_fragment: {tv.name}'s two innermost axes are {got[0]} x {got[1]}; "
                            f"the {role} tile of MmaMacro.{macro.name} is {want[0]} x {want[1]} "
                            f"({'M x K' if role == 'A' else 'N x K' if role == 'B' else 'M x N'})")
    _lay_out(tv, rows, cols, quads, split_elements)
    return tv




def _accumulator_digits(m: int, n: int) -> tuple[list[_Digit], list[_Digit]]:
    """An m x n accumulator tile as its warps' C fragments, the digits of _wgmma_c with m / 16
    warps (one for mma.sync, four for wgmma); digits of extent 1 left out. For m = 16 this is
    the mma.sync C fragment with the N steps of a macro as v4 (MacroFragments numbers an N step
    4 elements on)."""
    rows = (("w", m // 16), ("v2", 2), ("g", 8))
    cols = (("v4", n // 8), ("q", 4), ("v1", 2))
    return ([_Digit(name, e, int(name[1:]) if name.startswith("v") else 0) for name, e in ds if e > 1]
            for ds in (rows, cols))


def mma_output_allocation(tv, *, quads: bool = False) -> list:
    """The allocation domain of an MmaOp's register output: its accumulators as the macro's C
    fragment, [.., reduction axes, warp and tile axes, thread (TIDx), element] (nvFuser's
    MmaSwizzler::scheduleMmaOutputAllocation). The loop axes before the first reduction axis
    (and before the tile) stay outermost, the reduction axes follow (no storage), then the
    other axes, whose innermost two, the macro's M and N tile, become the fragment's thread and
    element axes: a single tile [M, N, rK] is allocated as [rK, thread, element]. Call it
    before binding the tile to Mma (a bound axis is not split); tv's loop domain is left as it
    was; returns the IDs for set_allocation_domain.

    On any other tensor whose two innermost loop axes are an M x N accumulator tile (M a
    multiple of 16: M / 16 warps; N a multiple of 8), an epilogue tensor, it returns those axes
    as the same fragments, [.., thread (TIDx), element], for set_loop_domain (and, in registers,
    set_allocation_domain), as nvFuser applies scheduleMmaOutputAllocation to the MmaOp's
    consumers.

        d.set_allocation_domain(tp.mma_output_allocation(d), True)
        epilogue.set_loop_domain(tp.mma_output_allocation(epilogue))

    `quads`: the fragment's thread axis as [TIDy, TIDx{4}] (schedule_mma_fragment's quads), for
    a kernel whose fragments keep a row's four threads on TIDx."""
    _check_tensor("mma_output_allocation", tv)
    if not is_mma_op(tv.definition):
        return _epilogue_fragments(tv, quads)
    if tv.definition.macro is None:
        raise ScheduleError(f"mma_output_allocation: {tv.name} is the output of an MmaOp without a macro "
                            f"({tv.name}.definition.set_macro(tp.MmaMacro....) first)")
    loop = list(tv.loop)
    macro = tv.definition.macro
    tile = [i.static_extent for i in loop[-3:]]
    if len(loop) < 3 or tile != [macro.m, macro.n, macro.k] or not loop[-1].is_reduction:
        raise ScheduleError(f"mma_output_allocation: {tv.name}'s three innermost loop axes must be the M, N and K "
                            f"tile of MmaMacro.{macro.name} ({macro.m}, {macro.n}, {macro.k}), not yet bound to Mma; "
                            f"they are {tile}")
    # the tile's M and N always follow the reduction axes ([M, N, rK] -> [rK, M, N])
    first = min(next(k for k, i in enumerate(loop) if i.is_reduction), len(loop) - 3)
    order = loop[:first] + [i for i in loop[first:] if i.is_reduction] + [i for i in loop[first:] if not i.is_reduction]
    tv.set_loop_domain(order)
    try:
        schedule_mma_fragment(tv, macro, "C", dtype=tv.definition.inputs[0].dtype, quads=quads)
        return list(tv.loop)
    finally:
        tv.set_loop_domain(loop)


def _epilogue_fragments(tv, quads: bool) -> list:
    """mma_output_allocation of a tensor that no MmaOp defines: its innermost M x N tile as the
    accumulators' fragments; tv's loop domain is left as it was."""
    loop = list(tv.loop)
    tile = [i.static_extent for i in loop[-2:]]
    bound = [i for i in loop[-2:] if i.parallel_type is not ParallelType.Serial]
    if (len(loop) < 2 or None in tile or tile[0] % 16 or tile[1] % 8 or any(i.is_reduction for i in loop[-2:])
            or bound):
        raise ScheduleError(f"mma_output_allocation: {tv.name} is no MmaOp output, so its two innermost loop axes must "
                            f"be an accumulator tile, M x N with M a multiple of 16 and N of 8, not reductions and not "
                            f"yet parallelized; they are {' x '.join(str(i.label()) for i in loop[-2:])}")
    rows, cols = _accumulator_digits(*tile)
    try:
        _lay_out(tv, rows, cols, quads)
        return list(tv.loop)
    finally:
        tv.set_loop_domain(loop)


__all__ = ["mma_output_allocation", "schedule_mma_fragment"]
