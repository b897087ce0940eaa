"""TensorBase: a tensor's logical, loop and allocation domains, its memory type and the
scheduling methods that record transforms on its loop domain (`split`, `merge`, `reorder`,
`swizzle`, ...), arguments checked at the door.

tensor.py's TensorView, the class users hold, adds the methods that make new tensors or read the
fusion's other tensors (cache_after, cache_before, rfactor, inline_at). The ops, reductions and
inlining those methods call build on this module, not on TensorView, so the imports run one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from .errors import ScheduleError, user_location
from .fusion import current_fusion
from .expr import Expr
from .iterdomain import IterDomain, Merge, Split, Swizzle, Transform, as_index, check_factor, wrong_enum
from .types import DataType, MemoryType, ParallelType, SwizzleType
from .options import MmaInputSmemSwizzle, checked_multicast, make_circular_buffer

if TYPE_CHECKING:
    from .fusion import Fusion, Op
    from .tensor import TensorView


class TensorBase:
    """A tensor in a Fusion: logical, loop and allocation domains of IterDomains, a dtype and a
    memory type (nvFuser's TensorView). Made by tp.make_tensor and the ops (tp.set, ...), never
    directly. The scheduling methods record transforms on the loop domain, check their arguments
    at the door (ScheduleError) and return self, so calls chain: `tv.split(0, 128).merge(1)`."""
    def __init__(self, fusion: "Fusion", logical: list[IterDomain], dtype: DataType, *, contiguity=None):
        self.fusion = fusion
        self.name = fusion._next_tensor_name()  # T<n>: the key every floor uses for this tensor
        self.user_name: str | None = None  # the name make_tensor(name=) gave; reports and kernels show it
        self.dtype = dtype
        self.logical: list[IterDomain] = list(logical)
        self.root: list[IterDomain] = self.logical  # another list only for an rFactor's partial reduction
        self.loop: list[IterDomain] = list(logical)
        self.history: list[Transform] = []
        self.allocation: list[IterDomain] | None = None
        self.contiguity: list[bool | None] = _normalize_contiguity(contiguity, logical, "make_tensor")
        self.memory_type = MemoryType.Local
        self.tmem_dim_sep: int = 0
        self.compute_at: int = 0
        self.definition: Op | None = None
        self.circular = None  # a CircularBuffer (model/options.py) once circular_buffer is called
        self.multicast_on = None  # a Multicast (model/options.py) once multicast is called
        self.online = None  # an online max's rescaled sums (model/online.py) once set_online is called
        self.online_origin = None
        # an online max's (mask, trip count, unmasked count or None) once skip_masked is called (model/online.py)
        self.skip = None
        self.skip_origin = None
        self.origin = user_location()
        # the user's file:line of the knobs set later: rules about them point there, not at `origin`
        self.memory_origin: str | None = None  # set_memory_type
        self.allocation_origin: str | None = None  # set_allocation_domain
        self.compute_at_origin: str | None = None  # inline_at, inline_most, inline_all_at
        fusion._register_tensor(self)

    # -- inspection -----------------------------------------------------------
    def __repr__(self) -> str:
        ids = ", ".join(i.label() for i in self.loop)
        return f"{self.name}_{self.memory_type.value[0].lower()}[{ids}]"

    @property
    def display_name(self) -> str:
        """The name reports, kernel parameters and launch errors show: the user's name
        (make_tensor(name="x")), else T<n>."""
        return self.user_name or self.name

    def set_name(self, name: str) -> "TensorView":
        """Name this tensor (an op's output, say) as make_tensor(name=) names an input: reports,
        the kernel's parameter (for an output) and launch errors say `name` instead of T<n>.
        Returns self.

            y = tp.set(x).set_name("y"); fusion.add_output(y)"""
        self.fusion.name_tensor(self, name, "set_name")
        return self

    @property
    def ndim(self) -> int:
        """The number of loop axes (nvFuser's nDims())."""
        return len(self.loop)

    def axis(self, i: int) -> IterDomain:
        """The loop IterDomain at position i (negative counts from the end); nvFuser's axis(i).
        Parallelize through it: `tv.axis(0).parallelize(tp.ParallelType.BIDx)`."""
        return self.loop[self._norm_axis("axis", i)]

    def get_loop_domain(self) -> list[IterDomain]:
        """A copy of the loop domain, outermost first (nvFuser's getLoopDomain())."""
        return list(self.loop)

    def get_logical_domain(self) -> list[IterDomain]:
        """A copy of the logical domain, the tensor's shape as created (nvFuser's getLogicalDomain())."""
        return list(self.logical)

    def get_root_domain(self) -> list[IterDomain]:
        """A copy of the root domain: the axes the defining op maps to its inputs (nvFuser's
        getRootDomain()). It is the logical domain, except for the partial reduction that
        `rfactor` makes, whose logical domain holds the split reduction axes, and for a tensor
        whose loop domain `commit_leaf_to_logical` made its logical domain (a permutation)."""
        return list(self.root)

    def get_allocation_domain(self) -> list[IterDomain]:
        """The allocation domain; when none was set, global tensors are allocated
        along their logical domain and on-chip tensors along their loop domain."""
        if self.allocation is not None:
            return list(self.allocation)
        return list(self.logical if self.memory_type is MemoryType.Global else self.loop)

    def has_allocation(self) -> bool:
        """Whether set_allocation_domain was called (nvFuser's hasAllocation())."""
        return self.allocation is not None

    def all_ids(self) -> list[IterDomain]:
        """Every IterDomain of this tensor: the logical ones, then each transform's outputs in the
        order they were made (nvFuser's TensorDomain::allIDs())."""
        seen: dict[int, IterDomain] = {i.uid: i for i in self.root + self.logical}
        for t in self.history:
            for o in t.outputs:
                seen.setdefault(o.uid, o)
        return list(seen.values())

    @property
    def is_fusion_input(self) -> bool:
        """Whether the fusion takes this tensor as an input (nvFuser's isFusionInput()), or, on a
        snapshot, takes its memory as a view of one (model/producer_aliases.py: a broadcast of a
        global input, which the kernel reads and never writes)."""
        return self in self.fusion.inputs or self.name in self.fusion.views

    @property
    def is_fusion_output(self) -> bool:
        """Whether the fusion returns this tensor (nvFuser's isFusionOutput())."""
        return self in self.fusion.outputs

    # -- transforms -----------------------------------------------------------
    def split(self, axis: int, factor, inner_split: bool = True) -> "TensorView":
        """Split loop axis `axis` into (outer, inner), replacing it in place; returns self.

        `factor`: a positive int, or a symbol name / sympy symbol for a symbolic factor.
        `inner_split=True` fixes the inner extent to factor (outer = ceildiv(extent, factor));
        False fixes the outer extent instead. The index is outer * inner_extent + inner; an
        indivisible split iterates holes, and SPLIT-DIVISIBILITY proves divisibility where the
        schedule needs it. The axis must be serial (split first, then parallelize) and outside
        the compute-at position.
        nvFuser: TensorView::split(axis, factor, inner_split).

            tv.split(0, 128)   # [I{N}] -> [I{ceildiv(N, 128)}, I{128}]"""
        a = self._norm_axis("split", axis)
        self._check_outside_ca("split", a)
        f = check_factor("split", factor)
        if not isinstance(inner_split, bool):
            raise ScheduleError(f"split: inner_split must be True or False, got {inner_split!r}")
        in_ = self.loop[a]
        if in_.parallel_type is not ParallelType.Serial:
            raise ScheduleError(
                f"split: cannot split {self.name} axis {a} ({in_.label()}): it is parallelized; split first, then parallelize"
            )
        t = Split.make(in_, f, inner_split, user_location(), self.fusion.next_iterdomain_number)
        self._apply(t, a, [a])
        return self

    def merge(self, axis_o: int, axis_i: int | None = None) -> "TensorView":
        """Merge loop axes `axis_o` (outer) and `axis_i` (inner, default axis_o + 1) into one axis
        of extent outer * inner, placed at the smaller position; returns self. The index is
        outer_index * inner_extent + inner_index. Both axes must be serial and outside the
        compute-at position. nvFuser: TensorView::merge(axis_o, axis_i).

            tv.merge(0)   # [I{M}, I{N}] -> [I{M * N}]"""
        o = self._norm_axis("merge", axis_o, "axis_o")
        i = o + 1 if axis_i is None else self._norm_axis("merge", axis_i, "axis_i")
        if i >= len(self.loop):
            raise ScheduleError(f"merge: {self.name} has no axis after axis {o} to merge with")
        if i == o:
            raise ScheduleError(f"merge: cannot merge axis {o} of {self.name} with itself")
        for a in (o, i):
            self._check_outside_ca("merge", a)
            if self.loop[a].parallel_type is not ParallelType.Serial:
                raise ScheduleError(
                    f"merge: cannot merge {self.name} axis {a} ({self.loop[a].label()}): it is parallelized"
                )
        _check_same_kind("merge", self, o, i)
        t = Merge.make(self.loop[o], self.loop[i], user_location(), self.fusion.next_iterdomain_number)
        self._apply(t, min(o, i), [o, i])
        return self

    def swizzle(self, swizzle_type: SwizzleType, x: int, y: int) -> "TensorView":
        """XOR-swizzle loop axes x and y: (x, y) -> (x, x ^ y), replacing both in place; returns
        self. `swizzle_type` is a tp.SwizzleType (XOR); the swizzle is a bijection when both
        extents are the same power of two (SWIZZLE-BIJECTIVITY). Both axes must be outside
        the compute-at position. nvFuser: TensorView::swizzle(SwizzleType::XOR, x, y).

            smem.swizzle(tp.SwizzleType.XOR, 0, 1)   # bank-conflict-free shared-memory layout"""
        if not isinstance(swizzle_type, SwizzleType):
            raise wrong_enum("swizzle", "swizzle_type", SwizzleType, swizzle_type)
        ax, ay = self._norm_axis("swizzle", x, "x"), self._norm_axis("swizzle", y, "y")
        if ax == ay:
            raise ScheduleError(f"swizzle: the two axes must differ, got {x} and {y}")
        for a in (ax, ay):
            self._check_outside_ca("swizzle", a)
        _check_same_kind("swizzle", self, ax, ay)
        t = Swizzle.make(self.loop[ax], self.loop[ay], user_location(), self.fusion.next_iterdomain_number,
                         loop=tuple(self.loop))
        self.history.append(t)
        self.loop[ax], self.loop[ay] = t.x_out, t.y_out
        return self

    def apply_mma_swizzle_for_tma_load(self, swizzle) -> "TensorView":
        """Lay out a wgmma operand tile [.., rows, cols] (cols innermost: K of a K-major tile, M or
        N of an MN-major one) as TMA boxes that the descriptor's canonical layout reads (nvFuser's
        MmaSwizzler::scheduleTMALoadForMma, the transforms); returns self. `swizzle` is a
        tp.MmaInputSmemSwizzle:

        - B128, B64 or B32 (S bytes a span): rows in groups of 8, 16-byte chunks XOR-swizzled by
          the row within its group (TensorView::swizzleTMABox): [.., rows / 8, 8 / (128 / S),
          128 / S, S / 16, 16 bytes], XOR of the row and the chunk. cols of exactly one span is
          that box; cols of n spans are first split into spans, the spans a loop of n boxes
          outside: [.., n, rows, S] -> [.., n, <the box>].
        - None: 8 x 16-byte core matrices, each a box: [.., rows / 8, cols / 16 bytes, 8, 16
          bytes] (the first two a loop of boxes); rows a multiple of 8, cols of 16 bytes.

        Bind the box axes to Bulk (not the loops of boxes) and make the loop the allocation domain
        (WGMMA-SMEM-LAYOUT proves the descriptor reads it).

            a_smem.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B128)"""
        if not isinstance(swizzle, MmaInputSmemSwizzle):
            raise wrong_enum("apply_mma_swizzle_for_tma_load", "swizzle", MmaInputSmemSwizzle, swizzle)
        span, es = swizzle.swizzle_bytes, self.dtype.bytes
        if len(self.loop) < 2:
            raise ScheduleError(f"apply_mma_swizzle_for_tma_load: {self.name} needs two loop axes (rows, cols)")
        got = self.loop[-1].static_extent
        if got is None or got * es % span:
            what = (f"core-matrix rows take a multiple of 16 bytes ({16 // es})" if not swizzle.value
                    else f"the {span}-byte swizzle takes {span // es} (one swizzle span) or a multiple")
            raise ScheduleError(f"apply_mma_swizzle_for_tma_load: {self.name}'s innermost axis holds "
                                f"{'a symbolic number of' if got is None else got} {self.dtype.name} elements"
                                f"{'' if got is None else f' ({got * es} bytes)'}; {what}")
        if not swizzle.value:
            rows = self.loop[-2].static_extent
            if rows is not None and rows % 8:
                raise ScheduleError(f"apply_mma_swizzle_for_tma_load: {self.name}'s rows axis holds {rows} "
                                    "elements; core matrices take a multiple of 8")
            return self.split(-2, 8).split(-1, 16 // es).reorder({-2: -3})  # [.., rows / 8, cols / 16B, 8, 16B]
        if got * es > span:
            self.split(-1, span // es).reorder({-2: -3})  # [.., spans, rows, one span]
        self.split(-2, 8).split(-2, 128 // span).split(-1, 16 // es)
        return self.swizzle(SwizzleType.XOR, -4, -2)

    def reorder(self, old2new) -> "TensorView":
        """Permute the loop axes; returns self. `old2new` is a dict {old position: new position}
        (axes not named keep their relative order) or a list with `old2new[i]` the new position
        of axis i. Moved axes must be outside the compute-at position.
        nvFuser: TensorView::reorder(old2new).

            tv.reorder({0: 1})   # [A, B, C] -> [B, A, C]"""
        n = len(self.loop)
        if isinstance(old2new, dict):
            pairs = list(old2new.items())
        elif isinstance(old2new, (list, tuple)):
            if len(old2new) != n:
                raise ScheduleError(f"reorder: a permutation of {self.name} needs {n} entries, got {len(old2new)}")
            pairs = list(enumerate(old2new))
        else:
            raise ScheduleError(f"reorder: old2new must be a dict or a list, got {type(old2new).__name__} {old2new!r}")
        mapping = {}
        for old, new in pairs:
            o = self._norm_axis("reorder", old, "old2new position")
            nw = self._norm_axis("reorder", new, "old2new position")
            if o in mapping or nw in mapping.values():
                raise ScheduleError(f"reorder: positions repeat in {old2new!r}")
            mapping[o] = nw
        for o, nw in mapping.items():
            if o != nw:
                self._check_outside_ca("reorder", min(o, nw))
        result: list[IterDomain | None] = [None] * n
        for o, nw in mapping.items():
            result[nw] = self.loop[o]
        rest = iter(self.loop[o] for o in range(n) if o not in mapping)
        self.loop = [r if r is not None else next(rest) for r in result]
        return self

    # -- memory and allocation --------------------------------------------------
    def set_memory_type(self, memory_type: MemoryType) -> "TensorView":
        """Place the tensor in `memory_type` (tp.MemoryType: Local registers, Shared, Tensor memory,
        Global); returns self. Fusion inputs and outputs stay Global. The verifier checks that the
        memory fits and that every access to it is legal for the target.
        nvFuser: TensorView::setMemoryType(memory_type)."""
        if not isinstance(memory_type, MemoryType):
            raise wrong_enum("set_memory_type", "memory_type", MemoryType, memory_type)
        if (self.is_fusion_input or self.is_fusion_output) and memory_type is not MemoryType.Global:
            raise ScheduleError(f"set_memory_type: {self.name} is a fusion input/output and must stay in global memory")
        self.memory_type = memory_type
        self.memory_origin = user_location()
        return self

    @property
    def memory(self) -> MemoryType:
        """The memory type; assigning to it calls set_memory_type."""
        return self.memory_type

    @memory.setter
    def memory(self, memory_type: MemoryType) -> None:
        self.set_memory_type(memory_type)

    def set_allocation_domain(self, ids: Sequence[IterDomain], contiguity=True) -> "TensorView":
        """Allocate the tensor along `ids` (IterDomains of this tensor, outermost first) instead of
        its default domain; returns self. `contiguity`: a bool for all axes, or one True / False /
        None (broadcast) per ID. The allocation decides the memory layout that the verifier's
        capacity, bank and TMA rules check. nvFuser: TensorView::setAllocationDomain(ids, contiguity)."""
        ids = _id_list("set_allocation_domain", ids)
        known = {i.uid for i in self.all_ids()}
        for i in ids:
            if not isinstance(i, IterDomain) or i.uid not in known:
                raise ScheduleError(f"set_allocation_domain: {i!r} is not an IterDomain of {self.name}")
        if len({i.uid for i in ids}) != len(ids):
            raise ScheduleError("set_allocation_domain: an IterDomain appears twice")
        self.allocation = ids
        self.contiguity = _normalize_contiguity(contiguity, ids, "set_allocation_domain")
        self.allocation_origin = user_location()
        return self

    def set_loop_domain(self, ids: Sequence[IterDomain]) -> "TensorView":
        """Make `ids` the loop domain, e.g. to go back to the loop IDs after scheduling an
        allocation domain. Every logical element must be reached exactly once: the IDs
        must be a complete, non-overlapping cut of this tensor's transform graph."""
        ids = _id_list("set_loop_domain", ids)
        known = {i.uid for i in self.all_ids()}
        for i in ids:
            if not isinstance(i, IterDomain) or i.uid not in known:
                raise ScheduleError(f"set_loop_domain: {i!r} is not an IterDomain of {self.name}")
        if len({i.uid for i in ids}) != len(ids):
            raise ScheduleError("set_loop_domain: an IterDomain appears twice")
        if self.compute_at:
            raise ScheduleError(f"set_loop_domain: {self.name} is inlined at {self.compute_at}; set the loop domain first")
        p = self.inlined_producer()
        if p is not None and [i.uid for i in ids[:p.compute_at]] != [i.uid for i in self.loop[:p.compute_at]]:
            raise ScheduleError(f"set_loop_domain: {self.name}'s producer {p.name} is inlined into its first "
                                f"{p.compute_at} loop axes, which the new loop domain changes; set it before inlining "
                                f"{p.name}")
        _check_cut(self, ids)
        self.loop = ids
        return self

    def set_tmem_dim_sep_pos(self, pos: int) -> "TensorView":
        """For tensor memory: allocation axes before `pos` (negative counts from the end) are lanes,
        those from `pos` on are 32-bit columns; returns self. TMEM-LANES and TMEM-COLUMNS check
        the 128 lanes and 512 columns. nvFuser: TensorView::setTMemDimSepPos(pos)."""
        if as_index(pos) is None:
            raise ScheduleError(f"set_tmem_dim_sep_pos: pos must be an int, got {type(pos).__name__} {pos!r}")
        if self.memory_type is not MemoryType.Tensor:
            raise ScheduleError(
                f"set_tmem_dim_sep_pos: the dimension separator is only for tensor memory; {self.name} is in {self.memory_type} memory"
            )
        n = len(self.get_allocation_domain())
        pos = as_index(pos)
        p = pos + n + 1 if pos < 0 else pos
        if not 0 <= p <= n:
            raise ScheduleError(f"set_tmem_dim_sep_pos: position {pos} is out of range for {n} allocation axes")
        self.tmem_dim_sep = p
        return self

    # -- reductions -----------------------------------------------------------------
    def multicast(self, on=ParallelType.BIDx) -> "TensorView":
        """Load this TMA-loaded shared tensor once per thread-block cluster and multicast it to the
        cluster's blocks along `on` (a block axis; fusion.cluster_dims sets the cluster): the
        block whose index along `on` is first in its cluster issues the load for all of them,
        which halves the operand's L2 reads with clusters of 2. Needs a warp-specialized circular
        buffer (tp.WarpSpecialized), whose empty mbarriers then count every block's consumers.
        CLUSTER-MULTICAST proves each receiver would have loaded the same box. Returns self.

            fusion.cluster_dims = (2, 1, 1); sb.multicast(tp.ParallelType.BIDx)"""
        self.multicast_on = checked_multicast(self, on)
        return self

    # -- circular buffering -----------------------------------------------------------
    def circular_buffer(self, number_of_stages: int | None = None, prefetch_distance: int = -1, type=None, *,
                        stages: int | None = None, prefetch: int | None = None) -> "TensorView":
        """Circular-buffer this tensor over its loop: the loop axis just left of its compute-at
        position (the K loop) gets `number_of_stages` tiles, and the copy of iteration
        i + prefetch is issued while iteration i reads its tile, so `prefetch` copies are in
        flight (`prefetch_distance` -1, the default, means stages - 1: a negative one counts from
        the stages). A shared tensor filled by cp.async is pipelined over a serial loop; `type`
        is tp.Pipelined() (the default; a __syncthreads guards a stage before it is refilled). A
        register tensor filled by a copy or ldmatrix (a matmul's fragments over the k-slice
        loop) needs no wait: give it an unrolled loop, since a serial one indexes the stages at
        run time and puts them in local memory. `stages=` and `prefetch=` are aliases. Returns
        self. The verifier checks the numbers (PIPELINE-STAGES: at least two stages,
        0 <= prefetch < stages) and proves the pipeline (CPASYNC-WAIT, PIPELINE-RAW,
        PIPELINE-WAR); shared memory holds the stages (SMEM-CAPACITY). nvFuser:
        TensorView::circularBuffer(number_of_stages, prefetch_distance, type).

            t1.inline_at(2); t1.circular_buffer(3)   # 3 tiles, 2 copies ahead"""
        if stages is not None:
            if number_of_stages is not None:
                raise ScheduleError("circular_buffer: give number_of_stages or stages=, not both")
            number_of_stages = stages
        if number_of_stages is None:
            raise ScheduleError("circular_buffer: number_of_stages is missing (the number of tiles, e.g. 2)")
        if prefetch is not None:
            if prefetch_distance != -1:
                raise ScheduleError("circular_buffer: give prefetch_distance or prefetch=, not both")
            prefetch_distance = prefetch
        self.circular = make_circular_buffer(number_of_stages, prefetch_distance, type)
        return self

    def new_tensor(self, logical: list[IterDomain], dtype: DataType) -> "TensorView":
        """A new tensor of this one's class in its fusion: how an op makes its output from an input."""
        return type(self)(self.fusion, logical, dtype)

    # -- helpers ----------------------------------------------------------------------
    def _norm_axis(self, op: str, axis, arg: str = "axis") -> int:
        n = len(self.loop)
        index = as_index(axis)
        if index is None:
            raise ScheduleError(f"{op}: {arg} must be an int, got {type(axis).__name__} {axis!r}")
        a = index + n if index < 0 else index
        if not 0 <= a < n:
            raise ScheduleError(f"{op}: {arg} {index} is out of range for {self.name} with {n} loop axes")
        return a

    def _check_outside_ca(self, op: str, axis: int) -> None:
        """Axes left of the compute-at position, or of where a producer is inlined into this tensor
        (nvFuser's max producer position), are fixed: nvFuser's split, merge, reorder and swizzle
        refuse them ("Cannot split axis within max producer position")."""
        if axis < self.compute_at:
            raise ScheduleError(
                f"{op}: axis {axis} of {self.name} is inside its compute-at position {self.compute_at}; transform before inlining"
            )
        p = self.inlined_producer()
        if p is not None and axis < p.compute_at:
            raise ScheduleError(
                f"{op}: axis {axis} of {self.name} is inside the loops its producer {p.name} is inlined in (position "
                f"{p.compute_at}); transform {self.name} before inlining {p.name}")

    def inlined_producer(self):
        """The producer inlined deepest into this tensor (nvFuser's max producer position is its
        compute-at position), or None where none is inlined."""
        inlined = [p for p in self.fusion.producers(self) if not p.is_fusion_input and p.compute_at > 0]
        return max(inlined, key=lambda p: p.compute_at) if inlined else None

    def _apply(self, t: Transform, pos: int, consumed: Iterable[int]) -> None:
        self.history.append(t)
        consumed = sorted(set(consumed), reverse=True)
        for c in consumed:
            del self.loop[c]
        for k, o in enumerate(t.outputs):
            self.loop.insert(pos + k, o)


def loop_path(tv: "TensorView") -> list:
    """The transforms between the logical and the loop domain (not an allocation branch)."""
    needed = {i.uid for i in tv.loop}
    out = []
    for t in reversed(tv.history):
        if any(o.uid in needed for o in t.outputs):
            out.append(t)
            needed.update(x.uid for x in t.inputs)
    return out[::-1]


def fixed_by(tv: "TensorView", ids: list[IterDomain]) -> set[int]:
    """The uids of tv's IDs whose index the indices of `ids` fix: them, and backward through
    tv's transforms the inputs of every transform whose outputs are all fixed."""
    known = {i.uid for i in ids}
    for t in reversed(tv.history):
        if all(o.uid in known for o in t.outputs):
            known.update(x.uid for x in t.inputs)
    return known


def _check_cut(tv: "TensorView", ids: list[IterDomain]) -> None:
    """ids index every logical ID (backward through the history) and no two of them
    derive from one another."""
    known = fixed_by(tv, ids)
    missing = [i.label() for i in tv.root if i.uid not in known]
    if missing:
        raise ScheduleError(f"set_loop_domain: the IDs do not cover logical {', '.join(missing)} of {tv.name}")
    ancestors: dict[int, set[int]] = {i.uid: set() for i in tv.root}
    for t in tv.history:
        up = set().union(*(ancestors.get(x.uid, set()) | {x.uid} for x in t.inputs))
        for o in t.outputs:
            ancestors[o.uid] = up
    for i in ids:
        clash = [j.label() for j in ids if j.uid in ancestors.get(i.uid, set())]
        if clash:
            raise ScheduleError(f"set_loop_domain: {i.label()} derives from {', '.join(clash)}; "
                                f"a loop domain cannot hold both")


def _check_same_kind(op: str, tv: "TensorView", a: int, b: int) -> None:
    """A reduction axis is merged or swizzled only with another reduction axis (as in nvFuser):
    an index mixing both kinds would be neither an output element nor a term of its sum."""
    x, y = tv.loop[a], tv.loop[b]
    if x.is_reduction != y.is_reduction:
        r, other = (a, b) if x.is_reduction else (b, a)
        raise ScheduleError(
            f"{op}: axis {r} of {tv.name} ({tv.loop[r].label()}) is a reduction axis and axis {other} "
            f"({tv.loop[other].label()}) is not; reduction axes {op} only with reduction axes")


def _id_list(op: str, ids) -> list[IterDomain]:
    if isinstance(ids, IterDomain) or not isinstance(ids, (list, tuple)):
        raise ScheduleError(f"{op}: ids must be a list of IterDomains, got {type(ids).__name__} {ids!r}")
    return list(ids)


def _normalize_contiguity(contiguity, ids: Sequence[IterDomain], op: str) -> list[bool | None]:
    if contiguity is None or isinstance(contiguity, bool):
        c = True if contiguity is None else contiguity
        return [None if i.is_broadcast or i.is_reduction else c for i in ids]
    if not isinstance(contiguity, (list, tuple)):
        raise ScheduleError(f"{op}: contiguity must be True, False or a list of them (None for broadcast), "
                            f"got {type(contiguity).__name__} {contiguity!r}")
    contiguity = list(contiguity)
    if len(contiguity) != len(ids):
        raise ScheduleError(f"{op}: contiguity has {len(contiguity)} entries for {len(ids)} axes")
    for c in contiguity:
        if c is not None and not isinstance(c, bool):
            raise ScheduleError(f"{op}: contiguity entries must be True, False or None, got {c!r}")
    return contiguity


def loop_position(tv: TensorView, ids: Iterable[IterDomain]) -> dict[int, int]:
    """uid -> loop position for the given IDs that are loop IDs."""
    pos = {i.uid: k for k, i in enumerate(tv.loop)}
    return {i.uid: pos[i.uid] for i in ids if i.uid in pos}


def apply_replayed(tv: TensorView, t: Transform) -> None:
    """Record a transform built by propagation (it may act on parallelized IDs)."""
    positions = [tv.loop.index(i) for i in t.inputs]
    if isinstance(t, Swizzle):
        tv.history.append(t)
        tv.loop[positions[0]], tv.loop[positions[1]] = t.x_out, t.y_out
    else:
        tv._apply(t, min(positions), positions)


__all__ = ["TensorView", "Expr"]


def check_tensor(op: str, tv, arg: str = "tv") -> TensorView:
    """tv, checked at the door of `op`: a tensor of the fusion being built."""
    if not isinstance(tv, TensorBase):
        scalar = (" (of the ops, only the binary ones and tp.where take a number operand: tp.add, tp.mul, ...)"
                  if isinstance(tv, (int, float)) else "")
        raise ScheduleError(f"{op}: expected a TensorView for {arg}, got {type(tv).__name__} {tv!r:.60}{scalar}")
    if tv.fusion is not current_fusion():
        raise ScheduleError(f"{op}: {tv.name} belongs to another fusion")
    return tv
