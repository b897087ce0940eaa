"""Kernel IR -> CUDA C++ source: EMIT maps every node type of codegen/ir.py to the function
that prints it (TMA, ldmatrix and tensor memory in tma.py, ldsm.py, tmem.py here); index math
is printed by cuda_expr.py. mma.py prints mma.sync and its operand conversions over named
registers; mma_probe.py builds the tensor-core layout probe kernel from hw/mma.py's maps.

Values are stored in the tensor's dtype and computed in float (double for float64,
the integer type for integers: DataType.compute). A copy between tensors of one dtype moves
the bits, so copies are exact; a cast converts with one rounding (CASTS; the C++ of each dtype, op and
cast is in scalar_types.py, which reduction.py shares). Half types come from cuda_fp16.h / cuda_bf16.h when the CUDA
headers are found, else from a small prelude of PTX conversions.
"""

from __future__ import annotations

import math
import re
from typing import Callable

from ...model.errors import InternalError
from ...model.expr import Expr, add, const, substitute, var
from ...hw.threads import TURN_BARRIER
from ...model.scalar_value import ScalarValue
from ...model.types import THREAD_TYPES, ARITHMETIC, COPIES, DataType, MemoryType, OpKind
from ...model.welford import WELFORD_OPS
from .cuda_expr import INDEX_TYPES, to_cuda, to_signed_cuda
from .scalar_types import (CAST_HELPERS, CASTS, CTYPES, HALF_TYPES, OPS, extent_value, operand_types, scalar_literal,
                           scalar_value_cuda)
from . import global_load as emit_global_load
from . import cp_async as emit_cp_async, ldsm as emit_ldsm, mma as emit_mma, reduction as emit_reduction, tma as emit_tma, tmem as emit_tmem
from ..ir import (BLOCK_DIMS, ELEMENT_VAR, GRID_DIMS, BlockReduce, CachedLoad, SiblingStep, GridReduce, GroupedGridReduce, BulkStoreWait, Compute, Cond, CpAsyncCommit, CpAsyncCopy, CpAsyncWait, IndexNames, KernelIR, Loop,
                 LoopKind, MatrixCopy, NamedSync, Operand, ParamKind, Prefetched, Prologue, ReduceInit, Sync, TmaCopy, TmaWait,
                 TmemAccess, TmemAlloc, TmemDealloc, TmemFencedSync, MmaIssue, WgmmaCommit, WgmmaFence, WgmmaWait, WarpRoles, WholeTile,
                 Tcgen05Commit, Tcgen05Wait,
                 StageDrain, StageEmptyWait, StageRelease, TurnPass, TurnWait, Rotated)


NAN_MAX_MIN = """\
template <typename T> __device__ __forceinline__ T tp_max(T a, T b) { return (a != a || a > b) ? a : b; }  // NaN wins
template <typename T> __device__ __forceinline__ T tp_min(T a, T b) { return (a != a || a < b) ? a : b; }
// float: one instruction (FMNMX.NAN) where the template's compare-and-select takes three
__device__ __forceinline__ float tp_max(float a, float b) { float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
__device__ __forceinline__ float tp_min(float a, float b) { float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }"""
VECTOR_WORDS = {2: "unsigned short", 4: "unsigned int", 8: "uint2", 16: "uint4"}
SMEM_ADDRESS = """\
__device__ __forceinline__ unsigned tp_smem(const void* p) {  // a shared-space address, as PTX takes it
  return static_cast<unsigned>(__cvta_generic_to_shared(p)); }"""

HALF_PRELUDE = """\
// cuda_fp16.h / cuda_bf16.h were not found: storage types with PTX conversions
struct __align__(2) __half { unsigned short x; };
struct __align__(2) __nv_bfloat16 { unsigned short x; };
__device__ __forceinline__ float __half2float(__half h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x)); return f; }
__device__ __forceinline__ __half __float2half_rn(float f) {
  __half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h; }
__device__ __forceinline__ float __bfloat162float(__nv_bfloat16 b) {
  return __uint_as_float(((unsigned int)b.x) << 16); }
__device__ __forceinline__ __nv_bfloat16 __float2bfloat16_rn(float f) {
  __nv_bfloat16 b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.x) : "f"(f)); return b; }
__device__ __forceinline__ __half __double2half(double d) {
  __half h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.x) : "d"(d)); return h; }
__device__ __forceinline__ __nv_bfloat16 __double2bfloat16(double d) {
  __nv_bfloat16 b; asm("cvt.rn.bf16.f64 %0, %1;" : "=h"(b.x) : "d"(d)); return b; }
__device__ __forceinline__ __nv_bfloat16 __ll2bfloat16_rn(long long i) {
  __nv_bfloat16 b; asm("cvt.rn.bf16.s64 %0, %1;" : "=h"(b.x) : "l"(i)); return b; }
"""


def uses_half_types(ir: KernelIR) -> bool:
    dtypes = {g.dtype.name for g in ir.globals} | {b.dtype.name for b in ir.buffers}
    return bool(dtypes & set(HALF_TYPES))


def emit(ir: KernelIR, *, cuda_headers: bool) -> str:
    """The kernel's C++ source; cuda_headers: include cuda_fp16.h / cuda_bf16.h (found on
    this machine) instead of the prelude. A fusion input the user named (make_tensor(name=))
    is the kernel parameter of that name: the source is printed once with T<n> to see which
    words the kernel uses, then with the names (pointer_names)."""
    source = _source(ir, cuda_headers, {})
    named = {g.name: g.user_name for g in ir.globals if g.user_name}
    return _source(ir, cuda_headers, pointer_names(named, source)) if named else source


# C++ keywords and the macros a kernel may see: no parameter takes their names
CPP_RESERVED = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t class compl
    const const_cast constexpr continue decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
    operator or or_eq private protected public register reinterpret_cast restrict return short signed sizeof static
    static_assert static_cast struct switch template this thread_local throw true try typedef typeid typename
    union unsigned using virtual void volatile wchar_t while xor xor_eq NULL INFINITY NAN assert""".split())
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*')
_WORD = re.compile(r"(?<![.\w])[A-Za-z_]\w*")  # not a member (threadIdx.x leaves x free)


def pointer_names(named: dict[str, str], source: str) -> dict[str, str]:
    """The C++ parameter name of each named global tensor (T<n> -> the user's name): the name,
    with underscores appended while it is a C++ keyword or a word the kernel's `source`
    (printed with T<n>, strings and comments aside) already uses, so it shadows nothing."""
    taken = set(_WORD.findall(_STRING_OR_COMMENT.sub(" ", source))) | CPP_RESERVED
    out = {}
    for tensor, name in named.items():
        while name in taken:
            name += "_"
        taken.add(name)
        out[tensor] = name
    return out


def _source(ir: KernelIR, cuda_headers: bool, pointers: dict[str, str]) -> str:
    e = _Emitter(ir, pointers)
    body = e.nodes(ir.body, 1)
    lines = ["// generated by tileproof from a verified schedule", "//"]
    lines += [f"//   {h}" for h in ir.header]
    if uses_half_types(ir):
        lines += ["#include <cuda_fp16.h>", "#include <cuda_bf16.h>"] if cuda_headers else HALF_PRELUDE.splitlines()
    if any(helper in OPS[CTYPES[c.out.dtype.name].compute].get(c.name, "") for helper in ("tp_max", "tp_min")
           for c in _nodes_of(ir.body, (Compute,)) if c.kind in ARITHMETIC) or emit_reduction.uses_max(ir):
        lines += NAN_MAX_MIN.splitlines()
    for name, helper in CAST_HELPERS.items():
        if any(f"{name}(" in line for line in body):
            lines += helper.splitlines()
    copies = _nodes_of(ir.body, (TmaCopy, MatrixCopy, CpAsyncCopy))
    issues = _nodes_of(ir.body, (MmaIssue,))
    wgmma, tcgen05 = emit_mma.uses_wgmma(issues), emit_mma.uses_tcgen05(issues)
    if copies or wgmma or tcgen05:  # wgmma's and tcgen05.mma's descriptors hold shared addresses too
        lines += SMEM_ADDRESS.splitlines()
    tma = emit_tma.prelude(ir, [c for c in copies if isinstance(c, TmaCopy)])
    lines += tma
    if not tma and any("tp_fence_async_smem();" in line for line in body):  # wgmma on threads' tiles
        lines += emit_tma.FENCE_ASYNC.splitlines()
    lines += emit_cp_async.prelude([c for c in copies if isinstance(c, CpAsyncCopy)])
    lines += emit_global_load.prelude(_nodes_of(ir.body, (CachedLoad,)))
    lines += emit_reduction.prelude(ir)
    if wgmma:
        lines += emit_mma.WGMMA_PRELUDE.splitlines()
    if tcgen05:
        lines += emit_mma.TCGEN05_PRELUDE.splitlines()
    lines.append("")
    lines.append(f'extern "C" __global__ void{e.launch_bounds()} {ir.name}(')
    lines.append(",\n".join(f"    {p}" for p in e.params()) + ") {")
    lines += e.buffers()
    lines += [f"  const unsigned {reversed_name(b)} = {b.replace('blockIdx', 'gridDim')} - 1u - {b};  "
              f"// Fusion.reversed_blocks: the highest index's work starts first" for b in ir.reversed_blocks]
    if ir.dependent_launch:  # before any memory access: what runs after is what runs without
        lines += DEPENDENT_LAUNCH.splitlines()
    lines += emit_tma.barrier_setup(ir.mbarriers, math.prod(ir.cluster))
    lines += body
    lines.append("}")
    _check_reversed(ir, body)
    return "\n".join(lines) + "\n"


def reversed_name(block_index: str) -> str:
    """The C++ name of a reversed block index (Fusion.reversed_blocks): blockIdx.x -> tp_block_x."""
    return "tp_block_" + block_index.split(".")[-1]


def _check_reversed(ir: KernelIR, body: list[str]) -> None:
    """Every index the body computes reads a reversed block index by its name: a bare
    blockIdx.x left in code (not a comment) would mix the hardware's numbering with the proof's."""
    for line in body:
        code = _STRING_OR_COMMENT.sub(" ", line)
        for b in ir.reversed_blocks:
            if re.search(re.escape(b) + r"\b", code):
                raise InternalError(f"{ir.name}: {b} is reversed (Fusion.reversed_blocks) but the kernel reads it "
                                    f"bare: {line.strip()}", rule="LOWERING-SUPPORTED")


# Fusion.dependent_launch: wait for the kernels before on the stream (their memory visible), then
# let the next one launch (PTX ISA griddepcontrol, sm_90)
DEPENDENT_LAUNCH = """\
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");"""


def _nodes_of(nodes: list, kinds: tuple) -> list:
    out = []
    for n in nodes:
        if hasattr(n, "body"):  # loops, and a circular buffer's prologue and prefetched copies
            out += _nodes_of(n.body, kinds)
        elif isinstance(n, kinds):
            out.append(n)
    return out


class _Emitter:
    def __init__(self, ir: KernelIR, pointers: dict[str, str]):
        self.ir = ir
        self.pointers = pointers  # a named global tensor's T<n> -> its parameter name (pointer_names)
        self.zero: dict[str, Expr] = {}  # the indices of the extent-1 loops around the node: 0
        self.rotation = "guarded"  # a rotated loop's next iteration: guarded, or in a peeled loop unguarded / dropped
        # a launch dimension read from the hardware (lower/launch_dims.py) is a 32-bit builtin: in a
        # 64-bit kernel it is widened, so that gridDim.x * blockDim.x cannot wrap
        widen = {d: f"({INDEX_TYPES[64]}){d}" for d in BLOCK_DIMS + GRID_DIMS if d in ir.names} \
            if ir.index_bits == 64 else {}
        self.names = {**ir.names, **widen, **{b: reversed_name(b) for b in ir.reversed_blocks}}

    def x(self, expr) -> str:
        if self.zero:
            expr = substitute(expr, self.zero)
        return to_cuda(expr, self.names, cast=False, bits=self.ir.index_bits)

    def launch_bounds(self) -> str:
        # one block per SM where setmaxnreg moves registers: ptxas then sizes the pool it shares out
        once = ", 1" if any(isinstance(r, WarpRoles) and r.spec.num_registers for r in self.ir.body) else ""
        cluster = f" __cluster_dims__({', '.join(map(str, self.ir.cluster))})" if math.prod(self.ir.cluster) > 1 else ""
        return cluster + f" __launch_bounds__({self.ir.max_threads}{once})"

    def params(self) -> list[str]:
        out = []
        inputs = {g.name for g in self.ir.globals + self.ir.views if g.is_input}  # a view reads its input's memory
        dtypes = {g.name: g.dtype for g in self.ir.globals + self.ir.views}
        for p in self.ir.params:
            if p.kind is ParamKind.TENSOR:
                const = "const " if p.tensor in inputs else ""
                out.append(f"{const}{CTYPES[dtypes[p.tensor].name].storage}* __restrict__ {self.pointer(p.tensor)}")
            elif p.kind is ParamKind.TENSOR_MAP:
                out.append(f"const __grid_constant__ TmaDescriptor {p.name}")
            elif p.kind is ParamKind.WORKSPACE:  # a TMA-stored intermediate's elements in their storage type
                out.append(f"{CTYPES[p.dtype.name].storage if p.storage else CTYPES[p.dtype.name].compute}* {p.name}")
            elif p.kind is ParamKind.SEMAPHORES:
                out.append(f"unsigned* {p.name}")
            else:
                out.append(f"{p.ctype} {p.name}")
        return out

    def buffers(self) -> list[str]:
        lines = []
        if any(b.memory is MemoryType.Shared for b in self.ir.buffers):
            lines.append("  extern __shared__ __align__(1024) unsigned char smem[];")
        for b in self.ir.buffers:
            t = CTYPES[b.dtype.name].storage
            if b.memory is MemoryType.Shared:
                lines.append(f"  {t}* {b.tensor} = reinterpret_cast<{t}*>(smem + {self.x(b.smem_offset)});")
            else:
                t = emit_reduction.state_type(b.dtype, b.welford_count) if b.welford_count else t  # Welford states
                lines.append(f"  alignas(16) {t} {b.tensor}[{self.x(b.elements)}];")
        return lines

    def nodes(self, nodes: list, depth: int) -> list[str]:
        out = []
        for n in nodes:
            emit_node = EMIT.get(type(n))
            if emit_node is None:
                raise InternalError(f"no C++ for kernel IR node {type(n).__name__} (codegen/emit/__init__.py EMIT)")
            out += emit_node(self, n, depth)
        return out

    def loop(self, n: Loop, depth: int) -> list[str]:
        pad = "  " * depth
        if n.kind in (LoopKind.THREAD, LoopKind.BLOCK):
            return [f"{pad}// {n.var} over {self.x(n.extent)}: {n.label}"] + self.nodes(n.body, depth)
        if n.extent == const(1):  # its index is 0 wherever it is used: the statements' indices, and a
            # circular loop's (K one tile) prefetch predicate, stage and phase, which name it
            outer = self.zero
            self.zero = {**outer, **{v: const(0) for v, cpp in self.ir.names.items() if cpp == n.var}}
            try:
                return [f"{pad}{{  // {n.label} (extent 1)"] + self.nodes(n.body, depth + 1) + [f"{pad}}}"]
            finally:
                self.zero = outer
        head = [f"{pad}#pragma unroll"] if n.kind is LoopKind.UNROLL else []
        kind = INDEX_TYPES[self.ir.index_bits]
        if n.kind is LoopKind.SERIAL and any(isinstance(c, Rotated) and not c.first for c in n.body):
            return self._rotated_loop(n, depth)
        head.append(f"{pad}for ({kind} {n.var} = 0; {n.var} < {self.x(n.extent)}; ++{n.var}) {{  // {n.label}")
        return head + self.nodes(n.body, depth + 1) + [f"{pad}}}"]

    def _rotated_loop(self, n: Loop, depth: int) -> list[str]:
        """A rotated serial loop with its last iteration peeled: every other iteration has a next one,
        so its rotated statements run unguarded (straight code, as FlashAttention-3's mainloop), and
        the last runs the body without them. The same statements as the guarded nest the verifier
        proved: the guard i + 1 < extent is true exactly in the loop, false in the last iteration."""
        pad, kind, extent = "  " * depth, INDEX_TYPES[self.ir.index_bits], self.x(n.extent)
        outer, self.rotation = self.rotation, "unguarded"
        try:
            loop = ([f"{pad}for ({kind} {n.var} = 0; {n.var} + 1U < {extent}; ++{n.var}) {{  // {n.label}: "
                     f"every iteration but the last (it has a next one)"]
                    + self.nodes(n.body, depth + 1) + [f"{pad}}}"])
            self.rotation = "dropped"
            last = ([f"{pad}if (0U < {extent}) {{  // {n.label}: the last iteration (no next one: no rotated statements)",
                     f"{pad}  const {kind} {n.var} = {extent} - 1U;"] + self.nodes(n.body, depth + 1) + [f"{pad}}}"])
        finally:
            self.rotation = outer
        return loop + last

    def index_names(self, n: IndexNames, depth: int) -> list[str]:
        return [f"{'  ' * depth}const {INDEX_TYPES[self.ir.index_bits]} {name} = {self.x(value)};" for name, value in n.names]

    def rotated(self, n: Rotated, depth: int) -> list[str]:
        """A rotated loop's next iteration (execution/rotation.py): its statements as lowered, in a
        scope that declares the loop's counter again, as i + 1 (or 0 before the loop)."""
        pad, i = "  " * depth, self.x(var(n.index))
        at, which = ("0", "iteration 0's first statements, before the loop") if n.first else \
            (f"{i} + 1U", "the next iteration's first statements")
        kind = INDEX_TYPES[self.ir.index_bits]
        if not n.first and self.rotation == "dropped":
            return []
        if not n.first and self.rotation == "unguarded":  # a peeled loop's (_rotated_loop): there is a next one
            return ([f"{pad}{{  // {n.label}, rotated: {which}",
                     f"{pad}  const {kind} tp_rotated = {at};",
                     f"{pad}  {{",
                     f"{pad}    const {kind} {i} = tp_rotated;"]
                    + self.nodes(n.body, depth + 2) + [f"{pad}  }}", f"{pad}}}"])
        return ([f"{pad}{{  // {n.label}, rotated: {which}",
                 f"{pad}  const {kind} tp_rotated = {at};",
                 f"{pad}  if (tp_rotated < {self.x(n.extent)}) {{",
                 f"{pad}    const {kind} {i} = tp_rotated;"]
                + self.nodes(n.body, depth + 2) + [f"{pad}  }}", f"{pad}}}"])

    def whole_tile(self, n: WholeTile, depth: int) -> list[str]:
        pad = "  " * depth
        return ([f"{pad}if ({' && '.join(self.cond(c) for c in n.guard)}) {{  // {n.why}"]
                + self.nodes([n.whole], depth + 1) + [f"{pad}}} else {{"] + self.nodes([n.lowered], depth + 1) + [f"{pad}}}"])

    def sync(self, n: Sync, depth: int) -> list[str]:
        return self.fence(n, depth) + [f"{'  ' * depth}__syncthreads();  // {n.why}"]

    def turn_wait(self, n: TurnWait, depth: int) -> list[str]:
        """bar.sync on this warpgroup's turn barrier, but warpgroup `first` in iteration 0
        (execution/ping_pong.py); the barrier id is a register: every warp of a warpgroup takes
        the same path."""
        pad, i = "  " * depth, self.x(var(n.index))
        return [f"{pad}if ({n.axis} != {n.first}U || ({i}) != 0U) {{  // {n.why}",
                f'{pad}  asm volatile("bar.sync %0, {n.threads};" :: "r"({TURN_BARRIER}U + {n.axis}) : "memory");',
                f"{pad}}}"]

    def turn_pass(self, n: TurnPass, depth: int) -> list[str]:
        """bar.arrive on the next warpgroup's turn barrier, but warpgroup `last` in the loop's
        last iteration (execution/ping_pong.py)."""
        pad, i = "  " * depth, self.x(var(n.index))
        return [f"{pad}if ({n.axis} != {n.last}U || ({i}) + 1U != ({self.x(n.extent)})) {{  // {n.why}",
                f'{pad}  asm volatile("bar.arrive %0, {n.threads};" :: "r"({TURN_BARRIER}U + ({n.axis} + 1U) % '
                f'{n.groups}U) : "memory");',
                f"{pad}}}"]

    def named_sync(self, n: NamedSync, depth: int) -> list[str]:
        pad = "  " * depth
        return self.fence(n, depth) + [f'{pad}asm volatile("bar.sync {n.barrier}, {n.threads};" ::: "memory");  // {n.why}']

    @staticmethod
    def fence(n: Sync, depth: int) -> list[str]:
        """fence_async: shared-memory writes, then read by the async proxy (a TMA store)."""
        return [f"{'  ' * depth}tp_fence_async_smem();"] if n.fence_async else []

    def warp_roles(self, n: WarpRoles, depth: int) -> list[str]:
        """The producer warpgroup (the last index on the specialized axis, or its last 128 on TIDx)
        runs its loads and returns; the consumers run the rest, with named barriers among themselves."""
        pad = "  " * depth
        axis = n.spec.on.cuda_name
        if n.producer_indices > 1:
            role = f"{axis} >= {self.x(const(n.consumer_indices))}"
        else:
            role = f"{axis} == {self.x(add(self.ir.block[THREAD_TYPES.index(n.spec.on)], const(-1)))}"
        producer, consumer = n.body
        regs = n.spec.num_registers
        lines = [f"{pad}if ({role}) {{  // the producer warpgroup: the TMA loads"]
        if regs:
            lines.append(f'{pad}  asm volatile("setmaxnreg.dec.sync.aligned.u32 {regs[0]};");')
        if producer.elected:  # the issuing thread alone; the others leave at once
            lines.append(f"{pad}  if ({' && '.join(self.cond(c) for c in producer.elected)}) {{")
            lines += self.nodes(producer.body, depth + 2) + [f"{pad}  }}"]
        else:
            lines += self.nodes(producer.body, depth + 1)
        lines += [f"{pad}  return;", f"{pad}}}"]
        if regs:
            lines.append(f'{pad}asm volatile("setmaxnreg.inc.sync.aligned.u32 {regs[1]};");  // the consumers')
        return lines + self.nodes(consumer.body, depth)

    def empty_wait(self, n: StageEmptyWait, depth: int) -> list[str]:
        return ["  " * depth + line for line in emit_tma.empty_wait(n, self.x)]

    def release(self, n: StageRelease, depth: int) -> list[str]:
        return ["  " * depth + line for line in emit_tma.release(n, self.x, math.prod(self.ir.cluster))]

    def drain(self, n: StageDrain, depth: int) -> list[str]:
        return ["  " * depth + line for line in emit_tma.drain(n)]

    def store_wait(self, n: BulkStoreWait, depth: int) -> list[str]:
        return ["  " * depth + line for line in emit_tma.store_wait(n)]

    def tma_wait(self, n: TmaWait, depth: int) -> list[str]:
        return ["  " * depth + line for line in emit_tma.wait(n, self.x)]

    def tma_copy(self, n: TmaCopy, depth: int) -> list[str]:
        return ["  " * depth + line for line in [f"// {n.comment}", *emit_tma.copy(n, self.x, n.smem, self.pointer)]]

    def matrix_copy(self, n: MatrixCopy, depth: int) -> list[str]:
        # warp-uniform predicates only (LDSM-THREAD-ROWS proved whole warps), e.g. a block past M
        body = emit_ldsm.matrix_copy(n, self.x)
        conds = n.conds
        return self.guarded_block(n.comment, conds, body[1:-1], depth) if conds else \
            ["  " * depth + line for line in [f"// {n.comment}", *body]]

    # -- statements ---------------------------------------------------------------------
    def compute(self, s: Compute, depth: int) -> list[str]:
        pad = "  " * depth
        body = self.vector_body(s) if s.vector > 1 else [self.scalar(s)]
        lines = [f"{pad}// {s.comment}"]
        conds = s.conds
        if conds:
            lines.append(f"{pad}if ({' && '.join(self.cond(c) for c in conds)}) {{")
            lines += [f"{pad}  {b}" for b in body]
            lines.append(f"{pad}}}")
        else:
            lines += [f"{pad}{b}" for b in body] if len(body) == 1 else [f"{pad}{{"] + [f"{pad}  {b}" for b in body] + [f"{pad}}}"]
        return lines

    def guarded_block(self, comment: str, conds: list, body: list[str], depth: int, note: str = "") -> list[str]:
        """`body` in braces under its comment, inside `if (conds)` where there are any (`note`: a
        comment on that line)."""
        pad = "  " * depth
        head = f"if ({' && '.join(self.cond(c) for c in conds)}) {{{note}" if conds else "{"
        return [f"{pad}// {comment}", f"{pad}{head}"] + [f"{pad}  {b}" for b in body] + [f"{pad}}}"]

    def storage(self, dtype: DataType) -> str:
        """The C++ type that stores a dtype's elements."""
        return CTYPES[dtype.name].storage

    def cond(self, c: Cond) -> str:
        return f"{self.x(c.lhs)} {c.op} {self.x(c.rhs)}"

    def pointer(self, tensor: str) -> str:
        """The C++ name of a tensor: a named global's parameter name, else its T<n>."""
        return self.pointers.get(tensor, tensor)

    def ref(self, o: Operand) -> str:
        field = f".{o.field}" if o.field else ""  # a Welford state's field
        return f"{self.pointer(o.tensor)}[{self.x(o.offset)}]{field}"

    def scalar(self, s: Compute) -> str:
        return f"{self.ref(s.out)} = {self.value(s, [self.ref(o) for o in s.ins])};"

    def value(self, s: Compute, args: list[str]) -> str:
        """The stored value of s from its inputs' stored values (a zero-filled statement's: 0 past K)."""
        v = self._value(s, args)
        if s.zero_unless:
            zero = CTYPES[s.out.dtype.name].store.format(scalar_literal(0, CTYPES[s.out.dtype.name].compute))
            return f"(({' && '.join(self.cond(c) for c in s.zero_unless)}) ? {v} : {zero})"
        return v

    def _value(self, s: Compute, args: list[str]) -> str:
        out = CTYPES[s.out.dtype.name]
        if s.name == "rescale":  # an online max's rescale of an accumulator (codegen/lower/mma.py)
            return f"({args[0]} * exp2f({scalar_literal(s.rescale, out.compute)} * {args[1]}))"
        if s.iota is not None:  # start + step times the element's logical index, in the compute type
            index = f"(({out.compute})({self.x(s.iota.index)}))"
            return out.store.format(f"({scalar_literal(s.iota.start, out.compute)} + {index} * "
                                    f"{scalar_literal(s.iota.step, out.compute)})")
        if s.kind in COPIES and s.ins[0].dtype == s.out.dtype:
            return args[0]  # a copy moves the bits
        if s.kind is OpKind.CAST:
            source = CTYPES[s.ins[0].dtype.name]
            return CASTS[source.compute][s.out.dtype.name].format(source.load.format(args[0]))
        if s.kind in ARITHMETIC:
            dtypes = [o.dtype for o in s.ins]
            if s.scalar is not None:  # the value operand takes the dtype of the tensor beside it
                dtypes.insert(s.scalar.position, s.ins[-1].dtype)
            table, types = operand_types(s.kind, s.name, dtypes, s.out.dtype)
            loaded = [f"({t})({CTYPES[o.dtype.name].load.format(a)})"
                      for o, a, t in zip(s.ins, args, [t for k, t in enumerate(types)
                                                        if s.scalar is None or k != s.scalar.position])]
            if s.scalar is not None:
                loaded.insert(s.scalar.position, self.operand_value(s.scalar.value, types[s.scalar.position]))
            v = OPS[table][s.name].format(a=loaded[0], b=loaded[1 if len(loaded) > 1 else 0], c=loaded[-1])
            return out.store.format(v)
        loaded = [f"({out.compute})({CTYPES[o.dtype.name].load.format(a)})" for o, a in zip(s.ins, args)]
        if s.kind is OpKind.REDUCTION and s.rescale is not None:  # a rescaled sum: the accumulator at the new max first
            acc = f"({self.ref(s.out)} * exp2f({scalar_literal(s.rescale, out.compute)} * {loaded[1]}))"
            v = emit_reduction.combine(s, acc, loaded[0])
        elif s.kind is OpKind.REDUCTION and s.name in WELFORD_OPS:  # the state takes an element, or a partial state
            own = [CTYPES[o.dtype.name].load.format(a) for o, a in zip(s.ins, args)]  # a partial count stays an integer
            v = emit_reduction.welford_update(s, self.ref(s.out), own)
        elif s.kind is OpKind.REDUCTION:  # the accumulator (out, of the compute type) takes one more term
            term = loaded[0] if len(loaded) == 1 else f"({loaded[0]} * {loaded[1]})"  # fms: a product
            v = emit_reduction.combine(s, self.ref(s.out), term)
        else:
            v = loaded[0]
        return out.store.format(v)

    def operand_value(self, value, compute: str) -> str:
        """A value operand (model/fusion.py Scalar): a number, already in the compute type, or an
        extent, formed from the size parameters in signed 64-bit (model/ops.py bounded it) and
        converted once."""
        if isinstance(value, Expr):
            return extent_value(to_signed_cuda(value, self.ir.names), compute)
        if isinstance(value, ScalarValue):
            return scalar_value_cuda(value, lambda e: to_signed_cuda(e, self.ir.names), compute)
        return scalar_literal(value, compute)

    def vector_body(self, s: Compute, load: Callable[[str, str, int], list[str]] | None = None) -> list[str]:
        """One access of s.vector elements per operand, in words of at most 16 bytes (a
        per-element register operand: an unrolled loop over the elements instead). `load`
        (dst, src, bytes) -> lines reads the inputs (default: move)."""
        load = load or self.move
        if s.iota is not None or any(o.per_element for o in [s.out] + s.ins):  # an iota: a value per element
            return self.gather_body(s, load)
        copy = s.kind in COPIES and s.ins[0].dtype == s.out.dtype
        if copy:
            return load(f"&{self.ref(s.out)}", f"&{self.ref(s.ins[0])}", s.vector * s.out.dtype.bytes)
        lines = []
        for k, o in enumerate(s.ins):
            t = CTYPES[o.dtype.name].storage
            lines.append(f"alignas(16) {t} in{k}[{s.vector}];")
            lines += load(f"in{k}", f"&{self.ref(o)}", s.vector * o.dtype.bytes)
        lines.append(f"alignas(16) {CTYPES[s.out.dtype.name].storage} result[{s.vector}];")
        lines.append("#pragma unroll")
        args = [f"in{k}[v]" for k in range(len(s.ins))]
        lines.append(f"for (int v = 0; v < {s.vector}; ++v) result[v] = {self.value(s, args)};")
        lines += self.move(f"&{self.ref(s.out)}", "result", s.vector * s.out.dtype.bytes)
        return lines

    def gather_body(self, s: Compute, load: Callable[[str, str, int], list[str]] | None = None) -> list[str]:
        """A vector statement with per-element register operands: the others move whole
        vectors through local arrays (read by `load`, default move), the per-element ones are
        read or written in a loop over ELEMENT_VAR, which their offsets contain."""
        load = load or self.move
        n, v = s.vector, ELEMENT_VAR
        lines, args = [], []
        for k, o in enumerate(s.ins):
            if o.per_element:
                args.append(self.ref(o))
                continue
            lines.append(f"alignas(16) {CTYPES[o.dtype.name].storage} in{k}[{n}];")
            lines += load(f"in{k}", f"&{self.ref(o)}", n * o.dtype.bytes)
            args.append(f"in{k}[{v}]")
        value = self.value(s, args)
        if s.out.per_element:
            return lines + ["#pragma unroll", f"for (int {v} = 0; {v} < {n}; ++{v}) {self.ref(s.out)} = {value};"]
        lines.append(f"alignas(16) {CTYPES[s.out.dtype.name].storage} result[{n}];")
        lines += ["#pragma unroll", f"for (int {v} = 0; {v} < {n}; ++{v}) result[{v}] = {value};"]
        return lines + self.move(f"&{self.ref(s.out)}", "result", n * s.out.dtype.bytes)

    @staticmethod
    def move(dst: str, src: str, nbytes: int) -> list[str]:
        word = min(nbytes, 16)
        t = VECTOR_WORDS[word]
        if nbytes == word:
            return [f"*reinterpret_cast<{t}*>({dst}) = *reinterpret_cast<const {t}*>({src});"]
        return ["#pragma unroll",
                f"for (int w = 0; w < {nbytes // word}; ++w) "
                f"reinterpret_cast<{t}*>({dst})[w] = reinterpret_cast<const {t}*>({src})[w];"]



# node type -> its C++ lines: (emitter, node, depth) -> lines. Keyed by exact type (a TmemAccess is
# a Compute, a TmemAlloc a Sync, each printed its own way); tests/test_layering.py checks that every
# type of codegen/ir.py NODE_TYPES has an entry.
EMIT: dict[type, Callable[[_Emitter, object, int], list[str]]] = {
    Loop: _Emitter.loop,
    Compute: _Emitter.compute,
    Sync: _Emitter.sync,
    TmaCopy: _Emitter.tma_copy,
    TmaWait: _Emitter.tma_wait,
    MatrixCopy: _Emitter.matrix_copy,
    TmemAccess: emit_tmem.access_lines,
    TmemAlloc: emit_tmem.alloc_lines,
    TmemFencedSync: emit_tmem.fenced_sync_lines,
    TmemDealloc: emit_tmem.dealloc_lines,
    CpAsyncCopy: emit_cp_async.copy_lines,
    CachedLoad: emit_global_load.load_lines,
    ReduceInit: emit_reduction.init_lines,
    BlockReduce: emit_reduction.block_reduce_lines,
    SiblingStep: emit_reduction.sibling_step_lines,
    GridReduce: emit_reduction.grid_reduce_lines,
    GroupedGridReduce: emit_reduction.grouped_grid_reduce_lines,
    CpAsyncWait: emit_cp_async.wait_lines,
    CpAsyncCommit: emit_cp_async.commit_lines,
    Prologue: emit_cp_async.prologue_lines,
    Prefetched: emit_cp_async.prefetched_lines,
    MmaIssue: emit_mma.issue_lines,
    WgmmaFence: emit_mma.fence_lines,
    WgmmaWait: emit_mma.wait_lines,
    WgmmaCommit: emit_mma.commit_group_lines,
    Tcgen05Commit: emit_mma.commit_lines,
    Tcgen05Wait: emit_mma.commit_wait_lines,
    WarpRoles: _Emitter.warp_roles,
    StageEmptyWait: _Emitter.empty_wait,
    StageRelease: _Emitter.release,
    StageDrain: _Emitter.drain,
    BulkStoreWait: _Emitter.store_wait,
    NamedSync: _Emitter.named_sync,
    TurnWait: _Emitter.turn_wait,
    TurnPass: _Emitter.turn_pass,
    IndexNames: _Emitter.index_names,
    WholeTile: _Emitter.whole_tile,
    Rotated: _Emitter.rotated,
}

def dtype_storage(dtype: DataType) -> str:
    return CTYPES[dtype.name].storage
