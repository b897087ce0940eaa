"""Lowering a verified fusion to the kernel IR, as a named list of passes.

    check      refuse what is not lowered (multi-device, global intermediates, ...) with the reason
    order      the tensors to compute, producers first, and their loop classes
    allocate   registers and shared-memory buffers (model.allocation, model.smem_plan),
               global layouts (strides from contiguity)
    index      one statement per tensor: offsets and predicates from the index algebra; a TMA
               copy (codegen/tma.py) or an ldmatrix/stmatrix (codegen/ldsm.py) where the op says so
    nest       the loop tree
    sync       __syncthreads for shared-memory (and tensor-memory) hazards, mbarrier waits for TMA loads
    signature  parameters, launch dimensions, names

Tensor memory (codegen/tmem.py) adds `tmem` after index (tcgen05.st / ld statements) and
`tmem-alloc` after sync (tcgen05.alloc / dealloc, tcgen05 fences around every barrier).

`lower(fusion, target)` runs them all; `lower(..., until="index")` stops early (tests, dumps).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from ..model.allocation import Allocation, compute_allocation
from ..model.expr import const, try_int
from ..model.fusion import Fusion
from ..model.indexing import block_dims, thread_dims
from ..model.smem_plan import SmemPlan, plan_shared_memory
from ..model.targets import Target
from ..model.tensor import TensorView
from ..model.types import BLOCK_TYPES, THREAD_TYPES, LoadStoreOpType, MemoryType
from .errors import UnsupportedSchedule
from .gmem import global_layout
from .kernel_ir import Buffer, Compute, GlobalTensor, KernelIR, Param, TensorMap
from .loop_nest import LoopClass, LoopClasses, build_tree, execution_order
from .statements import StatementBuilder
from .syncs import insert_syncs
from . import tmem

KERNEL_NAME = "tileproof_kernel"
INTEGER_DTYPES = ("int8", "int32", "int64")
FLOAT_ONLY_OPS = ("exp", "sqrt")
LOWERED_OPS = (LoadStoreOpType.Set, LoadStoreOpType.TMA, LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix)


@dataclass
class Lowering:
    fusion: Fusion
    target: Target
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
    for op in st.fusion.exprs:
        if op.kind == "load_store" and op.op_type not in LOWERED_OPS + tmem.TMEM_OP_TYPES:
            raise UnsupportedSchedule(
                f"`{op}` uses {op.op_type.value}; lowering of {op.op_type.value} is not implemented yet "
                f"(verification and the rest of the schedule are unaffected)")
        if op.kind == "unary" and op.name in FLOAT_ONLY_OPS and op.output.dtype.name in INTEGER_DTYPES:
            raise UnsupportedSchedule(f"`{op}`: {op.name} of {op.output.dtype} is not defined; cast to a float type first")
    for tv in st.fusion.tensors:
        launched = [i.parallel_type for i in tv.loop if i.parallel_type in THREAD_TYPES + BLOCK_TYPES]
        if len(set(launched)) != len(launched):
            raise UnsupportedSchedule(f"{tv.name} binds one thread/block index to two loop axes ({launched}); "
                                      f"merge them first")
        internal = not tv.is_fusion_input and not tv.is_fusion_output and tv.definition is not None
        if internal and tv.memory_type is MemoryType.Global:
            raise UnsupportedSchedule(
                f"{tv.name} is an intermediate in global memory; that needs a scratch buffer and a grid-wide "
                f"barrier, which are not lowered; put it in shared or local memory")
    tmem.check_supported(st)


def order_tensors(st: Lowering) -> None:
    st.order = execution_order(st.fusion)
    st.classes = LoopClasses(st.fusion, st.order)


def allocate(st: Lowering) -> None:
    fusion = st.fusion
    st.allocations = {t.name: compute_allocation(t) for t in fusion.tensors if not t.is_fusion_input}
    st.smem = plan_shared_memory(fusion, st.allocations)
    for tv in st.order:
        if tv.memory_type is MemoryType.Local:
            elements = st.allocations[tv.name].num_elements_expr
            if try_int(elements) is None:
                raise UnsupportedSchedule(
                    f"{tv.name} is a register (Local) tensor of symbolic size {elements}; registers need a "
                    f"compile-time size: inline it further or parallelize its symbolic axes")
            st.buffers.append(Buffer(tv.name, MemoryType.Local, tv.dtype, elements))
        elif tv.memory_type is MemoryType.Shared:
            alloc = st.allocations[tv.name]
            st.buffers.append(Buffer(tv.name, MemoryType.Shared, tv.dtype, alloc.num_elements_expr,
                                     st.smem.offset(tv.name)))
    for tv in list(fusion.inputs) + list(fusion.outputs):
        st.globals[tv.name] = global_layout(tv)


def index(st: Lowering) -> None:
    launch = block_dims(st.fusion)
    builder = StatementBuilder(st.fusion, st.classes, st.allocations, st.globals, launch, st.target)
    for tv in st.order:
        path, stmt = builder.build(tv)
        st.statements.append((path, stmt))
        if isinstance(stmt, Compute) and stmt.vector > 1:
            for operand in [stmt.out] + stmt.ins:
                g = st.globals.get(operand.tensor)
                if g is not None and g.vector_elements < stmt.vector:
                    st.globals[operand.tensor] = replace(g, vector_elements=stmt.vector)
    st.tensor_maps, st.mbarriers = builder.tma.tensor_maps, builder.tma.mbarriers


def nest(st: Lowering) -> None:
    st.tree = build_tree(st.statements)


def sync(st: Lowering) -> None:
    on_chip = {t.name for t in st.order if t.memory_type in (MemoryType.Shared, MemoryType.Tensor)}
    insert_syncs(st.tree, on_chip)


def signature(st: Lowering) -> None:
    fusion = st.fusion
    params, names = [], {}
    for tv in list(fusion.inputs) + list(fusion.outputs):
        params.append(Param(tv.name, "tensor", "", tensor=tv.name))
    for m in st.tensor_maps:
        params.append(Param(m.param, "tensor_map", "", tensor=m.tensor))
    for name in fusion.symbols:
        names[name] = f"s_{name}"
        params.append(Param(names[name], "extent", "unsigned long long", symbol=name))
    for g in st.globals.values():
        for s in g.strides:
            for v in sorted(s.free_vars()):
                if v.startswith("stride.") and v not in names:
                    names[v] = v.replace(".", "_")
                    params.append(Param(names[v], "stride", "unsigned long long", tensor=g.name, symbol=v))
    for cls in st.classes.classes.values():
        names[cls.index_var] = cls.var
    dims = block_dims(fusion)
    st.kernel = KernelIR(
        name=KERNEL_NAME,
        params=params,
        buffers=st.buffers,
        body=st.tree,
        globals=[st.globals[t.name] for t in list(fusion.inputs) + list(fusion.outputs)],
        block=thread_dims(fusion),
        grid=tuple(dims.get(p, const(1)) for p in BLOCK_TYPES),  # type: ignore[arg-type]
        smem_bytes=st.smem.total,
        names=names,
        header=[str(op) for op in fusion.exprs if op.output in st.order],
        tensor_maps=st.tensor_maps,
        mbarriers=st.mbarriers,
    )


PASSES: list[tuple[str, Callable[[Lowering], None]]] = [
    ("check", check_supported),
    ("order", order_tensors),
    ("allocate", allocate),
    ("index", index),
    ("tmem", tmem.lower_accesses),
    ("nest", nest),
    ("sync", sync),
    ("tmem-alloc", tmem.allocate_and_fence),
    ("signature", signature),
]


def lower(fusion: Fusion, target: Target, *, until: str | None = None) -> Lowering:
    """Run the passes on `fusion` (a verified snapshot: lowering never re-checks safety)."""
    st = Lowering(fusion, target)
    for name, run in PASSES:
        run(st)
        if name == until:
            break
    return st

