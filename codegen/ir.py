"""The kernel IR: what lowering produces and emission prints.

A kernel is a tree of Loops (serial, unrolled, or a thread/block index that is not a
loop at all) whose leaves are Compute statements and Syncs, plus the buffers it
allocates and the parameters it takes. Every index and bound is an Expr of the one
index algebra; emission renders them with codegen/emit/cuda_expr.py.

Tensor memory (sm_100a) adds nodes produced by codegen/lower/tmem.py:

    TmemAccess        one warp-collective tcgen05.st or tcgen05.ld (the placed nest's
                      leaf of that statement: execution/nest.py classified it)
    TmemAlloc         warp 0 allocates the CTA's columns; a fenced barrier publishes the address
    TmemFencedSync    __syncthreads between tcgen05.fence::before_thread_sync and ::after_thread_sync
    TmemDealloc       a fenced barrier, then warp 0 frees the columns

The barrier nodes are Syncs (each holds a __syncthreads; a NamedSync a bar.sync of some warps).
The last passes say what the printer would otherwise decide: NamedSync, IndexNames (loop-invariant
index terms named where all they read is defined), WholeTile (a nest printed twice under a guard). Nodes
are plain data: emit/'s table EMIT prints each node type (the tensor-memory ones through
codegen/emit/tmem.py), and nothing else.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..execution.barriers import BulkStoreWait, CpAsyncCommit, CpAsyncWait, Sync, TmaWait  # placed by the model, checked by SMEM-RACE / CPASYNC-WAIT
from ..execution.barriers import WgmmaCommit, WgmmaFence, WgmmaWait  # placed by the model, checked by PIPELINE-WAR
from ..execution.barriers import Tcgen05Commit, Tcgen05Wait  # placed by the model, checked by TCGEN05-ASYNC-ORDER
from ..execution.pipeline import Prefetched, Prologue  # a circular buffer's, placed by the model (PIPELINE-WAR)
from ..execution.rotation import Rotated  # a rotated loop's next iteration (LOOP-ROTATION)
from ..execution.warp_roles import StageDrain, StageEmptyWait, StageRelease, WarpRoles  # warp specialization's (PIPELINE-WAR)
from ..execution.ping_pong import TurnPass, TurnWait  # ping-pong's turns (WS-PING-PONG)
from ..execution.statements import Cond  # statements' predicates come from the execution model
from ..model.fusion import Scalar
from ..model.expr import Expr, add, const
from ..hw.tcgen05 import TmemPattern, tmem_address
from ..model.types import DataType, Direction, MemoryType, OpKind


class LoopKind(enum.Enum):
    """A Loop of the tree: a counted loop (serial or unrolled), or a thread / block index that is
    not a loop at all (the launch covers its extent)."""

    SERIAL = "serial"
    UNROLL = "unroll"
    THREAD = "thread"
    BLOCK = "block"


class ParamKind(enum.Enum):
    """What a kernel parameter carries."""

    TENSOR = "tensor"  # a global tensor's pointer
    EXTENT = "extent"  # an extent symbol's value
    STRIDE = "stride"  # a run-time stride of a discontiguous axis
    TENSOR_MAP = "tensor_map"  # a TMA descriptor, encoded at launch
    WORKSPACE = "workspace"  # global memory the runtime allocates: a grid reduction's partials, a TMA-stored intermediate
    SEMAPHORES = "semaphores"  # a grid reduction's 32-bit semaphores: zeroed once, returned to 0 by each launch


@dataclass(frozen=True)
class Operand:
    """One element (or the first of a vector) of a tensor: its buffer and element offset.
    per_element: a register operand of a vector statement that is not contiguous along the
    vector: `offset` then holds the variable ELEMENT_VAR (the element 0..vector-1), and the
    operand is accessed element by element while the others move whole vectors."""

    tensor: str
    memory: MemoryType
    dtype: DataType
    offset: Expr
    per_element: bool = False
    field: str = ""  # a Welford state's field (avg, m2, n) where the element is one (codegen/lower/reduction.py)


ELEMENT_VAR = "tp_v"  # the element of a vector in a per-element operand's offset
# the launch's dimensions as the kernel reads them (codegen/lower/launch_dims.py)
BLOCK_DIMS = ("blockDim.x", "blockDim.y", "blockDim.z")
GRID_DIMS = ("gridDim.x", "gridDim.y", "gridDim.z")


@dataclass(frozen=True)
class IotaValue:
    """An iota's element (model/fusion.py Iota): start + index step in the output's compute type,
    `index` the element's logical index (execution/statements.py's, as every operand's offset)."""

    start: int | float
    step: int | float
    index: Expr


@dataclass
class Compute:
    """out = op(ins) at one point of the loop nest, under `conds`.
    `vector` > 1: one access of `vector` consecutive elements per operand.
    `scalar`: a binary op's number operand (the fusion Op's), beside its one tensor input."""

    kind: OpKind  # the fusion Op's kind
    name: str  # set, add, exp, ...
    out: Operand
    ins: list[Operand]
    conds: list[Cond]
    vector: int = 1
    comment: str = ""
    scalar: Scalar | None = None
    # a rescaled sum's accumulation (execution/online.py): acc * exp2(rescale * ins[1]) + ins[0]
    rescale: float | None = field(default=None, kw_only=True)  # keyword-only: subclasses' fields stay positional
    # a zero-filled statement (execution/zero_padding.py): where these fail (past K) it writes 0, reads nothing
    zero_unless: list = field(default_factory=list, kw_only=True)
    # an iota (no inputs): the value it stores at this point
    iota: IotaValue | None = field(default=None, kw_only=True)


@dataclass
class TmaCopy:
    """One cp.async.bulk.tensor (with `gmem`: one 1-D cp.async.bulk) per execution: a load (global
    -> shared, completes on `barrier`) or a store (shared -> global, a bulk group). Issued by the
    threads meeting `issuer`; not at all where `bounds` fail (holes outside the box, or at a bulk
    run's first element), though a load's issuer still arrives."""

    direction: Direction  # LOAD: global -> shared; STORE: shared -> global
    tensor_map: str  # the kernel parameter
    smem: str  # the shared tensor
    smem_offset: Expr  # bytes from the buffer start to the tile's first byte
    coords: tuple[Expr, ...]  # the box origin, innermost first
    nbytes: Expr  # bytes one copy moves: a load's expect-tx count
    barrier: str | None
    issuer: list[Cond]
    bounds: list[Cond]
    comment: str = ""
    circular: tuple[int, int, int] | None = None  # a circular buffer's (stages, prefetch, circular loop depth)
    stage: Expr | None = None  # a circular buffer's load: the stage, whose mbarrier it completes on
    specialized: object | None = None  # a warp-specialized circular buffer's load: its WarpSpecialized
    war_mbarrier: bool = False  # a Pipelined(uses_mbarrier_for_war=True) load: refilled after empty mbarriers
    # a load multicast to its cluster (execution/cluster.py): (the cluster axis, x/y/z; the receivers' CTA-rank
    # mask from the axis's first block; the rank along the axis that issues this copy; the rank stride)
    multicast: tuple[str, int, Expr, int] | None = None
    # a 1-D bulk copy (cp.async.bulk, no tensor map: `tensor_map` "" and `coords` ()): the global
    # tensor, and the element offset of the run's first element from its base
    gmem: str | None = None
    gmem_offset: Expr | None = None
    # a load whose copies per phase are not a constant (a loop of symbolic extent inside the circular
    # loop): each copy announces its bytes alone (mbarrier.expect_tx) and the issuer arrives once,
    # where these hold (its last copy of the phase); None: each copy arrives with its bytes
    arrive_when: list[Cond] | None = None


@dataclass
class CpAsyncCopy(Compute):
    """cp.async.{cache}.shared.global: `vector` elements of ins[0] (global) into out (shared), one
    copy of `nbytes` (cp-size), issued where `conds` hold. Where a `zero_fill` cond fails (a hole)
    the copy reads nothing and writes zeros (src-size 0). Completes after a CpAsyncWait."""

    cache: str = "ca"  # "ca" or "cg"
    nbytes: int = 4
    zero_fill: list[Cond] = field(default_factory=list)
    circular: tuple[int, int, int] | None = None  # a circular buffer's (stages, prefetch, circular loop depth)


@dataclass
class CachedLoad(Compute):
    """A plain copy of a fusion input (global) whose loads carry a cache operator (the Op's
    tp.CacheOp): `ld.global.{cache}`, in words of at most 16 bytes (PTX ISA 9.7.9.8 ld)."""

    cache: str = "ca"  # "ca" (AllLevels), "cg" (Global) or "cs" (Streaming)


@dataclass
class MatrixCopy:
    """ldmatrix / stmatrix .m8n8.x{num}.b16: a warp moves `num` 8x8 matrices between shared
    memory and `num` 32-bit registers per lane. `address`: the byte offset from the shared
    buffer's start of the row this lane supplies; the register operand is the lane's first element.
    `conds`: where the warp issues it, the same in every lane (a block past the tensor's end)."""

    instruction: str  # "ldmatrix" or "stmatrix"
    num: int  # 1, 2 or 4
    out: Operand
    ins: list[Operand]
    address: Expr
    comment: str = ""
    conds: list[Cond] = field(default_factory=list)

    @property
    def smem(self) -> Operand:
        return self.ins[0] if self.instruction == "ldmatrix" else self.out

    @property
    def regs(self) -> Operand:
        return self.out if self.instruction == "ldmatrix" else self.ins[0]


@dataclass
class Loop:
    var: str  # the C++ index: a loop counter, or threadIdx.x / blockIdx.y for parallel kinds
    extent: Expr
    kind: LoopKind
    label: str  # the tensor axes it iterates (for the comment)
    key: int = -1  # the loop class: tensors inlined into one another share it
    body: list = field(default_factory=list)


@dataclass(frozen=True)
class Buffer:
    """An on-chip allocation: registers (Local) or a slice of dynamic shared memory."""

    tensor: str
    memory: MemoryType
    dtype: DataType
    elements: Expr
    smem_offset: Expr | None = None  # bytes from the dynamic shared-memory base
    # registers of Welford states (model/welford.py): tp_welford_state<dtype, C> (avg, m2, the count n of this dtype)
    welford_count: DataType | None = None


@dataclass(frozen=True)
class GlobalTensor:
    """A fusion input or output: how run() binds and checks it.

    `alloc_axes[k]` is the logical axis of allocation axis k (allocation order, outer
    first); `strides[k]` its element stride (an Expr over extent and stride parameters);
    `vector_elements`: the widest vector access, which its pointer must be aligned for."""

    name: str
    dtype: DataType
    is_input: bool
    extents: tuple[Expr, ...]  # logical extents
    alloc_axes: tuple[int, ...]
    strides: tuple[Expr, ...]
    broadcast: tuple[bool, ...]  # per logical axis
    vector_elements: int = 1
    user_name: str | None = None  # make_tensor(name=): its kernel parameter and launch errors say it
    view_of: str | None = None  # a view of this fusion input (model/producer_aliases.py): given its pointer

    @property
    def shown(self) -> str:
        """The name launch errors give it: the user's, else T<n>."""
        return self.user_name or self.name


@dataclass(frozen=True)
class TensorMap:
    """A CUtensorMap encoded at launch (cuTensorMapEncodeTiled): every list innermost first."""

    param: str
    tensor: str  # the global tensor whose address it holds
    dtype: DataType
    sizes: tuple[Expr, ...]
    strides_bytes: tuple[Expr, ...]  # dimensions 1..rank-1 (dimension 0 is contiguous)
    box: tuple[Expr, ...]
    element_strides: tuple[Expr, ...]
    swizzle_bytes: int
    user_name: str | None = None  # the global tensor's make_tensor(name=): launch errors say it

    @property
    def shown(self) -> str:
        """The global tensor's name in launch errors: the user's, else T<n>."""
        return self.user_name or self.tensor


@dataclass(frozen=True)
class MBarrier:
    """A shared-memory mbarrier completing one phase per execution of a TMA load (or, `empty`, per
    release of a warp-specialized stage by its consumer warpgroups)."""

    name: str
    count: int  # threads that arrive per phase (the load's issuers; the consumer warpgroups)
    tensor: str
    stages: int = 1  # a circular buffer's loads: one mbarrier per stage, name[stage]
    empty: bool = False  # waited for by the producer, whose phase bits start at 1
    commit: bool = False  # a tcgen05.mma's: one tcgen05.commit arrives per phase (execution/tcgen05_order.py)


@dataclass(frozen=True)
class Param:
    """A kernel parameter: a tensor pointer, an extent symbol, or a runtime stride."""

    name: str  # C++ name
    kind: ParamKind
    ctype: str
    tensor: str | None = None
    symbol: str | None = None  # the algebra variable it binds (extent symbol or stride var)
    elements: Expr | None = None  # a workspace's or semaphore buffer's size, in its elements
    dtype: DataType | None = None  # a workspace's element type
    storage: bool = False  # a workspace holding a tensor's elements (a TMA-stored intermediate), in their storage type


@dataclass
class KernelIR:
    name: str
    params: list[Param]
    buffers: list[Buffer]
    body: list
    globals: list[GlobalTensor]
    block: tuple[Expr, Expr, Expr]
    grid: tuple[Expr, Expr, Expr]
    smem_bytes: Expr
    names: dict[str, str]  # algebra variable -> C++ identifier
    header: list[str] = field(default_factory=list)  # the fusion's ops, one per line
    tensor_maps: list[TensorMap] = field(default_factory=list)
    mbarriers: list[MBarrier] = field(default_factory=list)
    cluster: tuple[int, int, int] = (1, 1, 1)  # blocks per cluster (execution/cluster.py): __cluster_dims__
    dependent_launch: bool = False  # Fusion.dependent_launch: griddepcontrol first, cuLaunchKernelEx with PDL
    reversed_blocks: tuple[str, ...] = ()  # Fusion.reversed_blocks: blockIdx.x .. read as gridDim.x - 1 - blockIdx.x
    cooperative: bool = False  # a grid barrier (an allreduce's GridReduce): cuLaunchCooperativeKernel, every block resident
    index_bits: int = 64  # unsigned index arithmetic: 32 where lower/index_width.py proves it enough
    max_threads: int = 1024  # the block's threads at any admitted size: __launch_bounds__
    static_smem_bytes: int = 0  # __shared__ variables beside the dynamic plan: mbarriers, tensor memory's slot
    views: list[GlobalTensor] = field(default_factory=list)  # broadcasts, copies read as views of inputs: their pointers


# -- tensor memory (sm_100a) ----------------------------------------------------------------------

BASE_NAME = "tmem_base"  # the C++ name of the allocation's address (lane 0, first column)
TCGEN05_OPS = {Direction.STORE: "st", Direction.LOAD: "ld"}  # tcgen05.st / tcgen05.ld


@dataclass
class TmemElement:
    """Element `index` of a thread's vector in a TmemAccess (row-major over the vectorized IDs).

    `data` is the scalar statement moving that element (for a store: tensor memory <- op(ins);
    for a load: out <- op(ins), its tensor-memory input read from the registers). `lane` and
    `column` are the cell the verifier's model assigns to the element (per thread, the 32-bit
    column of its first byte, relative to the tensor's first column). The element sits in
    register `register` from byte `byte` (a 64-bit one in that register and the next), as
    hw/tcgen05.py Packing places it: the tcgen05 pattern proves that this register and byte
    of this thread land exactly there."""

    index: int
    data: Compute
    lane: Expr
    column: Expr
    register: int
    byte: int


@dataclass
class TmemAccess(Compute):
    """`tcgen05.{st,ld}.sync.aligned.<pattern>.x<repeat>.b32` by a whole warp, then its wait.

    The warp's address is `tmem_base + tmem_address(lane, column + column_offset)`, with `lane`
    and `column` (32-bit) the verifier's access model at the warp's first thread and element 0
    (the same for all 32 threads: every thread computes it from its own threadIdx). Each thread
    moves `registers` 32-bit registers holding its `elements`, packed.
    `conds` predicate the instruction and are warp-uniform (see codegen/lower/tmem.py);
    `data_conds` predicate only the write-back of loaded registers."""

    direction: Direction = Direction.STORE  # STORE: registers -> tensor memory; LOAD: tensor memory -> registers
    tensor: str = ""  # the tensor-memory tensor
    pattern: TmemPattern = TmemPattern.P32x32b
    repeat: int = 1  # .xN
    lane: Expr = const(0)
    column: Expr = const(0)
    column_offset: int = 0  # the tensor's first column within the CTA's allocation
    registers: int = 1  # 32-bit registers per thread
    elements: list[TmemElement] = field(default_factory=list)
    data_conds: list[Cond] = field(default_factory=list)
    tmem_input: int = -1  # loads: which input of `data` is the tensor-memory tensor

    @property
    def address_offset(self) -> Expr:
        """The warp's address minus tmem_base (hw/tcgen05.py tmem_address)."""
        return tmem_address(self.lane, add(self.column, self.column_offset))

    @property
    def instruction(self) -> str:
        return f"tcgen05.{TCGEN05_OPS[self.direction]}.sync.aligned.{self.pattern}.x{self.repeat}.b32"

    @property
    def split_offset(self) -> int | None:
        """16x32bx2's immHalfSplitoff: threads 16..31 reach this many columns further (the
        verifier's pattern fixes it to the register count, CUTLASS's choice)."""
        return self.registers if self.pattern is TmemPattern.P16x32bx2 else None


@dataclass
class TmemAlloc(Sync):
    """tcgen05.alloc of `columns` (a power of two, 32..512) by warp 0, relinquish, a fenced
    barrier, and every thread reads the address. `warp0` is true in exactly the threads
    of warp 0 (linear thread id < 32), a warp-uniform condition."""

    columns: int = 32
    linear_thread: Expr = const(0)
    regions: list[tuple[str, int, int]] = field(default_factory=list)  # (tensor, first column, columns)


@dataclass
class TmemFencedSync(Sync):
    """A barrier that also orders tcgen05 operations across the threads it joins."""


@dataclass
class TmemDealloc(Sync):
    """A fenced barrier (every warp's tcgen05 ld/st is complete), then warp 0 frees the columns."""

    columns: int = 32
    linear_thread: Expr = const(0)


# -- reductions (codegen/lower/reduction.py) ------------------------------------------------------

@dataclass
class ReduceInit:
    """Each of the `elements` registers of a reduction's accumulator `acc` (of the compute type
    `dtype`) holds `neutral`, before the reduction's first reduction loop (model/reduction.py)."""

    acc: str
    elements: int
    dtype: DataType
    neutral: int | float
    comment: str = ""
    # wgmma's accumulators: each register pinned after its init (an empty asm reading and writing
    # it), so that ptxas sets them before the wgmma pipeline rather than inside it (C7515)
    pinned: bool = False
    welford_count: DataType | None = None  # Welford states with a count of this dtype: each starts empty (all 0)


@dataclass
class BlockReduce:
    """The threads of the block combine their accumulators `acc` across the thread indices marked
    in `threads` (x, y, z): warp shuffles, then shared memory (`scratch`, between two
    __syncthreads); every thread ends with its group's total. Every thread of the block runs it:
    it sits outside every predicate, and a thread that accumulated nothing holds the neutral
    element. `combine` is the binary op (add, maximum)."""

    acc: str
    elements: int
    dtype: DataType
    combine: str
    threads: tuple[bool, bool, bool]
    scratch: str | None  # None: the combine is shuffles only (execution/reduction.py combines_in_shared)
    comment: str = ""
    welford_count: DataType | None = None  # combine "welford": the states' count dtype


@dataclass
class SiblingStep:
    """A step of a Welford output (model/welford.py) that its group's leader does for it (the
    update and the block combine of the shared state, execution/reduction.py welford_leader):
    nothing runs here; the leaf of the placed nest keeps its place."""

    comment: str


@dataclass
class GridReduce:
    """The blocks of a segment combine their accumulators `acc` (execution/grid_reduction.py):
    each thread meeting `writer` stores its N registers at `work`[slot + k], every block fences
    them and counts itself on `semaphores`[semaphore]; the last block of the `ranks` to arrive
    combines, in each thread, the slots first + j * stride for j = reducer, reducer + reducers, ...
    then across the thread indices marked in `threads` (as BlockReduce, in `scratch`), and
    returns the semaphore to 0. `flag` names the bool saying this block was the last, and each
    (name, block index, grid dim) of `last` the index the store's single writer compares with:
    the block index in the last block, the grid dim elsewhere. Every thread runs it, unpredicated.
    An `allreduce` (execution/grid_reduction.py is_allreduce) counts on its semaphore as a grid-wide
    barrier instead, the block of rank ranks - 1 (`rank`: this block's) adding 2^31 - (ranks - 1),
    waits for every block of its segment, and combines in every block; `flag` and `last` are unused.
    A grid Welford (combine "welford", execution/grid_reduction.py): `acc` holds states of
    `welford_count` counts, and each field's partials go to a workspace of its own, `welford_work`
    (avg, M2, N; `work` is the first), at the same slots; the last block combines them by Chan's formula."""

    acc: str
    elements: int
    dtype: DataType
    combine: str
    neutral: int | float
    threads: tuple[bool, bool, bool]
    scratch: str | None
    work: str
    semaphores: str
    slot: Expr
    first: Expr
    stride: Expr
    ranks: Expr
    semaphore: Expr
    writer: list
    reducer: Expr
    reducers: Expr
    flag: str
    last: list
    comment: str = ""
    allreduce: bool = False
    rank: Expr | None = None
    welford_count: DataType | None = None
    welford_work: tuple[str, ...] = ()


@dataclass
class GroupedGridReduce:
    """The grid reductions of one round (execution/grid_reduction.py grid_round, nvFuser's
    GroupedGridReduction) combined together: each member (a GridReduce, its own accumulator,
    workspace, combine and neutral element) has its partials written, then the block counts itself
    once on the first member's semaphore (`semaphores`[semaphore], shared by all: the members'
    layouts are one) or, for an allreduce round, meets the others at one grid-wide barrier; the
    last block (every block of an allreduce) combines each member's partials in turn, and the
    first member's `flag` and `last` name the one last block of every member."""

    members: list[GridReduce]
    comment: str = ""

    @property
    def allreduce(self) -> bool:
        return self.members[0].allreduce


# -- tensor cores (codegen/lower/mma.py) ------------------------------------------------------------

@dataclass
class MmaIssue(Compute):
    """One macro tile of an MmaOp (model/mma_op.py): the warp issues `frag.k_steps * frag.n_steps`
    instructions `frag.inst`, accumulating into the registers acc[acc_base + element] (out.tensor
    is the accumulator; out.offset is acc_base). `a` and `b` hold the register of every element
    of the lane's A and B fragments of the tile, in the macro's order (MacroFragments); ins are
    their first elements, so barrier placement sees which tensors it reads. `conds` are uniform
    across the warp (the instruction is warp-collective). `tf32_rounding`: the op's
    tp.Tf32Rounding (None for 16-bit operands)."""

    frag: object = None  # execution.mma.MacroFragments
    a: list = field(default_factory=list)
    b: list = field(default_factory=list)
    tf32_rounding: object = None
    # wgmma: the WgmmaDescriptor of each shared operand, A's (unless frag.a_in_registers: then `a`
    # holds every element of its register fragment, as for mma.sync) and B's; a shared operand's
    # list holds its element 0 only
    descriptors: tuple = ()
    # tcgen05.mma (frag.is_tcgen05): its 32-bit instruction descriptor, the column of D[0, 0] in
    # out.tensor (out.offset) and the tensor's first column in the allocation (codegen/lower/tmem.py),
    # and the K loops' indices: the first K step (all 0) writes D = A B, the others add
    idesc: int = 0
    tmem_offset: int = 0
    k_indices: tuple = ()


@dataclass(frozen=True)
class WgmmaDescriptor:
    """A wgmma operand's shared-memory matrix descriptor (execution/wgmma_operands.py, proved by
    WGMMA-SMEM-LAYOUT): `start` bytes from `tensor`'s buffer at this instance, LBO and SBO in
    bytes, `layout` the descriptor's swizzle field."""

    tensor: str
    start: object  # Expr
    lbo: int
    sbo: int
    layout: int
    major: str = "K"  # "MN": the instruction transposes the operand (imm-trans-a / -b)
    mode: int | None = None  # tcgen05.mma: the descriptor's 3-bit swizzle mode (hw/tcgen05.py), in place of layout


# -- what the late passes decide for the printer ----------------------------------------------------

@dataclass
class NamedSync(Sync):
    """`bar.sync barrier, threads`: a barrier of `threads` threads only, where not all of the
    block's take part (a warp-specialized kernel's consumers, after the producer warpgroup has
    returned: codegen/lower/named_barriers.py). Barrier 0 is __syncthreads()'s."""

    barrier: int = 1
    threads: int = 0


@dataclass
class IndexNames:
    """`const <index type> name = value;` for each (name, value): loop-invariant index terms, first in
    the kernel or in the body of the serial loop whose counter they read (codegen/lower/invariants.py)."""

    names: list[tuple[str, Expr]]


@dataclass
class WholeTile:
    """An unrolled nest in two versions (codegen/lower/whole_tile.py): `whole`, without the hole
    predicates that `guard` implies, where the guard holds (it is the same for every thread of the
    block), else `lowered`, the nest as lowered."""

    guard: list[Cond]
    whole: Loop
    lowered: Loop
    why: str = "a whole tile: no hole predicates"  # the `if`'s comment (codegen/lower/peel.py: a tile unmasked)

    @property
    def body(self) -> list:
        """Both versions, for walk() and the passes that read every node."""
        return [self.whole, self.lowered]


# Every node type a loop body may hold (emit/__init__.py's EMIT prints each, keyed by exact type).
NODE_TYPES = (Loop, Compute, Sync, TmaCopy, TmaWait, MatrixCopy, TmemAccess, TmemAlloc, TmemFencedSync, TmemDealloc,
              CpAsyncCopy, CachedLoad, CpAsyncWait, CpAsyncCommit, ReduceInit, BlockReduce, SiblingStep, GridReduce,
              GroupedGridReduce, Prologue, Prefetched, MmaIssue,
              WgmmaFence, WgmmaCommit, WgmmaWait, Tcgen05Commit, Tcgen05Wait, WarpRoles, StageEmptyWait, StageRelease, StageDrain, BulkStoreWait,
              NamedSync, IndexNames, WholeTile, TurnWait, TurnPass, Rotated)  # a Role only in WarpRoles.body


def walk(nodes: list):
    """Every node of `nodes`, and of the bodies nested in them (loops, a circular buffer's
    prologue and prefetched copies), in order."""
    for n in nodes:
        yield n
        if hasattr(n, "body"):
            yield from walk(n.body)


def format_nodes(nodes: list, indent: int = 0) -> str:
    """A readable dump of a loop tree (for `--passes` style debugging and tests)."""
    pad = "  " * indent
    lines = []
    for n in nodes:
        if isinstance(n, Loop):
            lines.append(f"{pad}{n.kind.value} {n.var} < {n.extent}  # {n.label}")
            lines.append(format_nodes(n.body, indent + 1))
        elif isinstance(n, NamedSync):
            lines.append(f"{pad}{'fence.proxy.async + ' if n.fence_async else ''}bar.sync {n.barrier}, {n.threads}"
                         f"  # {n.why}")
        elif isinstance(n, Sync):
            lines.append(f"{pad}{'fence.proxy.async + ' if n.fence_async else ''}sync  # {n.why}")
        elif isinstance(n, TurnWait):
            lines.append(f"{pad}turn wait (bar.sync, not warpgroup {n.first} in iteration 0)  # {n.why}")
        elif isinstance(n, TurnPass):
            lines.append(f"{pad}turn pass (bar.arrive, not warpgroup {n.last} in the last iteration)  # {n.why}")
        elif isinstance(n, IndexNames):
            lines += [f"{pad}{name} = {value}" for name, value in n.names]
        elif isinstance(n, WholeTile):
            lines.append(f"{pad}if {' && '.join(f'{c.lhs} {c.op} {c.rhs}' for c in n.guard)}:  # a whole tile")
            lines.append(format_nodes([n.whole], indent + 1))
            lines.append(f"{pad}else:")
            lines.append(format_nodes([n.lowered], indent + 1))
        elif isinstance(n, TmaWait):
            lines.append(f"{pad}wait {n.barrier}  # {n.why}")
        elif isinstance(n, ReduceInit):
            lines.append(f"{pad}{n.acc}[0..{n.elements}) = {n.neutral}")
        elif isinstance(n, BlockReduce):
            over = "".join(c for c, r in zip("xyz", n.threads) if r)
            lines.append(f"{pad}block {n.combine} of {n.acc}[0..{n.elements}) over threadIdx.{over} via {n.scratch}")
        elif isinstance(n, GridReduce):
            lines.append(f"{pad}grid {n.combine} of {n.acc}[0..{n.elements}) over {n.ranks} blocks via "
                         f"{', '.join(n.welford_work or (n.work,))}[{n.slot}], semaphore {n.semaphores}[{n.semaphore}]")
        elif isinstance(n, GroupedGridReduce):
            first = n.members[0]
            lines.append(f"{pad}grid round of {', '.join(f'{m.combine} of {m.acc}' for m in n.members)}"
                         f"[0..{first.elements}) over {first.ranks} blocks via "
                         f"{', '.join(m.work for m in n.members)}[{first.slot}], one semaphore "
                         f"{first.semaphores}[{first.semaphore}]")
        elif isinstance(n, Prologue):
            then = "" if n.tma or not n.asynchronous else ", each then commit"
            lines.append(f"{pad}prologue: iterations 0..{n.prefetch - 1} (below {n.extent}){then}")
            lines.append(format_nodes(n.body, indent + 1))
        elif isinstance(n, Prefetched):
            lines.append(f"{pad}the copies of iteration {n.index} + {n.prefetch} (if below {n.extent}), stage % {n.stages}")
            lines.append(format_nodes(n.body, indent + 1))
        elif isinstance(n, Rotated):
            lines.append(f"{pad}rotated: iteration {0 if n.first else f'{n.index} + 1'} (if below {n.extent}) of {n.label}")
            lines.append(format_nodes(n.body, indent + 1))
        elif isinstance(n, CpAsyncWait):
            lines.append(f"{pad}{'cp.async.commit_group + ' if n.commit else ''}cp.async.wait_group {n.pending}"
                         f"  # {n.why}")
        elif isinstance(n, CpAsyncCommit):
            lines.append(f"{pad}cp.async.commit_group  # {n.why}")
        elif isinstance(n, BulkStoreWait):
            lines.append(f"{pad}{'cp.async.bulk.wait_group 0 + fence.proxy.async.global' if n.complete else 'cp.async.bulk.wait_group.read 0'}"
                         f"  # {n.why}")
        elif isinstance(n, WgmmaFence):
            lines.append(f"{pad}wgmma.fence  # {n.why}")
        elif isinstance(n, WgmmaCommit):
            lines.append(f"{pad}wgmma.commit_group  # {n.why}")
        elif isinstance(n, WgmmaWait):
            lines.append(f"{pad}{'wgmma.commit_group + ' if n.commit else ''}wgmma.wait_group {n.pending}  # {n.why}")
        elif isinstance(n, Tcgen05Commit):
            lines.append(f"{pad}tcgen05.commit -> {n.barrier}  # {n.why}")
        elif isinstance(n, Tcgen05Wait):
            lines.append(f"{pad}wait {n.barrier}{' + tcgen05.fence::after_thread_sync' if n.fence else ''}  # {n.why}")
        elif isinstance(n, TmaCopy):
            lines.append(f"{pad}tma {n.direction.value} {n.smem}+{n.smem_offset} <-> {n.tensor_map}{list(n.coords)}"
                         + (f" if {' && '.join(f'{c.lhs} {c.op} {c.rhs}' for c in n.issuer + n.bounds)}"
                            if n.issuer or n.bounds else ""))
        else:
            args = [_operand_text(o) for o in n.ins]
            scalar = getattr(n, "scalar", None)
            if scalar is not None:
                args.insert(scalar.position, str(scalar))
            name = f"cp.async.{n.cache}" if isinstance(n, CpAsyncCopy) else n.name
            fill = (f" zero-fill unless {' && '.join(f'{c.lhs} {c.op} {c.rhs}' for c in n.zero_fill)}"
                    if isinstance(n, CpAsyncCopy) and n.zero_fill else "")
            lines.append(f"{pad}{_operand_text(n.out)} = {name}(" + ", ".join(args) + ")"
                         + (f" x{n.vector}" if n.vector > 1 else "") + fill
                         + (f" if {' && '.join(f'{c.lhs} {c.op} {c.rhs}' for c in n.conds)}" if n.conds else ""))
    return "\n".join(line for line in lines if line)


def _operand_text(o: Operand) -> str:
    return f"{o.tensor}[{o.offset}]" + (f" for {ELEMENT_VAR}" if o.per_element else "")
