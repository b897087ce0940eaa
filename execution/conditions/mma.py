"""What an MmaOp's schedule must be for the tensor cores to compute it (model/mma_op.py): the
structural conditions of the MMA rules, one function for the verifier (verifier/rules/mma.py)
and the code generator (codegen/lower/mma.py), which treats a problem as a tileproof bug.

    MMA-TARGET            the macro's instruction exists on the target and tileproof lowers it
                          (mma.sync; wgmma on sm_90a only; tcgen05.mma on sm_100a only)
    MMA-DTYPE             both operands have a dtype the macro takes
    MMA-SHAPE             a macro and Mma axes come together; the output's three innermost loop IDs
                          are its Mma axes, one per role, of the macro's extents, each an inner
                          tile of its root (its index adds to the root's with stride 1); no other
                          tensor has Mma axes
    MMA-WARP-COLLECTIVE   a warp (mma.sync) or warpgroup (wgmma) issues each tile: the kernel
                          launches exactly its 32 or 128 threads along TIDx (or a divisor of them
                          along TIDx and the rest along TIDy, which the output then leaves
                          unbound), the output binds
                          none of its axes to TIDx and none to Vectorize or Bulk, and lives in
                          registers (or global memory, for mma.sync); tcgen05.mma: the block's
                          thread 0 issues it, no axis of the output on a thread index, Vectorize
                          or Bulk, the output in tensor memory
    MMA-OPERAND-LAYOUT    (structural part) mma.sync's operands are register (Local) tensors:
                          the instruction reads its fragments from registers; wgmma's are shared
                          tensors (A may be a register fragment: RS), read through matrix
                          descriptors (WGMMA-SMEM-LAYOUT), that a TMA
                          loads or the threads store (the barrier before the wgmma then fences
                          their writes for the async proxy: SMEM-RACE); not cp.async copies;
                          tcgen05.mma's both shared tiles (SS) under the same terms
    MMA-ACCUM-LAYOUT      (structural part) a wgmma's register output is allocated as the C
                          fragment (no Mma axis in its allocation: tp.mma_output_allocation)
"""

from __future__ import annotations

from ...model.expr import const, product, try_int
from ..indexing import block_dims
from ..mma_execution import split_lanes
from ..problems import Problem
from .lowering import registers_of
from ...model.fusion import is_mma_op
from ..mma import is_mma_sync, is_tcgen05
from ...hw.cp_async import is_cp_async
from ...model.types import MemoryType, ParallelType, THREAD_TYPES
from ..mma import CODES, shape_problems
from ..warp_roles import registers_per_thread, specialized_tensors
from ..allocation import compute_allocation
from ..circular import specialization
from ..loops import loop_groups, statement_path



def problems(fusion, order, target) -> dict[str, list[Problem]]:
    """Each MMA code -> its problems in the tensors of `order` (the computed tensors)."""
    out: dict[str, list[Problem]] = {code: [] for code in CODES}
    for tv in order:
        op = tv.definition
        if not is_mma_op(op):
            for k, i in enumerate(tv.loop):
                if i.parallel_type is ParallelType.Mma:
                    out["MMA-SHAPE"].append(Problem(
                        f"{tv.name}'s axis {k} ({i.label()}) is bound to Mma, but {tv.name} is computed by `{op}`, "
                        f"not by a tensor-core op",
                        hint=f"bind Mma on the output of tp.fused_multiply_sum / tp.matmul only; schedule {tv.name}'s "
                             f"axis {k} as a loop (Serial, Unroll) or on threads",
                        tensor=tv.name, ids=(i.name,), values={"axis": k}, location=i.parallel_origin or tv.origin))
            continue
        if shape_problems(tv, target, out):
            _warp_problems(tv, out, fusion)
    return out


def _warp_problems(tv, out: dict[str, list[Problem]], fusion) -> None:
    """Add the MMA-WARP-COLLECTIVE and MMA-OPERAND-LAYOUT (registers) problems of MmaOp output tv."""
    op = tv.definition
    if is_tcgen05(op.macro):
        _tcgen05_problems(tv, out)
        return
    where = dict(tensor=tv.name, location=op.origin or tv.origin)
    wgmma = not is_mma_sync(op.macro)
    threads = 128 if wgmma else 32
    dims = block_dims(fusion)
    lanes = dims.get(ParallelType.TIDx, const(1))
    split = split_lanes(dims, threads)  # the warp(group)'s threads over TIDy and TIDx
    if split is not None:
        for k, i in enumerate(tv.loop):
            if i.parallel_type is ParallelType.TIDy:
                out["MMA-WARP-COLLECTIVE"].append(Problem(
                    f"{tv.name}'s axis {k} ({i.label()}) is bound to TIDy, whose indices are part of the "
                    f"{'warpgroup' if wgmma else 'warp'} that issues each instruction (blockDim.x = {split}, the "
                    f"{threads} threads of an instruction span TIDx and TIDy)",
                    hint=f"bind {tv.name}'s axis {k} to TIDz or leave it Serial", ids=(i.name,), values={"axis": k},
                    **where))
    elif lanes != const(threads):
        out["MMA-WARP-COLLECTIVE"].append(Problem(
            (f"a warpgroup issues each wgmma of {tv.name}: the kernel must launch exactly 128 threads along TIDx "
             f"(the warpgroup's threads), and it launches {lanes}" if wgmma else
             f"a warp issues each mma.sync of {tv.name}: the kernel must launch exactly 32 threads along TIDx (the "
             f"lanes), and it launches {lanes}"),
            hint=("bind an axis of extent 128 to TIDx in the tensors that use TIDx (the accumulators' fragment: "
                  "tp.schedule_mma_fragment(..., \"C\")), and spread warpgroups over TIDy / TIDz; or split that axis "
                  "over TIDy and TIDx (TIDy{32} x TIDx{4}: a row's quad on TIDx)" if wgmma else
                  "bind an axis of extent 32 to TIDx in the tensors that use TIDx (the operands' fragments: 32 "
                  "lanes), and spread warps over TIDy / TIDz"),
            # a symbolic blockDim.x is in the message; no number stands for it
            values={**({"blockDim_x": lanes.value} if lanes.op == "const" else {}), "warp": threads}, **where))
    for k, i in enumerate(tv.loop):
        if i.parallel_type in (ParallelType.TIDx, ParallelType.Vectorize, ParallelType.Bulk):
            out["MMA-WARP-COLLECTIVE"].append(Problem(
                f"{tv.name}'s axis {k} ({i.label()}) is bound to {i.parallel_type}; the lanes of an MMA tile are "
                f"its Mma axes, and each warp (TIDy, TIDz, loops) issues whole tiles",
                hint=f"bind {tv.name}'s axis {k} to TIDy / TIDz or leave it Serial",
                ids=(i.name,), values={"axis": k}, **where))
    if tv.memory_type not in ((MemoryType.Local,) if wgmma else (MemoryType.Local, MemoryType.Global)):
        out["MMA-WARP-COLLECTIVE"].append(Problem(
            f"{tv.name} is in {tv.memory_type} memory; an MmaOp's accumulators are stored from the lanes' "
            f"registers to registers (Local)" + ("" if wgmma else " or global memory"),
            hint=f"leave {tv.name} in registers and copy it (tp.set) where it must go",
            values={"memory": 0}, memory=(tv.name, MemoryType.Local), **where))
    for arg, t in zip("ab", op.inputs):
        def operand_problem(why: str, hint: str, arg=arg, t=t) -> None:
            out["MMA-OPERAND-LAYOUT"].append(Problem(f"{tv.name}'s operand {arg} ({t.name}) {why}", hint=hint,
                                                     values={"operand": 0 if arg == "a" else 1}, **where))

        if wgmma and arg == "a" and t.memory_type is MemoryType.Local:
            continue  # wgmma's register form (RS): the A fragment in registers, proved as mma.sync's operands
        if wgmma and t.memory_type is not MemoryType.Shared:
            operand_problem(f"is in {t.memory_type} memory; wgmma reads " +
                            ("B from shared memory, through a matrix descriptor" if arg == "b" else
                             "A from shared memory through a matrix descriptor, or from registers (its fragment)"),
                            f"load {t.name} into shared memory first ({t.name}.cache_after(tp.LoadStoreOpType.TMA), "
                            f"set_memory_type(tp.MemoryType.Shared)), allocated as the TMA's swizzled boxes")
        elif wgmma and (t.definition is None or is_cp_async(t.definition)):
            operand_problem(f"is " + (f"written by `{t.definition}`" if t.definition is not None else "an input") +
                            "; tileproof issues wgmma on shared tiles the TMA loads or the threads store (then "
                            "fence.proxy.async and a barrier), not on cp.async copies (no proxy fence after their wait)",
                            f"fill {t.name} with {t.name} = x.cache_after(tp.LoadStoreOpType.TMA), or a plain copy")
        elif not wgmma and t.memory_type is not MemoryType.Local:
            operand_problem(f"is in {t.memory_type} memory; mma.sync reads its operands from each lane's registers",
                            f"copy {t.name} into registers first (r = {t.name}.cache_after(), or "
                            f"tp.LoadStoreOpType.LdMatrix from shared memory), scheduled so each lane holds its fragment")


def _tcgen05_problems(tv, out: dict[str, list[Problem]]) -> None:
    """MMA-WARP-COLLECTIVE and MMA-OPERAND-LAYOUT (structural) for a tcgen05.mma: one thread issues
    each tile (no thread count to match, and no axis of the output on a thread index, Vectorize or
    Bulk: the block's thread 0 issues them all, and commits them), its
    accumulators are a tensor-memory tensor, both operands shared tiles the TMA loads or the threads
    store (SS: tileproof does not issue the TS form, A in tensor memory), not cp.async copies."""
    op = tv.definition
    where = dict(tensor=tv.name, location=op.origin or tv.origin)
    for k, i in enumerate(tv.loop):
        if i.parallel_type in THREAD_TYPES + (ParallelType.Vectorize, ParallelType.Bulk):
            out["MMA-WARP-COLLECTIVE"].append(Problem(
                f"{tv.name}'s axis {k} ({i.label()}) is bound to {i.parallel_type}; one thread of the block issues "
                f"every tcgen05.mma tile (its Mma axes), the loops (or blocks) around them issue the tiles in turn",
                hint=f"leave {tv.name}'s axis {k} Serial (or bind it to a block index)", ids=(i.name,),
                values={"axis": k}, **where))
    if tv.memory_type is not MemoryType.Tensor:
        out["MMA-WARP-COLLECTIVE"].append(Problem(
            f"{tv.name} is in {tv.memory_type} memory; tcgen05.mma ({op.macro.name}) accumulates in tensor memory",
            hint=f"{tv.name}.set_memory_type(tp.MemoryType.Tensor) with its M axis left of the dimension separator "
                 f"({tv.name}.set_tmem_dim_sep_pos(1)), and read it into registers with a TMemLoad "
                 f"(tp.set(...), op_type tp.LoadStoreOpType.TMemLoad)",
            values={"memory": 0}, **where))
    for arg, t in zip("ab", op.inputs):
        def operand_problem(why: str, hint: str, arg=arg, t=t) -> None:
            out["MMA-OPERAND-LAYOUT"].append(Problem(f"{tv.name}'s operand {arg} ({t.name}) {why}", hint=hint,
                                                     values={"operand": 0 if arg == "a" else 1}, **where))

        if t.memory_type is not MemoryType.Shared:
            operand_problem(f"is in {t.memory_type} memory; tileproof issues tcgen05.mma with both operands in shared "
                            f"memory (SS), read through matrix descriptors",
                            f"load {t.name} into shared memory first (tp.set, set_memory_type(tp.MemoryType.Shared)), "
                            f"allocated in the swizzled core matrices of an MmaInputSmemSwizzle")
        elif t.definition is None or is_cp_async(t.definition):
            operand_problem(f"is " + (f"written by `{t.definition}`" if t.definition is not None else "an input") +
                            "; tileproof issues tcgen05.mma on shared tiles the TMA loads or the threads store (then "
                            "fence.proxy.async and a barrier), not on cp.async copies",
                            f"fill {t.name} with {t.name} = x.cache_after(tp.LoadStoreOpType.TMA), or a plain copy")


# -- MMA-ACCUM-LAYOUT (structural part): the accumulators allocated as the C fragment --------------

def accumulator_allocation(fusion, order) -> list[Problem]:
    """MMA-ACCUM-LAYOUT (structural part): a wgmma's register output whose allocation keeps an
    Mma axis, so every thread allocates the macro's whole 64 x N tile (up to 16384 registers)
    where the C fragment gives it 64 x N / 128 accumulators: the allocation domain was not set
    to the fragment (tp.mma_output_allocation, nvFuser's scheduleMmaOutputAllocation). An
    mma.sync tile kept whole (16 x 8: 128 registers a thread) still fits, and is not refused."""
    out = []
    for tv in order:
        op = tv.definition
        if (not is_mma_op(op) or op.macro is None or is_mma_sync(op.macro) or is_tcgen05(op.macro)
                or tv.memory_type is not MemoryType.Local):
            continue
        tile = [a.id for a in compute_allocation(tv).allocated() if a.id.parallel_type is ParallelType.Mma]
        if not tile:
            continue
        held = try_int(compute_allocation(tv).num_elements_expr)
        fragment = op.macro.m * op.macro.n // 128
        shape = " x ".join(str(i.extent_expr) for i in tile)
        out.append(Problem(
            f"{tv.name} allocates its {shape} Mma tile whole in every thread's registers"
            + (f" ({held} accumulators a thread)" if held is not None else "")
            + f": its allocation domain is not the {op.macro.name} C fragment, in which each of the "
              f"warpgroup's 128 threads holds {fragment} of a tile",
            hint=f"call {tv.name}.set_allocation_domain(tp.mma_output_allocation({tv.name}), True) before binding "
                 f"{tv.name}'s M, N and K tile to Mma",
            notes=("an MmaOp's accumulators stay in the registers of the threads that issue it, each holding the "
                   "elements the C fragment gives it; the allocation domain says which elements a thread keeps, "
                   "and without the fragment it keeps the whole tile",),
            tensor=tv.name, ids=tuple(i.name for i in tile),
            values={**({"accumulators a thread": held} if held is not None else {}), "C fragment a thread": fragment},
            location=op.origin or tv.origin))
    return out


# -- WGMMA-INSTRUCTION-REGISTERS and MMA-REGISTER-PRESSURE (a warning) ------------------------------

REGISTER_MARGIN = 30  # registers a thread needs besides the tiles: addresses, descriptors, counters
WGMMA_MARGIN = 26  # measured: ptxas (NVRTC 13.0) needs one wgmma's accumulators + 26 registers a thread


def launch_registers(fusion) -> tuple[int, str]:
    """The registers a thread gets where ptxas compiles the kernel, and why: 65536 over the
    block's threads, in steps of 8, at most 255 (the code generator's __launch_bounds__ names
    the block's threads, one block per SM); 255 where the thread count is symbolic."""
    dims = block_dims(fusion)
    threads = try_int(product([dims.get(p, const(1)) for p in THREAD_TYPES]))
    if threads is None:
        return 255, "a thread's limit"
    return registers_per_thread(threads), f"65536 registers over the block's {threads} threads"


def wgmma_instruction_registers(fusion, order) -> list[Problem]:
    """WGMMA-INSTRUCTION-REGISTERS: one wgmma instruction's accumulators per thread plus
    WGMMA_MARGIN exceed launch_registers. ptxas cannot spill the registers of one instruction,
    and the consumers' setmaxnreg count does not lift this limit: it refuses to compile."""
    budget, why = launch_registers(fusion)
    out = []
    for tv in order:
        op = tv.definition
        if not is_mma_op(op) or op.macro is None or is_mma_sync(op.macro) or is_tcgen05(op.macro) \
                or tv.memory_type is not MemoryType.Local:
            continue
        regs = registers_of(tv, op.macro.m * op.macro.n // 128)  # one instruction's D fragment a thread
        if regs + WGMMA_MARGIN > budget:
            fitting = max(w for w in range(1, 9) if registers_per_thread(128 * w) >= regs + WGMMA_MARGIN)
            out.append(Problem(
                f"one {op.macro.name} wgmma of {tv.name} keeps {regs} accumulators in each thread's registers, "
                f"and ptxas needs about {WGMMA_MARGIN} more around it: {regs + WGMMA_MARGIN}; it compiles the kernel "
                f"for {budget} registers a thread ({why}) and refuses it (ptxas error C7602, "
                f"\"Insufficient registers\"); a consumer's setmaxnreg count does not raise that limit",
                hint=f"launch at most {fitting} warpgroups per block (a thread then gets "
                     f"{registers_per_thread(128 * fitting)} registers), or issue narrower wgmmas (a smaller N per "
                     f"instruction)",
                tensor=tv.name, values={"registers needed": regs + WGMMA_MARGIN, "registers per thread": budget,
                                        "accumulators": regs},
                location=op.origin or tv.origin))
    return out


def register_pressure(fusion, order) -> list[Problem]:
    """MMA-REGISTER-PRESSURE: an MmaOp's register tiles per thread (its accumulators, and the
    operand fragments mma.sync reads from registers) plus REGISTER_MARGIN exceed what a thread of
    the kernel gets: the consumers' setmaxnreg count where the kernel is warp-specialized with
    num_registers (ptxas allocates the code after setmaxnreg.inc to it), else launch_registers.
    Tiles of which one wgmma already does not fit are WGMMA-INSTRUCTION-REGISTERS' error."""
    budget, why = launch_registers(fusion)
    roles = specialized_tensors(fusion, order)
    spec = specialization(roles[0]) if roles else None
    if spec is not None and spec.num_registers:
        budget, why = spec.num_registers[1], "the consumers' setmaxnreg count"
    failing = {p.tensor for p in wgmma_instruction_registers(fusion, order)}
    out = []
    for tv in order:
        if not is_mma_op(tv.definition) or tv.memory_type is not MemoryType.Local or tv.name in failing \
                or (tv.definition.macro is not None and is_tcgen05(tv.definition.macro)):
            continue  # tcgen05.mma's accumulators live in tensor memory (MMA-WARP-COLLECTIVE, elsewhere)
        tiles = [tv] + [t for t in tv.definition.inputs if t.memory_type is MemoryType.Local]
        counts = {t.name: try_int(compute_allocation(t).num_elements_expr) for t in tiles}
        if any(n is None for n in counts.values()):
            continue  # REGISTER-SIZE-CONSTANT
        regs = {name: registers_of(t, counts[name]) for name, t in zip(counts, tiles)}
        need = sum(regs.values()) + REGISTER_MARGIN
        if need > budget:
            parts = " + ".join(f"{n} ({name})" for name, n in regs.items())
            out.append(Problem(
                f"{tv.name}'s tensor-core tiles take {parts} registers a thread, and with about {REGISTER_MARGIN} "
                f"for addresses and counters {need}; a thread of this kernel gets {budget} ({why}): ptxas will spill "
                f"accumulators to local memory between the tensor-core instructions",
                hint="spread the tile over more warpgroups (a smaller tile per warpgroup), fewer consumer "
                     "warpgroups per block, or give the consumers more registers (WarpSpecialized num_registers)",
                tensor=tv.name, values={"registers needed": need, "registers per thread": budget, **regs},
                location=tv.origin))
    return out


def live_accumulators(fusion, order) -> list[Problem]:
    """WGMMA-INSTRUCTION-REGISTERS, its second part: a wgmma MmaOp whose accumulators stay in
    registers across a serial loop it reduces over (O rescaled in place over attention's key
    tiles), and another wgmma issued inside that loop (S = Q K^T): both accumulators a thread
    exceed what a thread gets (the consumers' setmaxnreg count where the kernel is warp-specialized
    with num_registers, else launch_registers). ptxas holds neither across the other's
    instructions in local memory: it refuses the kernel (C7600, "Register allocation failed") or
    spills kilobytes."""
    budget, why = launch_registers(fusion)
    roles = specialized_tensors(fusion, order)
    spec = specialization(roles[0]) if roles else None
    if spec is not None and spec.num_registers:
        budget, why = spec.num_registers[1], "the consumers' setmaxnreg count"
    groups = loop_groups(fusion, order)
    wgmma = [tv for tv in order if is_mma_op(tv.definition) and tv.definition.macro is not None
             and not is_mma_sync(tv.definition.macro) and not is_tcgen05(tv.definition.macro)
             and tv.memory_type is MemoryType.Local]
    failing = {p.tensor for p in wgmma_instruction_registers(fusion, order)}
    if len(wgmma) < 2 or groups.unmapped or groups.mismatched or failing:
        return []
    paths = {tv.name: statement_path(tv, groups) for tv in wgmma}

    def regs(tv) -> int | None:
        n = try_int(compute_allocation(tv).num_elements_expr)
        return None if n is None else registers_of(tv, n)

    out = []
    for a in wgmma:
        carried = [groups.of[(a.name, k)] for k, i in enumerate(a.loop)
                   if i.is_reduction and i.parallel_type in (ParallelType.Serial, ParallelType.Unroll)]
        for b in wgmma:
            loop = next((g for g in carried if b is not a and g in paths[b.name]), None)
            if loop is None or regs(a) is None or regs(b) is None or regs(a) + regs(b) <= budget:
                continue
            out.append(Problem(
                f"{a.name}'s accumulators ({regs(a)} registers a thread) stay in registers across the loop over "
                f"{loop.first.label()}, which it reduces over, and {b.name}'s wgmmas inside that loop write "
                f"{regs(b)} more: {regs(a) + regs(b)} a thread, where a thread gets {budget} ({why}); "
                f"it cannot keep either in local memory across the other's instructions, and refuses the kernel "
                f"(ptxas error C7600) or spills kilobytes",
                hint=f"make {b.name}'s tile narrower (fewer columns a wgmma: attention's key tile), {a.name}'s "
                     f"smaller, or launch fewer warpgroups per block",
                tensor=b.name, values={"registers needed": regs(a) + regs(b), "registers per thread": budget,
                                       a.name: regs(a), b.name: regs(b)},
                location=b.origin))
            break
    return out
