"""What the code generator lowers, as pure functions that return the problems they find.

Each function below is one condition the lowering needs; an empty list means the fusion meets
it. The verifier reports the problems (verifier/rules/lowering.py, one rule code per function),
and the code generator calls the same functions for what it cannot emit and raises InternalError
on a problem (codegen/lower/loop_nest.py NotLowered), since the verifier should have rejected the
schedule. So a verified schedule compiles. REGISTER-BUDGET (a warning) and UNROLL-LENGTH guard
compile time and register use; codegen emits such kernels (tileproof.testing.compile_unverified).

    launch_axis_clashes   PARALLEL-TYPE-UNIQUE    a thread/block index names one loop axis per tensor
    symbolic_registers    REGISTER-SIZE-CONSTANT  register (Local) tensors have a compile-time size
    register_budget       REGISTER-BUDGET         register tensors fit 255 32-bit registers per thread (warning)
    local_memory          LOCAL-MEMORY-SIZE       a thread's register tensors fit its 512 KiB of local memory
    unroll_lengths        UNROLL-LENGTH           unrolled loops repeat statements at most 1024 times
    symbolic_factors      SYMBOLIC-FACTOR         split factors are ints or extent symbols
    loop_groups           INLINE-LOOP-MAP, INLINE-PARALLEL-MATCH: inlined loops are one loop
    nest / nest_problems  LOOP-NEST-ORDER         the loops nest around the statements in order
    global_intermediates  GLOBAL-INTERMEDIATE     intermediates live on chip, or are TMA stores read back
    unsupported_features  LOWERING-SUPPORTED      ops and features the code generator lowers

The loop structure (execution_order, loop_groups, nest) lives here too: the code generator
builds its loops from it (codegen/lower/loop_nest.py), so the rules check the loops that are emitted.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ..allocation import Allocation, compute_allocation
from ...model.expr import Expr, evaluate, try_int
from ...model.global_layout import allocation_problem, global_strides
from ...model.mma_op import is_mma, is_tcgen05_op
from ...model.producer_aliases import may_view, view_problem
from ...model.inlining import max_inline_position
from ...model.iterdomain import Split
from ...model.tensor import TensorView
from ...model.types import BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, CacheOp, LoadStoreOpType, MemoryType, OpKind, ParallelType
from ...hw.bulk_copy import is_async_bulk_op
from ...hw.cp_async import is_cp_async
from ...hw.global_load import is_cached_load, load_cache
from ..problems import Problem
from ..grid_reduction import is_grid_reduction
from ..loops import (LoopGroups, _allocations, execution_order, launched_loops, loop_groups, nest, statement_items,
                     statement_tensor)
from .reduction import unsupported_reductions
from .cp_async import structure_problems
from .broadcast_loops import broadcast_loop_problems
from .pipeline import unsupported_pipelines
from ..statements import CondKind, tensor_execution
from ..indexing import block_dims
from ..circular import specialization
from ..warp_roles import role_implied
from ..barriers import Async, statement_paths, store_completed
from ..nest import placed_nest, read_back

# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": at most 255
# 32-bit registers per thread (compute capability 5.0 .. 12.x).
MAX_REGISTERS_PER_THREAD = 255
# Same table: at most 512 KB of local memory per thread, where ptxas puts what does not fit
# registers. Its own frame (spills, temporaries) shares them: 4 KiB are left for it (measured on
# H100: a kernel with exactly 512 KiB of register tensors was refused by cuLaunchKernel).
MAX_LOCAL_BYTES_PER_THREAD = 512 * 1024 - 4096
# Statement copies in fully unrolled loops per kernel. NVRTC time for one unrolled copy loop on
# sm_90a (measured here): 512 copies 0.6 s, 1024 copies 2.2 s, 3072 copies 43 s, 4096 copies 84 s.
MAX_UNROLLED_COPIES = 1024
UNROLLED = (ParallelType.Unroll, ParallelType.Vectorize, ParallelType.Group)  # Group: a loop of rounds, unrolled
LAUNCHED = THREAD_TYPES + BLOCK_TYPES
# What codegen lowers (codegen/lower/__init__.py, codegen/lower/tmem.py).
LOWERED_OP_TYPES = (LoadStoreOpType.Set, LoadStoreOpType.TMA, LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix,
                    LoadStoreOpType.TMemLoad, LoadStoreOpType.TMemStore, LoadStoreOpType.CpAsync,
                    LoadStoreOpType.CpAsyncBulk)


# -- the tensors the kernel computes, and its loops ----------------------------------------------



def _names(tensors) -> list[str]:
    out: list[str] = []
    for t in tensors:
        if t.name not in out:
            out.append(t.name)
    return out


def nest_problems(fusion, order: Sequence[TensorView] | None = None, groups: LoopGroups | None = None) -> list[Problem]:
    order = list(execution_order(fusion) if order is None else order)
    groups = groups or loop_groups(fusion, order)
    if groups.unmapped or groups.mismatched:
        return []  # the inlining rules report these; the loops are not one nest yet
    items = statement_items(order, groups)
    _, conflict = nest(items, launched_loops(groups))
    if conflict is None:
        return []
    g = groups.groups[conflict.key]
    tv = statement_tensor(items[conflict.statement][1])
    before = items[:conflict.statement]
    inside = _names(statement_tensor(t) for keys, t in before if g.index in keys)
    last = max(j for j, (keys, _) in enumerate(before) if g.index in keys)
    between_tensors = {statement_tensor(t).name: statement_tensor(t) for _, t in items[last + 1:conflict.statement]}
    between = list(between_tensors)
    # a tensor inlined past where inline_at lets it (a persistent axis, set by hand) is the cause; one
    # that cannot go further in (a reduction) is not named to inline_at
    limits = {t.name: max_inline_position(t) for t in [*(statement_tensor(x) for _, x in before), tv]
              + list(between_tensors.values())}
    over = [t for t in [*(statement_tensor(x) for _, x in before), tv] if t.compute_at > limits[t.name][0]]
    depth = g.members[0][1]  # the loop's position: joining it takes a compute-at position past it
    stuck = [t for t in between_tensors.values() if limits[t.name][0] <= depth]
    # the knob: the inlining of the tensor past its limit, else the inlining that put the first
    # statement into the loop the others leave (inline_at / inline_most)
    inlined = over or [t for t in (statement_tensor(x) for _, x in before) if t.name in inside] + [tv]
    location = next((t.compute_at_origin for t in inlined if t.compute_at_origin), None) or tv.origin
    if over:
        t = over[0]
        hint = (f"inline {t.name} at most at position {limits[t.name][0]} ({limits[t.name][1]}); inline_most "
                f"stops there")
    elif stuck:
        hint = (f"do not inline {', '.join(inside)} with {tv.name} ({stuck[0].name} cannot join that loop: "
                f"{limits[stuck[0].name][1]})")
        reductions = list(dict.fromkeys(t.name for t in [*stuck, tv] if t.definition.kind is OpKind.REDUCTION))
        if len(reductions) > 1:  # grouped reductions share their loops (execution/loops.py)
            hint += f", or group the reductions (tp.group_reductions([{', '.join(reductions)}]))"
    else:
        hint = (f"inline {', '.join(between)} into the same loop (inline_at / inline_most), or do not inline "
                f"{', '.join(inside)} with {tv.name}")
    # nothing runs between them: the loops around it differ (a loop of the earlier statements that
    # tv is not in closes it)
    outer = [k for k in items[last][0] if k not in items[conflict.statement][0]] if not between else []
    if outer:
        og = groups.groups[outer[0]]
        around = ", ".join(f"{m.name} axis {j}" for m, j in og.members if m is not tv)
        own = [j for m, j in og.members if m is tv]  # tv's axis there, where it is no loop (Bulk, Vectorize, ..)
        why = (f"{tv.name} is in it but not in the loop of {around} around it, which {', '.join(inside)} share"
               + (f" ({tv.name} axis {own[0]} there is {tv.loop[own[0]].label()}, not a loop)" if own else ""))
        if not over and not stuck:
            hint = (f"give {tv.name} that loop too (its axis there parallelized or inlined as theirs), or do not "
                    f"inline {', '.join(inside)} with {tv.name}")
    else:
        why = f"{', '.join(between)} runs between {', '.join(inside)} and {tv.name}, outside that loop"
    return [Problem(
        f"the loop of {', '.join(g.labels())} would be split in two: {why}",
        hint=hint,
        tensor=tv.name, ids=(g.first.name,),
        values={"statement": order.index(tv), "loop_members": len(g.members)},
        notes=(f"statements in execution order: {', '.join(t.name for t in order)}",
               "a loop of the kernel is one C++ for loop: the statements that share it must be adjacent"),
        location=location, knobs=tuple(_names(inlined)))]


# -- launch axes ------------------------------------------------------------------------------------

def launch_axis_clashes(fusion) -> list[Problem]:
    """A tensor binds one thread/block index to two of its loop axes."""
    out = []
    for tv in execution_order(fusion):
        seen: dict[ParallelType, int] = {}
        for k, i in enumerate(tv.loop):
            p = i.parallel_type
            if p not in LAUNCHED:
                continue
            if p not in seen:
                seen[p] = k
                continue
            j = seen[p]
            a, b = tv.loop[j], i
            out.append(Problem(
                f"{tv.name} binds {p} to two loop axes: axis {j} (extent {a.extent}) and axis {k} (extent {b.extent}); "
                f"{p.cuda_name} is one index per {'thread' if p in THREAD_TYPES else 'block'}, so it can "
                f"iterate only one of them",
                hint=f"merge the two axes first ({tv.name}.merge({j}, {k})) and parallelize the merged axis, "
                     f"or bind one of them to another thread/block index",
                tensor=tv.name, ids=(a.name, b.name),
                values={"axis": j, "other_axis": k, **_ints(extent=a.extent_expr, other_extent=b.extent_expr)},
                location=b.origin or tv.origin))
    return out


def _ints(**exprs: Expr) -> dict[str, int]:
    return {k: v for k, e in exprs.items() if (v := try_int(e)) is not None}


# -- registers ---------------------------------------------------------------------------------------

def registers_of(tv: TensorView, elements: int) -> int:
    """32-bit registers that `elements` of tv's dtype occupy."""
    return -(-elements * tv.dtype.bytes // 4)


def symbolic_registers(fusion, allocations: Mapping[str, Allocation] | None = None) -> list[Problem]:
    """A register (Local) tensor whose per-thread size depends on an extent symbol."""
    allocations = _allocations(fusion, allocations)
    out = []
    for tv in execution_order(fusion):
        if tv.memory_type is not MemoryType.Local:
            continue
        a = allocations[tv.name]
        elements = a.num_elements_expr
        if try_int(elements) is not None:
            continue
        symbolic = [x.id for x in a.allocated() if try_int(x.id.extent_expr) is None]
        values = _exceeding_size(tv, elements)
        out.append(Problem(
            f"{tv.name} is a register (Local) tensor of {a.num_elements} elements per thread, a size that "
            f"depends on {', '.join(sorted(elements.free_vars()))}; registers are allocated when the kernel "
            f"is compiled" + (f" ({values['registers']} registers at "
                              f"{', '.join(f'{k} = {v}' for k, v in values.items() if k != 'registers')})"),
            hint=f"parallelize {tv.name}'s symbolic axes ({', '.join(i.label() for i in symbolic)}) on threads or "
                 f"blocks, inline it left of them, split them by a constant and keep only the inner part "
                 f"allocated, or put {tv.name} in shared memory",
            tensor=tv.name, ids=tuple(i.name for i in symbolic), values=values,
            notes=("allocated IterDomains: " + ", ".join(x.id.label() for x in a.allocated()),),
            location=tv.origin))
    return out


def _exceeding_size(tv: TensorView, elements: Expr) -> dict[str, int]:
    """The smallest power of two that, given to every symbol, exceeds the register budget."""
    names = sorted(elements.free_vars())
    v = 1
    while True:
        try:
            regs = registers_of(tv, evaluate(elements, {n: v for n in names}))
        except (ZeroDivisionError, KeyError):
            regs = 0
        if regs > MAX_REGISTERS_PER_THREAD or v >= 1 << 20:
            return {**{n: v for n in names}, "registers": regs}
        v *= 2


def register_budget(fusion, allocations: Mapping[str, Allocation] | None = None) -> list[Problem]:
    """A register tensor holds more than 255 32-bit registers per thread. Tensors are counted one
    by one: ptxas assigns registers by liveness, and tensors live one after another reuse them."""
    allocations = _allocations(fusion, allocations)
    sizes: list[tuple[TensorView, int, int]] = []
    for tv in execution_order(fusion):
        if tv.memory_type is not MemoryType.Local:
            continue
        n = try_int(allocations[tv.name].num_elements_expr)
        if n is not None:
            sizes.append((tv, n, registers_of(tv, n)))
    limit = MAX_REGISTERS_PER_THREAD
    out = []
    for tv, n, regs in sizes:
        if regs > limit:
            a = allocations[tv.name]
            out.append(Problem(
                f"{tv.name} holds {regs} registers per thread ({n} {tv.dtype} elements); the limit is {limit}",
                hint=f"parallelize more of {tv.name}'s axes on threads (TIDx/TIDy/TIDz) or blocks, inline it "
                     f"further (inline_at) so only a tile is live, or put it in shared memory",
                tensor=tv.name, ids=tuple(x.id.name for x in a.allocated()),
                values={"registers": regs, "elements": n, "limit": limit},
                notes=("allocated per thread: " + (" * ".join(x.id.label() for x in a.allocated()) or "1"),
                       "a register tensor that does not fit is moved to local memory (DRAM) by ptxas, and "
                       "unrolling it makes NVRTC run for minutes"),
                location=tv.origin))
    return out


def local_memory(fusion, allocations: Mapping[str, Allocation] | None = None) -> list[Problem]:
    """The register (Local) tensors of one thread exceed the local memory a thread can have. They
    are summed: each is one array declared at the kernel's scope, so all share its stack frame."""
    allocations = _allocations(fusion, allocations)
    parts = []
    for tv in execution_order(fusion):
        n = try_int(allocations[tv.name].num_elements_expr) if tv.memory_type is MemoryType.Local else None
        if n is not None:
            parts.append((tv, n * tv.dtype.bytes))
    total, limit = sum(b for _, b in parts), MAX_LOCAL_BYTES_PER_THREAD
    if total <= limit:
        return []
    biggest = max(parts, key=lambda p: p[1])[0]
    return [Problem(
        f"the register tensors of a thread take {total} bytes ({', '.join(f'{t.name} {b}' for t, b in parts)}); "
        f"a thread has at most {limit} bytes of local memory",
        hint=f"parallelize more of {biggest.name}'s axes on threads or blocks, or inline it further (inline_at) "
             f"so that only a tile is live per thread",
        tensor=biggest.name, ids=tuple(x.id.name for x in allocations[biggest.name].allocated()),
        values={"bytes": total, "limit": limit},
        notes=("ptxas puts register arrays that do not fit in registers in local memory; a kernel whose "
               "frame exceeds the limit is refused by cuLaunchKernel (invalid argument, measured on H100)",),
        location=biggest.origin)]


# -- unrolling ---------------------------------------------------------------------------------------

def unrolled_copies(tv: TensorView) -> tuple[int, list]:
    """How many copies of tv's statement the compiler makes, and the loop axes that multiply:
    from tv's outermost Unroll/Vectorize loop of constant extent inward, every loop of constant
    extent. A serial loop of constant extent inside an unrolled one is unrolled by the compiler
    too (measured: #pragma unroll over 64 around a serial loop of 48 compiles as 3072 copies, in
    43 s). Thread and block axes are no loops; loops of symbolic extent are not unrolled; an
    MmaOp's Mma axes are its instructions (model/mma_op.py: `issues` per tile), and Bulk axes
    the box of one TMA instruction."""
    n, axes, inside = 1, [], False
    for i in tv.loop:
        e = try_int(i.extent_expr)
        if e is None or i.parallel_type in LAUNCHED or i.parallel_type in DEVICE_TYPES:
            continue
        if i.parallel_type in (ParallelType.Mma, ParallelType.Bulk):
            continue
        inside = inside or i.parallel_type in UNROLLED
        if inside and e > 1:
            n *= e
            axes.append(i)
    return n, axes


def unroll_lengths(fusion) -> list[Problem]:
    """Fully unrolled loops (Unroll, and Vectorize: a vector that is not one access is unrolled)
    repeat the kernel's statements more than MAX_UNROLLED_COPIES times in all."""
    copies = [(tv, *unrolled_copies(tv)) for tv in execution_order(fusion)]
    copies = [c for c in copies if c[1] > 1]
    total = sum(n for _, n, _ in copies)
    if total <= MAX_UNROLLED_COPIES:
        return []
    tv, n, axes = max(copies, key=lambda c: c[1])
    parts = ", ".join(f"{t.name} {m} ({' x '.join(i.label() for i in a)})" for t, m, a in copies)
    return [Problem(
        f"unrolled loops repeat statements {total} times ({parts}); the limit is {MAX_UNROLLED_COPIES}",
        hint=f"unroll less: split {tv.name}'s unrolled axis and leave the outer part Serial (e.g. split by 8, "
             f"Unroll the inner), or put the unrolled axis innermost so no loop runs inside it",
        tensor=tv.name, ids=tuple(i.name for i in axes),
        values={"copies": total, "limit": MAX_UNROLLED_COPIES},
        notes=("each unrolled copy is a separate piece of the kernel's code; a constant-extent loop inside an "
               "unrolled one is unrolled by the compiler as well",
               "NVRTC's time grows faster than the copies (measured on sm_90a: 1024 copies 2.2 s, 3072 copies "
               "43 s, 4096 copies 84 s)"),
        location=axes[0].origin or tv.origin)]


# -- split factors -----------------------------------------------------------------------------------

def symbolic_factors(fusion) -> list[Problem]:
    """A split factor names a symbol that is not an extent symbol of the fusion: nothing binds it
    at launch, so the kernel cannot compute its loop bounds."""
    out = []
    known = set(fusion.symbols)
    for tv in fusion.tensors:
        for t in tv.history:
            if not isinstance(t, Split):
                continue
            unknown = sorted(t.factor.free_vars() - known)
            if not unknown:
                continue
            out.append(Problem(
                f"{tv.name} splits {t.in_.label()} by {t.factor}, and {', '.join(unknown)} "
                f"{'is not an extent symbol' if len(unknown) == 1 else 'are not extent symbols'} of fusion "
                f"{fusion.name} (its symbols: {', '.join(sorted(known)) or 'none'})",
                hint=f"split by an int, or declare {', '.join(unknown)} as an extent (fusion.symbol("
                     f"{unknown[0]!r})) so that it is a kernel parameter passed at launch",
                tensor=tv.name, ids=(t.in_.name,),
                values={"unknown_symbols": len(unknown), "extent_symbols": len(known)},
                location=t.outer.origin or tv.origin))
    return out


# -- memory and ops ----------------------------------------------------------------------------------

def global_intermediates(fusion) -> list[Problem]:
    """A computed tensor that is not a fusion output lives in global memory, unless a TMA store
    writes it and the block reads it back after the store completes (`read_back_problems`)."""
    out = []
    for tv in execution_order(fusion):
        if tv.is_fusion_output or tv.memory_type is not MemoryType.Global:
            continue
        if read_back(tv):
            out += read_back_problems(fusion, tv)
            continue
        consumers = [c.name for c in fusion.consumers(tv)]
        op = tv.definition
        trivial = op is not None and may_view(op)  # a view is no intermediate: say why not
        why = view_problem(op) if trivial else None  # None on a live fusion's view (the snapshot drops it)
        no_view = f"; `{op}` is no view of {op.inputs[0].name}: {why}" if why else ""
        out.append(Problem(
            f"{tv.name} is an intermediate in global memory, read by {', '.join(consumers) or 'nothing'}{no_view}",
            hint=f"put {tv.name} in shared memory (set_memory_type(tp.MemoryType.Shared)) or registers "
                 f"(tp.MemoryType.Local), or make it a fusion output",
            tensor=tv.name,
            values={"consumers": len(consumers)},
            notes=("a global intermediate needs a scratch buffer allocated by the runtime and a grid-wide "
                   "barrier between its writers and readers when they run in different blocks; tileproof's "
                   "code generator emits neither yet",) + (
                  ("a broadcast, plain copy (tp.set) or transpose of a fusion input into global memory, laid out "
                   "as the input, is a view of the input's memory (model/producer_aliases.py): nothing is written",)
                  if trivial else ()),
            location=tv.origin))
    return out


def read_back_problems(fusion, tv: TensorView) -> list[Problem]:
    """A global intermediate written by a TMA store (execution/nest.py read_back) and read in the
    kernel: each reader is a plain load of the block's threads, shares no repeating loop with the
    store, and the placed nest waits for the store to complete (cp.async.bulk.wait_group 0 and
    fence.proxy.async.global) and then syncs the block between them (barriers.store_completed),
    so the whole of the block's stores is in global memory before any read; the runtime
    allocates the buffer, dense (no run-time strides). That each element is read in the block
    that stored it is GLOBAL-VISIBILITY's claim."""
    out = []
    where = dict(tensor=tv.name, location=tv.origin)
    layout = global_strides(tv)
    if layout is not None and any(v.startswith("stride.") for s in layout.strides for v in s.free_vars()):
        out.append(Problem(f"{tv.name} is a global intermediate with a discontiguous axis, whose stride no array "
                           f"gives", hint=f"make {tv.name} contiguous (a dense buffer the runtime allocates)",
                           values={"consumers": 1}, **where))
    for c in fusion.consumers(tv):
        op = c.definition
        if is_async_bulk_op(op) or is_cp_async(op) or is_mma(c):
            out.append(Problem(
                f"{c.name} reads {tv.name}, which a TMA store writes in the same kernel, through {op.op_type.value}"
                f"{' (an MMA operand)' if is_mma(c) else ''}; only plain loads of the block's threads are ordered after "
                f"the store", hint=f"read {tv.name} with a plain tp.set, or keep {tv.name} in shared memory",
                values={"consumers": 1}, **where))
    if out:
        return out
    placed = placed_nest(fusion)
    if placed is None:  # INLINE-LOOP-MAP / LOOP-NEST-ORDER report why there is no nest
        return out
    stmts = statement_paths(placed.tree, placed.hazards)
    for _, w, wp in stmts:
        if w.stores != tv.name:
            continue
        for leaf, r, rp in stmts:
            if tv.name not in r.reads or r.kind is Async.TMA_STORE or store_completed(placed.tree, placed.hazards, wp, rp):
                continue
            reader = statement_tensor(leaf).name
            out.append(Problem(
                f"{reader} reads {tv.name} inside a loop that also runs {tv.name}'s TMA store: a read may come "
                f"before the store of its element completes",
                hint=f"compute {reader} after {tv.name}'s loops: do not inline {tv.name} into {reader}",
                values={"consumers": 1},
                notes=(f"the block waits for its TMA stores to complete (cp.async.bulk.wait_group 0) and syncs "
                       f"before {reader}'s loops only when no repeating loop holds both",), **where))
    return out


def completed_in_block(fusion, tv: TensorView) -> bool:
    """tv is a global intermediate stored by TMA and read back after the block's stores complete:
    its readers need only be in the block that stored the element (GLOBAL-VISIBILITY)."""
    return read_back(tv) and not read_back_problems(fusion, tv)


def unsupported_features(fusion) -> list[Problem]:
    """Ops and schedule features the code generator does not lower (limits of tileproof, not
    of the hardware)."""
    out = _inlined_into_instructions(fusion)
    order = execution_order(fusion)
    computed = {t.name for t in order}
    for op in fusion.exprs:
        if op.output.name not in computed:
            continue
        if op.kind is OpKind.LOAD_STORE and op.op_type not in LOWERED_OP_TYPES:
            out.append(Problem(
                f"`{op}` uses {op.op_type.value}, which tileproof's code generator does not lower yet",
                hint=f"use a plain tp.set (LoadStoreOpType.Set), or TMA for a bulk copy into shared memory",
                tensor=op.output.name, values={"ops": 1}, location=op.origin))
        if op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.TMemStore \
                and op.output.memory_type is not MemoryType.Tensor:
            out.append(Problem(
                f"`{op}` is a TMemStore but {op.output.name} is in {op.output.memory_type} memory; a TMemStore "
                f"writes a tensor-memory tensor",
                hint=f"put {op.output.name} in tensor memory, or use a plain tp.set",
                tensor=op.output.name, values={"ops": 1}, location=op.origin))
        if op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.TMemLoad \
                and op.inputs[0].memory_type is not MemoryType.Tensor:
            out.append(Problem(
                f"`{op}` is a TMemLoad but {op.inputs[0].name} is in {op.inputs[0].memory_type} memory; a TMemLoad "
                f"reads a tensor-memory tensor",
                hint=f"put {op.inputs[0].name} in tensor memory, or use a plain tp.set",
                tensor=op.output.name, values={"ops": 1}, location=op.origin))
        if is_cached_load(op) and not op.inputs[0].is_fusion_input:
            out.append(Problem(
                f"`{op}` names cache_op {op.cache_op.name} (ld.global.{load_cache(op)}) but reads "
                f"{op.inputs[0].name}, which is not a fusion input; tileproof emits a cache operator only on a "
                f"load of a fusion input",
                hint=f"drop the cache_op, or put it on the copy of the fusion input {op.inputs[0].name} derives from",
                tensor=op.output.name, values={"ops": 1}, location=op.origin,
                notes=("a fusion input is read-only for the whole kernel, so what L1 keeps of it is never stale; "
                       "a tensor the kernel writes may be",)))
        takes = {LoadStoreOpType.Set: tuple(CacheOp), LoadStoreOpType.CpAsync: (CacheOp.AllLevels, CacheOp.Global)}
        if op.kind is OpKind.LOAD_STORE and op.cache_op is not CacheOp.Unspecified \
                and op.cache_op not in takes.get(op.op_type, ()):
            out.append(Problem(
                f"`{op}` is a {op.op_type.value} copy with cache_op {op.cache_op.name}; a plain copy (Set) takes "
                f"AllLevels, Global or Streaming, cp.async AllLevels or Global, other copies none",
                hint="set the cache_op to tp.CacheOp.Unspecified", tensor=op.output.name, values={"ops": 1},
                location=op.origin))
        touched = [t.name for t in [op.output] + list(op.inputs) if t.memory_type is MemoryType.Tensor]
        if len(touched) > 1:
            out.append(Problem(
                f"`{op}` touches tensor memory twice ({', '.join(touched)}); tileproof lowers a tensor-memory "
                f"access as tcgen05.ld into registers or tcgen05.st from registers",
                hint="copy through a register (Local) tensor: tensor memory -> registers -> tensor memory",
                tensor=op.output.name, values={"tensor_memory_operands": len(touched)}, location=op.origin))
    for tv in order:
        for k, i in enumerate(tv.loop):
            if i.parallel_type in DEVICE_TYPES:
                out.append(Problem(
                    f"{tv.name} axis {k} is parallelized on {i.parallel_type}; tileproof's code generator "
                    f"emits single-GPU kernels and does not lower multi-device parallelization",
                    hint="leave the axis Serial or bind it to a block index (BIDx/BIDy/BIDz)",
                    tensor=tv.name, ids=(i.name,), values={"axis": k}, location=i.origin or tv.origin))
    out += _reversed_block_problems(fusion, order)
    out += _instruction_features(fusion, order)
    out += _specialized_with_tensor_memory(order)
    out += _pipelined_tcgen05_operands(order)

    out += unsupported_reductions(fusion, order)

    out += structure_problems(fusion, order) + unsupported_pipelines(fusion, order)
    out += broadcast_loop_problems(fusion, order)
    for tv in list(fusion.inputs) + list(fusion.outputs):
        problem = allocation_problem(tv)
        if problem is not None:
            alloc = tv.get_allocation_domain()
            out.append(Problem(
                f"{problem}; tileproof lowers global tensors allocated along their logical axes, in any order "
                f"and merged (a split or swizzle in the allocation domain has no such layout)",
                hint=f"set {tv.name}'s allocation domain to its logical IterDomains or merges of them",
                tensor=tv.name, values={"allocation_axes": len(alloc), "logical_axes": len(tv.logical)},
                location=tv.origin))
    return out


def _reversed_block_problems(fusion, order: list[TensorView]) -> list[Problem]:
    """Fusion.reversed_blocks beside what reads the hardware's block numbers: a cluster's ranks
    and a grid reduction's last block (their code is written for the GPU's numbering)."""
    if not fusion.reversed_blocks:
        return []
    shown = ", ".join(p.name for p in fusion.reversed_blocks)
    out = []
    size = fusion.cluster_dims[0] * fusion.cluster_dims[1] * fusion.cluster_dims[2]
    if size > 1:
        out.append(Problem(
            f"the fusion reverses its blocks ({shown}) and makes clusters of {size} blocks; a cluster's blocks "
            f"and ranks are the GPU's numbering, which tileproof does not reverse",
            hint="drop reversed_blocks, or the clusters (cluster_dims = (1, 1, 1))",
            values={"cluster_blocks": size}, location=fusion.cluster_origin or fusion.origin))
    grid = [t.name for t in order if is_grid_reduction(t)]
    if grid:
        out.append(Problem(
            f"the fusion reverses its blocks ({shown}) and reduces over blocks ({', '.join(grid)}); tileproof's "
            f"grid reductions combine in the block the GPU numbers last",
            hint="drop reversed_blocks", tensor=grid[0], values={"grid_reductions": len(grid)},
            location=fusion.origin))
    return out


def _pipelined_tcgen05_operands(order: list[TensorView]) -> list[Problem]:
    """A circular-buffered operand of a tcgen05.mma: its stage's refill would have to wait for the
    MMA's commit (the tensor cores read the tile until its mbarrier completes), which the pipelines
    (execution/pipeline.py) do not place; tileproof completes each tcgen05.mma batch before going on
    (execution/tcgen05_order.py) and does not pipeline its operands yet."""
    out = []
    for tv in order:
        if not is_tcgen05_op(tv.definition):
            continue
        for t in tv.definition.inputs:
            if t.circular is not None:
                out.append(Problem(
                    f"{t.name}, an operand of {tv.name}'s tcgen05.mma, is circular-buffered; tileproof does not "
                    f"pipeline tcgen05.mma operands yet (each refill would wait for the MMA's commit)",
                    hint=f"drop {t.name}'s circular buffering (a tile per iteration, each tcgen05.mma batch completed "
                         f"before the next load)", tensor=t.name, values={"stages": t.circular.stages},
                    location=t.circular.origin or t.origin))
    return out


def _specialized_with_tensor_memory(order: list[TensorView]) -> list[Problem]:
    """Warp specialization beside tensor memory: the roles' code (codegen/lower/warp_roles.py)
    would lose the tcgen05 fences around the consumers' barriers (codegen/lower/tmem.py fences the
    block's barriers only) and the block's barrier before tcgen05.dealloc is one the producer,
    returned after its loads, never reaches."""
    specialized = [t for t in order if specialization(t) is not None]
    in_tmem = [t for t in order if t.memory_type is MemoryType.Tensor]
    if not specialized or not in_tmem:
        return []
    first = specialized[0]
    return [Problem(
        f"{first.name} is warp-specialized and {', '.join(t.name for t in in_tmem)} "
        f"{'lies' if len(in_tmem) == 1 else 'lie'} in tensor memory: tileproof does not lower warp specialization "
        f"in a kernel that uses tensor memory yet (the consumers' barriers would lose their tcgen05 fences, and "
        f"tcgen05.dealloc's barrier would wait for the producer, which has returned)",
        hint="circular-buffer the loads with tp.Pipelined instead of tp.WarpSpecialized, or keep the kernel out of "
             "tensor memory", tensor=first.name, values={"tensor_memory_tensors": len(in_tmem)},
        location=(first.circular.origin if first.circular else None) or first.origin)]


def _instruction_features(fusion, order: list[TensorView]) -> list[Problem]:
    """What codegen/lower/statements.py, tma.py and tmem.py need beyond the ldmatrix, TMA and
    tensor-memory rules: an ldmatrix/stmatrix issued unpredicated from a loop domain ending in its
    Vectorize axis, a constant count of threads arriving at a TMA load's mbarrier, constant tensor-memory column
    counts (tcgen05.alloc is sized at compile time), no broadcast axis bound to a thread/block
    index that is launched wider in a tensor-memory access, and no vectorized axis of a
    tensor-memory access shared through inlining (one tcgen05 instruction moves the vector)."""

    out = []
    launch = block_dims(fusion)
    implied = role_implied(fusion)  # a consumer's thread extent on the specialized axis holds by its role
    groups = None
    for tv in order:
        op = tv.definition
        if op.kind is OpKind.LOAD_STORE and op.op_type in (LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix):
            last = tv.loop[-1] if tv.loop else None
            if last is None or last.parallel_type is not ParallelType.Vectorize or last.static_extent is None:
                vec = [k for k, i in enumerate(tv.loop) if i.parallel_type is ParallelType.Vectorize]
                where = f"its Vectorize axis is axis {vec[0]} of {tv.ndim}" if vec else "it has no Vectorize axis"
                out.append(Problem(
                    f"`{op}`: tileproof issues an {op.op_type.value.lower()} per lane from the innermost loop axis of "
                    f"{tv.name}, a Vectorize axis of constant extent (the lane's registers); {where}",
                    hint=f"reorder {tv.name} so that its Vectorize axis is innermost",
                    tensor=tv.name, ids=tuple(tv.loop[k].name for k in vec),
                    values={"vectorize_axis": vec[0] if vec else -1, "axes": tv.ndim}, location=tv.origin))
            conds = [c for c in tensor_execution(tv, launch).conds_of(CondKind.THREAD_EXTENT, CondKind.SINGLE_WRITER)
                     if not (implied and implied(c))]
            if conds:
                shown = ", ".join(f"{c.lhs} {c.op} {c.rhs} ({c.why})" for c in conds)
                out.append(Problem(
                    f"`{op}` is warp-collective, but {tv.name}'s statement runs only where {shown}; tileproof "
                    f"emits {op.op_type.value.lower()} unpredicated",
                    hint=f"bind {tv.name}'s axes to the thread indices and extents the kernel launches "
                         f"(tp.parallelize_all_like), so that every thread of each warp issues it",
                    tensor=tv.name, values={"predicates": len(conds)}, location=tv.origin))
        if is_async_bulk_op(op):
            groups = groups or loop_groups(fusion, order)
            for k, i in enumerate(tv.loop):
                g = groups.of[(tv.name, k)]
                if i.parallel_type is ParallelType.Bulk and len(g.members) > 1:
                    out.append(Problem(
                        f"{tv.name}'s Bulk axis {k} ({i.label()}) is shared through inlining with "
                        f"{', '.join(x for x in g.labels() if not x.startswith(tv.name + ' '))}; the bulk copy "
                        f"covers its tile axes itself, so they are no loop another tensor can share",
                        hint=f"inline {tv.name} and its consumers left of its Bulk axes",
                        tensor=tv.name, ids=(i.name,), values={"axis": k, "loops_sharing": len(g.members)},
                        location=tv.compute_at_origin or tv.origin))
        if is_async_bulk_op(op) and tv.memory_type is not MemoryType.Global:  # a load: tv waits on an mbarrier
            threads = [i for i in tv.loop if i.parallel_type in THREAD_TYPES and not i.is_broadcast]
            count = 1
            for i in threads:
                count = count * i.extent_expr
            if threads and try_int(count) is None:
                out.append(Problem(
                    f"{tv.name} issues its TMA load from {count} threads, a symbolic count; tileproof initializes "
                    f"the load's mbarrier with a constant arrival count",
                    hint=f"bind the thread axes of {tv.name} ({', '.join(i.label() for i in threads)}) to constant "
                         f"extents (split by a constant first), or leave them serial",
                    tensor=tv.name, ids=tuple(i.name for i in threads), values={"thread_axes": len(threads)},
                    location=tv.origin))
        touched = [t for t in [tv] + list(op.inputs) if t.memory_type is MemoryType.Tensor]
        if not touched:
            continue
        if tv.memory_type is MemoryType.Tensor:
            columns = compute_allocation(tv).columns_expr
            if try_int(columns) is None:
                out.append(Problem(
                    f"{tv.name} needs {columns} tensor-memory columns, a symbolic count; tileproof allocates "
                    f"tensor memory (tcgen05.alloc) with a constant column count",
                    hint=f"give the column axes of {tv.name} constant extents (split by a constant and put the "
                         f"outer part left of its compute-at position or on blocks)",
                    tensor=tv.name, values={"bytes": tv.dtype.bytes}, location=tv.origin))
        for i in tv.loop:
            p = i.parallel_type
            if i.is_broadcast and p in LAUNCHED and launch.get(p) != i.extent_expr:
                out.append(Problem(
                    f"{tv.name}'s broadcast axis {i.label()} is bound to {p}, which the kernel launches with "
                    f"{launch.get(p)}; tileproof lowers tensor-memory accesses with broadcast axes serial only",
                    hint=f"leave {tv.name}'s broadcast axis {i.label()} Serial",
                    tensor=tv.name, ids=(i.name,), values={"extent": 1}, location=tv.origin))
        for k, i in enumerate(tv.loop):
            if i.parallel_type is not ParallelType.Vectorize:
                continue
            groups = groups or loop_groups(fusion, order)
            g = groups.of[(tv.name, k)]
            if len(g.members) > 1:
                out.append(Problem(
                    f"{tv.name}'s vectorized axis {k} ({i.label()}) accesses tensor memory and shares a loop with "
                    f"{', '.join(x for x in g.labels() if not x.startswith(tv.name + ' '))} through inlining; "
                    f"tileproof moves the whole vector with one tcgen05 instruction",
                    hint=f"inline {tv.name}'s producers and consumers left of axis {k}",
                    tensor=tv.name, ids=(i.name,), values={"axis": k, "loops_sharing": len(g.members)},
                    location=tv.origin))
    return out


__all__ = ["MAX_REGISTERS_PER_THREAD", "MAX_UNROLLED_COPIES", "LoopGroups", "Problem", "execution_order",
           "global_intermediates", "launch_axis_clashes", "loop_groups", "nest", "nest_problems", "register_budget",
           "registers_of", "symbolic_factors", "symbolic_registers", "unroll_lengths", "unrolled_copies",
           "unsupported_features"]


def _inlined_into_instructions(fusion) -> list[Problem]:
    """A tensor inlined into an MmaOp's instruction axes (its Mma loops): the instruction computes its
    whole tile at once, so no statement can run inside one of its loops."""
    out = []
    order = execution_order(fusion)
    groups = loop_groups(fusion, order)
    for d in order:
        if not is_mma(d):
            continue
        instruction = {id(groups.of[(d.name, k)]) for k, i in enumerate(d.loop) if i.parallel_type is ParallelType.Mma}
        for t in order:
            if t is d:
                continue
            # a compute-at past the loop (its axes merged after inlining) is INLINE-LOOP-MAP's problem
            inside = [k for k in range(min(t.compute_at, len(t.loop))) if id(groups.of[(t.name, k)]) in instruction]
            if inside:
                k = inside[0]
                out.append(Problem(
                    f"{t.name} is inlined at {t.compute_at}, which puts it inside {d.name}'s instruction loop (its axis "
                    f"{k}, {t.loop[k].label()}, shares {d.name}'s Mma loop): the tensor-core instruction computes its "
                    f"whole tile at once, so nothing runs inside its axes",
                    hint=f"inline {t.name} at {k} at most ({t.name}.inline_at({k}))", tensor=t.name,
                    values={"compute_at": t.compute_at, "axis": k}, location=t.compute_at_origin or t.origin))
    return out
