"""Lowering a verified fusion to the kernel IR, as a named list of passes.

    check      the conditions of execution/conditions/lowering.py that the verifier's lowering rules check
               (what is not lowered: multi-device, global intermediates, ...); a failure is a bug
    order      the tensors to compute, producers first, and their loop classes
    allocate   registers and shared-memory buffers (model.allocation, model.smem_plan),
               global layouts (strides from contiguity)
    index      one statement per tensor: offsets and predicates from the index algebra (which
               predicates: execution/predicates.py, with the Report's decisions); a TMA
               copy (lower/tma.py), an ldmatrix/stmatrix (lower/ldsm.py) or a cp.async
               (lower/cp_async.py) where the op says so;
               a reduction's init, accumulation, block combine and store (lower/reduction.py)
    nest       the placed nest the verifier proved (execution/nest.py), its statements lowered: the
               loops with their __syncthreads, mbarrier waits, cp.async commits and waits, circular
               buffers' prologues and prefetched copies, wgmma fences and waits, tcgen05.mma commits
               and waits, warp roles
    grid-rounds  the grid combines of one round (a group's grid reductions, execution/grid_reduction.py
               grid_round) joined into one GroupedGridReduce: one semaphore, one last block (lower/reduction.py)
    pipeline   those prologues and prefetched copies: their loop's index, the copies shifted ahead
               (lower/pipelines.py)
    roles      a warp-specialized kernel's producer issuers and empty mbarriers (lower/warp_roles.py)
    signature  parameters, launch dimensions, names
    named-barriers  a warp-specialized kernel's consumer barriers: bar.sync 1, N (lower/named_barriers.py)
    whole-tile  an unrolled nest with hole predicates twice, under a block-uniform guard that
               implies them (lower/whole_tile.py)
    launch-dims  a subterm equal to a symbolic launch dimension read as blockDim / gridDim
               (lower/launch_dims.py)
    invariants  the loop-invariant divisions of unrolled nests and of statements in serial loops,
               named where all they read is defined: kernel entry, or a serial loop's body
               (lower/invariants.py)
    index-width  32-bit index math where every value the kernel computes is below 2^32
               (lower/index_width.py)

Tensor memory (lower/tmem.py) adds `tmem` after index (tcgen05.st / ld statements, a tcgen05.mma's
accumulator column and commit mbarrier) and
`tmem-alloc` after roles (tcgen05.alloc / dealloc, tcgen05 fences around every barrier).

`lower(fusion, target, decisions)` runs them all; `lower(..., until="index")` stops early (tests,
dumps). The lowering asks no solver: what needs a proof (a hole the assumptions rule out, an
instruction's registers, a tcgen05 pattern) it reads from `decisions`, the Report's
(lower/decisions.py). Without them it keeps every such predicate and refuses warp-collective
instructions that need one.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field, replace
from typing import Callable

from ...execution.allocation import Allocation, compute_allocation
from ...execution.conditions import lowering as conditions
from ...execution import loops
from ...model.errors import InternalError
from ...model.expr import product
from ...model.fusion import Fusion, symbol_range
from ...model.simplify import bounds
from ...model.loop_map import propagate_parallel_types
from ...model.mma_op import is_mma
from ...model.reduction import is_reduction_tensor
from ...execution.indexing import block_dims, grid_dims, thread_dims
from ...execution.smem_plan import MBARRIER_BYTES, TMEM_SLOT_BYTES, SmemPlan, plan_shared_memory, static_bytes
from ...execution.cluster import cluster_dims
from ...execution.skip import skip_problems
from ...execution.nest import placed_nest, read_back
from ...execution.conditions.cluster import cluster_problems
from ...execution.conditions.warp_specialization import register_problems, role_problems
from ...model.targets import Target
from ...model.tensor import TensorView
from ...model.types import MemoryType
from ...verifier.diagnostics import Decisions
from ...model.symbol_ranges import admitted
from .decisions import Answers
from .gmem import global_layout
from .index_width import choose_index_width
from .invariants import name_invariants
from .launch_dims import read_launch_dims
from .named_barriers import name_barriers
from .peel import peel_unmasked
from .whole_tile import split_whole_tiles
from ...hw.bulk_copy import ADDRESS_ALIGN
from ..ir import Buffer, Compute, GlobalTensor, KernelIR, Param, ParamKind, TensorMap, TmaCopy, TmemAlloc, walk
from .loop_nest import LoopClass, LoopClasses, execution_order, lower_nest, refuse
from .statements import StatementBuilder
from .pipelines import fill_pipelines
from .warp_roles import lower_releases, lower_roles
from . import mma, reduction, tmem

KERNEL_PREFIX = "tp_"  # kernels are named after their fusion, so that profiles tell them apart
# load/store ops lowered as statements here (the tensor-memory ones in lower/tmem.py)
LOWERED_OPS = tuple(t for t in conditions.LOWERED_OP_TYPES if t not in tmem.TMEM_OP_TYPES)


@dataclass
class Lowering:
    fusion: Fusion
    target: Target
    answers: Answers
    order: list[TensorView] = field(default_factory=list)
    classes: LoopClasses | None = None
    allocations: dict[str, Allocation] = field(default_factory=dict)
    smem: SmemPlan | None = None
    buffers: list[Buffer] = field(default_factory=list)
    globals: dict[str, GlobalTensor] = field(default_factory=dict)
    statements: list[tuple[list[LoopClass], Compute]] = field(default_factory=list)
    tensor_maps: list[TensorMap] = field(default_factory=list)
    mbarriers: list = field(default_factory=list)
    tree: list = field(default_factory=list)
    kernel: KernelIR | None = None


def check_supported(st: Lowering) -> None:
    """What the verifier's lowering rules reject (execution/conditions/lowering.py); reaching one is a bug."""
    fusion = st.fusion
    # first, as the verifier reports it alone: a split by an unknown factor has no kernel to check
    refuse("SYMBOLIC-FACTOR", conditions.symbolic_factors(fusion))
    refuse("LOWERING-SUPPORTED", conditions.unsupported_features(fusion))
    refuse("GLOBAL-INTERMEDIATE", conditions.global_intermediates(fusion))
    refuse("PARALLEL-TYPE-UNIQUE", conditions.launch_axis_clashes(fusion))
    refuse("WS-ROLES", role_problems(fusion))
    refuse("WS-REGISTERS", register_problems(fusion))
    refuse("CLUSTER-MULTICAST", cluster_problems(fusion))
    refuse("ONLINE-SKIP", skip_problems(fusion))
    reduction.check(fusion, loops.execution_order(fusion))
    mma.check(fusion, loops.execution_order(fusion), st.target)
    tmem.check_supported(st)


def order_tensors(st: Lowering) -> None:
    st.order = execution_order(st.fusion)
    st.classes = LoopClasses(st.fusion, st.order)


def allocate(st: Lowering) -> None:
    fusion = st.fusion
    st.allocations = {t.name: compute_allocation(t) for t in fusion.tensors if not t.is_fusion_input}
    st.smem = plan_shared_memory(fusion, st.allocations)
    refuse("REGISTER-SIZE-CONSTANT", conditions.symbolic_registers(fusion, st.allocations))
    for tv in st.order:
        if tv.memory_type is MemoryType.Local:
            elements = st.allocations[tv.name].num_elements_expr
            st.buffers.append(Buffer(tv.name, MemoryType.Local, tv.dtype, elements))
        elif tv.memory_type is MemoryType.Shared:
            alloc = st.allocations[tv.name]
            st.buffers.append(Buffer(tv.name, MemoryType.Shared, tv.dtype, alloc.num_elements_expr,
                                     st.smem.offset(tv.name)))
    st.buffers += reduction.buffers(st.order, st.smem, st.allocations)  # accumulators, block reductions' scratch
    for tv in list(fusion.inputs) + list(fusion.outputs) + [t for t in st.order if read_back(t)] + _views(fusion):
        st.globals[tv.name] = global_layout(tv)  # a TMA-stored intermediate's: dense, in a workspace


def index(st: Lowering) -> None:
    launch = block_dims(st.fusion)
    builder = StatementBuilder(st.fusion, st.classes, st.allocations, st.globals, launch, st.answers, st.target)
    steps = {}
    for tv in st.order:
        if is_mma(tv):  # init, the tensor-core tiles, store (lower/mma.py)
            steps[tv.name] = iter(mma.statements(builder, tv))
        elif is_reduction_tensor(tv):  # init, accumulate, combine, store (lower/reduction.py)
            steps[tv.name] = iter(reduction.statements(builder, tv))
        else:
            steps[tv.name] = iter([builder.build(tv)])
    st.statements = _in_nest_order(st, steps)
    for _, stmt in st.statements:  # a global tensor's pointer is aligned for its widest vector
        for s in walk([stmt]):
            if isinstance(s, Compute) and s.vector > 1:
                for operand in [s.out] + s.ins:
                    g = st.globals.get(operand.tensor)
                    if g is not None and g.vector_elements < s.vector:
                        st.globals[operand.tensor] = replace(g, vector_elements=s.vector)
            if isinstance(s, TmaCopy) and s.gmem is not None:  # a 1-D bulk copy: 16-byte aligned runs
                g = st.globals[s.gmem]
                run = max(1, ADDRESS_ALIGN // g.dtype.bytes)
                if g.vector_elements < run:
                    st.globals[s.gmem] = replace(g, vector_elements=run)
    st.tensor_maps, st.mbarriers = builder.tma.tensor_maps, builder.tma.mbarriers


def _in_nest_order(st: Lowering, steps: dict) -> list:
    """Each tensor's lowered steps (in turn) at its leaves of the placed nest, in the nest's order
    (execution/loops.py statement_items: an init before the producers inlined into its reduction
    loop, a group's combines and stores after every member's accumulation)."""
    out = []
    for _, leaf in loops.statement_items(st.order, st.classes.groups):
        step = next(steps[loops.statement_tensor(leaf).name], None)
        if step is None:
            raise InternalError(f"{loops.statement_tensor(leaf).name} has fewer lowered steps than the placed nest")
        out.append(step)
    if any(next(left, None) is not None for left in steps.values()):
        raise InternalError("a tensor has more lowered steps than the placed nest")
    return out


def nest(st: Lowering) -> None:
    """The placed nest the verifier proved (execution/nest.py), its statements lowered."""
    st.tree = lower_nest(placed_nest(st.fusion), st.order, st.statements, st.classes)


def pipeline(st: Lowering) -> None:
    fill_pipelines(st.tree, {cls.key: cls.index_var for cls in st.classes.classes.values()})


def roles(st: Lowering) -> None:
    lower_roles(st.tree, st.fusion, st.mbarriers)
    lower_releases(st.tree, st.fusion, st.mbarriers)


def signature(st: Lowering) -> None:
    fusion = st.fusion
    params, names = [], {}
    for tv in list(fusion.inputs) + list(fusion.outputs) + _views(fusion):  # a view: its input's pointer at launch
        params.append(Param(tv.name, ParamKind.TENSOR, "", tensor=tv.name))
    for m in st.tensor_maps:
        params.append(Param(m.param, ParamKind.TENSOR_MAP, "", tensor=m.tensor))
    for name in fusion.symbols:
        names[name] = f"s_{name}"
        params.append(Param(names[name], ParamKind.EXTENT, "unsigned long long", symbol=name))
    for g in st.globals.values():
        for s in g.strides:
            for v in sorted(s.free_vars()):
                if v.startswith("stride.") and v not in names:
                    _, tensor, axis = v.split(".")  # model/global_layout.py stride_var
                    named = st.globals[tensor].user_name if tensor in st.globals else None
                    names[v] = f"stride_{named}_{axis}" if named else v.replace(".", "_")  # the user's name
                    params.append(Param(names[v], ParamKind.STRIDE, "unsigned long long", tensor=g.name, symbol=v))
    params += reduction.workspace_params(st.order, block_dims(fusion))  # grid reductions' workspaces
    for tv in st.order:  # a global intermediate a TMA store writes (GLOBAL-INTERMEDIATE): the runtime allocates it
        if read_back(tv):
            params.append(Param(tv.name, ParamKind.WORKSPACE, "", tensor=tv.name,
                                elements=product(list(st.globals[tv.name].extents)), dtype=tv.dtype, storage=True))
    for cls in st.classes.classes.values():
        names[cls.index_var] = cls.var
    st.kernel = KernelIR(
        name=kernel_name(fusion.name),
        params=params,
        buffers=st.buffers,
        body=st.tree,
        globals=[st.globals[t.name] for t in list(fusion.inputs) + list(fusion.outputs)],
        block=thread_dims(fusion),
        grid=grid_dims(fusion),
        smem_bytes=st.smem.total,
        names=names,
        header=[str(op) for op in fusion.exprs if op.output in st.order],
        tensor_maps=st.tensor_maps,
        mbarriers=st.mbarriers,
        cluster=cluster_dims(fusion),
        cooperative=reduction.cooperative(st.order),
        dependent_launch=fusion.dependent_launch,
        reversed_blocks=tuple(p.cuda_name for p in fusion.reversed_blocks),
        max_threads=most_threads(fusion, st.target),
        static_smem_bytes=_static_smem(st),
        views=[st.globals[t.name] for t in _views(fusion)],
    )


def _views(fusion: Fusion) -> list[TensorView]:
    """The tensors the snapshot reads as views of inputs (model/producer_aliases.py), in fusion order."""
    return [t for t in fusion.tensors if t.name in fusion.views]


def _static_smem(st: Lowering) -> int:
    """The kernel's static shared memory: its mbarriers and tensor memory's address slot, no more
    than SMEM-CAPACITY counted (execution/smem_plan.py static_bytes)."""
    declared = MBARRIER_BYTES * sum(b.stages for b in st.mbarriers)
    declared += TMEM_SLOT_BYTES if any(isinstance(n, TmemAlloc) for n in walk(st.tree)) else 0
    if declared > static_bytes(st.fusion):
        raise InternalError(f"the kernel declares {declared} bytes of static shared memory; SMEM-CAPACITY counted "
                            f"{static_bytes(st.fusion)}")
    return declared


def most_threads(fusion: Fusion, target: Target) -> int:
    """The most threads a block of `fusion` has at any admitted size: __launch_bounds__, so that
    ptxas fits the registers of that many threads (a symbolic block without it compiled to more
    registers than 1024 threads have, and its launch failed). The bound of the block's product over
    the symbols' admitted ranges, at most the target's limit (LAUNCH-THREADS proved the block within it)."""
    ranges = admitted({name: symbol_range() for name in fusion.symbols}, fusion.assumptions).bounds()
    hi = bounds(product(list(thread_dims(fusion))), ranges).hi
    return min(hi, target.max_threads_per_block) if hi is not None else target.max_threads_per_block


PASSES: list[tuple[str, Callable[[Lowering], None]]] = [
    ("check", check_supported),
    ("order", order_tensors),
    ("allocate", allocate),
    ("index", index),
    ("tmem", tmem.lower_accesses),
    ("nest", nest),
    ("grid-rounds", reduction.combine_rounds),
    ("pipeline", pipeline),
    ("roles", roles),
    ("tmem-alloc", tmem.allocate_and_fence),
    ("signature", signature),
    ("named-barriers", name_barriers),
    ("whole-tile", split_whole_tiles),
    ("peel", peel_unmasked),
    ("launch-dims", read_launch_dims),
    ("invariants", name_invariants),
    ("index-width", choose_index_width),
]


def kernel_name(fusion_name: str) -> str:
    """`tp_<fusion name>` as a C identifier (other characters become '_')."""
    return KERNEL_PREFIX + re.sub(r"\W", "_", fusion_name, flags=re.ASCII)


def lower(fusion: Fusion, target: Target, decisions: Decisions | None = None, *, until: str | None = None) -> Lowering:
    """Run the passes on `fusion` (a verified snapshot: lowering never re-checks safety) with the
    `decisions` of its Report (none: every predicate that needs a proof to drop is kept)."""
    if getattr(fusion, "frozen", False):  # each loop's type on its Serial members, as verify saw it
        propagate_parallel_types(fusion)
    st = Lowering(fusion, target, Answers(decisions or Decisions()))
    for name, run in PASSES:
        run(st)
        if name == until:
            break
    return st

