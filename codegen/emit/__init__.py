"""Kernel IR -> CUDA C++ source: EMIT maps every node type of codegen/ir.py to the function
that prints it (TMA, ldmatrix and tensor memory in tma.py, ldsm.py, tmem.py here); index math
is printed by cuda_expr.py. mma.py prints mma.sync and its operand conversions over named
registers; mma_probe.py builds the tensor-core layout probe kernel from model/mma.py's maps.

Values are stored in the tensor's dtype and computed in float (double for float64,
the integer type for integers: DataType.compute). A copy between tensors of one dtype moves
the bits, so copies are exact; a cast converts with one rounding (CASTS). Half types come from cuda_fp16.h / cuda_bf16.h when the CUDA
headers are found, else from a small prelude of PTX conversions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ...model.errors import InternalError
from ...model.expr import add, const
from ...model.types import THREAD_TYPES, ARITHMETIC, COPIES, DataType, MemoryType, OpKind
from .cuda_expr import INDEX_TYPES, to_cuda
from .invariants import Invariants
from .whole_tile import whole_tile
from . import cp_async as emit_cp_async, ldsm as emit_ldsm, mma as emit_mma, reduction as emit_reduction, tma as emit_tma, tmem as emit_tmem
from ..ir import (ELEMENT_VAR, BlockReduce, BulkStoreWait, Compute, Cond, CpAsyncCommit, CpAsyncCopy, CpAsyncWait, KernelIR, Loop, LoopKind, MatrixCopy,
                 Operand, ParamKind, Prefetched, Prologue, ReduceInit, Sync, TmaCopy, TmaWait, TmemAccess, TmemAlloc,
                 TmemDealloc, TmemFencedSync, MmaIssue, WgmmaFence, WgmmaWait, WarpRoles, StageDrain, StageEmptyWait, StageRelease)


@dataclass(frozen=True)
class CType:
    storage: str
    compute: str
    load: str  # storage -> compute, "{}" is the value
    store: str  # compute -> storage


CTYPES = {
    "float32": CType("float", "float", "{}", "{}"),
    "float64": CType("double", "double", "{}", "{}"),
    "float16": CType("__half", "float", "__half2float({})", "__float2half_rn({})"),
    "bfloat16": CType("__nv_bfloat16", "float", "__bfloat162float({})", "__float2bfloat16_rn({})"),
    "int8": CType("signed char", "int", "(int)({})", "(signed char)({})"),
    "int32": CType("int", "int", "{}", "{}"),
    "int64": CType("long long", "long long", "{}", "{}"),
}
HALF_TYPES = ("float16", "bfloat16")

_INT = {"neg": "(-{a})", "abs": "({a} < 0 ? -{a} : {a})", "relu": "({a} < 0 ? 0 : {a})",
        "maximum": "({a} > {b} ? {a} : {b})", "minimum": "({a} < {b} ? {a} : {b})"}
_ARITH = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})"}
# maximum / minimum / relu propagate NaN, as the reference (numpy) and PyTorch do; CUDA's
# fmax/fmin return the other operand (measured on H100: relu(sqrt(-1)) was 0, not NaN)
OPS = {  # compute type -> op name -> C++ ({a}, {b}: the operands in the compute type)
    "float": {**_ARITH, "maximum": "tp_max({a}, {b})", "minimum": "tp_min({a}, {b})", "neg": "(-{a})",
              "abs": "fabsf({a})", "exp": "expf({a})", "sqrt": "sqrtf({a})", "relu": "tp_max({a}, 0.0f)"},
    "double": {**_ARITH, "maximum": "tp_max({a}, {b})", "minimum": "tp_min({a}, {b})", "neg": "(-{a})",
               "abs": "fabs({a})", "exp": "exp({a})", "sqrt": "sqrt({a})", "relu": "tp_max({a}, 0.0)"},
    "int": {**_ARITH, **_INT},
    "long long": {**_ARITH, **_INT},
}
# A cast: (the source's compute type, the destination dtype) -> C++ turning a value of the compute
# type (the source loaded exactly: half types widen to float, int8 to int) into the destination's
# storage, rounding once. Float -> float: nearest even. Float -> integer: toward zero, saturated
# (PTX cvt.rzi clamps to the destination's range), NaN -> 0 for every pair (cvt.rzi itself gives
# 0 only where neither side is 64-bit, MININT otherwise; CUDA's __float2int_rz and kin leave
# out-of-range values undefined, hence CAST_HELPERS). Integer -> integer: the low bits.
# int -> float16 goes through float: exact below 2^24, and from 65520 up both are inf; int ->
# bfloat16 through double (exact); long long -> bfloat16 by cvt.rn.bf16.s64, since through float
# or double it would round twice. codegen/runtime/reference.py does the same in float64.
CASTS = {
    "float": {"float32": "{}", "float64": "(double)({})", "float16": "__float2half_rn({})",
              "bfloat16": "__float2bfloat16_rn({})", "int8": "tp_sat_s8(tp_f2i({}))",
              "int32": "tp_f2i({})", "int64": "tp_f2ll({})"},
    "double": {"float32": "__double2float_rn({})", "float64": "{}", "float16": "__double2half({})",
               "bfloat16": "__double2bfloat16({})", "int8": "tp_sat_s8(tp_d2i({}))",
               "int32": "tp_d2i({})", "int64": "tp_d2ll({})"},
    "int": {"float32": "__int2float_rn({})", "float64": "__int2double_rn({})",
            "float16": "__float2half_rn(__int2float_rn({}))", "bfloat16": "__double2bfloat16(__int2double_rn({}))",
            "int8": "(signed char)({})", "int32": "{}", "int64": "(long long)({})"},
    "long long": {"float32": "__ll2float_rn({})", "float64": "__ll2double_rn({})",
                  "float16": "__float2half_rn(__ll2float_rn({}))", "bfloat16": "__ll2bfloat16_rn({})",
                  "int8": "(signed char)({})", "int32": "(int)({})", "int64": "{}"},
}
# the float -> integer conversions CASTS names, each emitted where the kernel uses it
CAST_HELPERS = {
    "tp_f2i": """\
__device__ __forceinline__ int tp_f2i(float x) {  // toward zero, saturated, NaN -> 0
  int r; asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(r) : "f"(x)); return r; }""",
    "tp_f2ll": """\
__device__ __forceinline__ long long tp_f2ll(float x) {  // toward zero, saturated, NaN -> 0
  long long r; asm("cvt.rzi.s64.f32 %0, %1;" : "=l"(r) : "f"(x)); return x != x ? 0 : r; }""",
    "tp_d2i": """\
__device__ __forceinline__ int tp_d2i(double x) {  // toward zero, saturated, NaN -> 0
  int r; asm("cvt.rzi.s32.f64 %0, %1;" : "=r"(r) : "d"(x)); return x != x ? 0 : r; }""",
    "tp_d2ll": """\
__device__ __forceinline__ long long tp_d2ll(double x) {  // toward zero, saturated, NaN -> 0
  long long r; asm("cvt.rzi.s64.f64 %0, %1;" : "=l"(r) : "d"(x)); return x != x ? 0 : r; }""",
    "tp_sat_s8": """\
__device__ __forceinline__ signed char tp_sat_s8(int x) {  // saturated to int8's range
  return (signed char)(x < -128 ? -128 : x > 127 ? 127 : x); }""",
}
# a number operand's C++ for non-finite values, per compute type: (inf, nan)
_NON_FINITE = {"float": ("__int_as_float(0x7f800000)", "__int_as_float(0x7fc00000)"),
               "double": ("__longlong_as_double(0x7ff0000000000000LL)", "__longlong_as_double(0x7ff8000000000000LL)")}
_INT_MIN = {"int": -2**31, "long long": -2**63}


def scalar_literal(value: int | float, compute: str) -> str:
    """A binary op's number operand (already converted to the compute type) as C++ of that type."""
    if compute in _INT_MIN:
        suffix = "LL" if compute == "long long" else ""
        if value == _INT_MIN[compute]:
            return f"({value + 1}{suffix} - 1)"  # -2147483648 would be the long 2147483648, negated
        return f"{value}{suffix}" if value >= 0 else f"({value}{suffix})"
    inf, nan = _NON_FINITE[compute]
    if math.isnan(value):
        return nan
    if math.isinf(value):
        return inf if value > 0 else f"(-{inf})"
    text = repr(float(value)) + ("f" if compute == "float" else "")  # a float32 value prints exactly
    return f"({text})" if text.startswith("-") else text


NAN_MAX_MIN = """\
template <typename T> __device__ __forceinline__ T tp_max(T a, T b) { return (a != a || a > b) ? a : b; }  // NaN wins
template <typename T> __device__ __forceinline__ T tp_min(T a, T b) { return (a != a || a < b) ? a : b; }"""
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
    this machine) instead of the prelude."""
    e = _Emitter(ir)
    body = e.nodes(ir.body, 1)
    lines = ["// generated by tileproof from a verified schedule", "//"]
    lines += [f"//   {h}" for h in ir.header]
    if uses_half_types(ir):
        lines += ["#include <cuda_fp16.h>", "#include <cuda_bf16.h>"] if cuda_headers else HALF_PRELUDE.splitlines()
    if any("tp_max" in OPS[CTYPES[c.out.dtype.name].compute].get(c.name, "")
           for c in _nodes_of(ir.body, (Compute,)) if c.kind in ARITHMETIC) or emit_reduction.uses_max(ir):
        lines += NAN_MAX_MIN.splitlines()
    for name, helper in CAST_HELPERS.items():
        if any(f"{name}(" in line for line in body):
            lines += helper.splitlines()
    copies = _nodes_of(ir.body, (TmaCopy, MatrixCopy, CpAsyncCopy))
    if copies:
        lines += SMEM_ADDRESS.splitlines()
    lines += emit_tma.prelude(ir, [c for c in copies if isinstance(c, TmaCopy)])
    lines += emit_cp_async.prelude([c for c in copies if isinstance(c, CpAsyncCopy)])
    lines += emit_reduction.prelude(ir)
    if emit_mma.uses_wgmma(_nodes_of(ir.body, (MmaIssue,))):
        lines += emit_mma.WGMMA_PRELUDE.splitlines()
    lines.append("")
    lines.append(f'extern "C" __global__ void{e.launch_bounds()} {ir.name}(')
    lines.append(",\n".join(f"    {p}" for p in e.params()) + ") {")
    lines += e.buffers()
    lines += emit_tma.barrier_setup(ir.mbarriers, math.prod(ir.cluster))
    lines += body
    lines.append("}")
    return "\n".join(lines) + "\n"


def _nodes_of(nodes: list, kinds: tuple) -> list:
    out = []
    for n in nodes:
        if hasattr(n, "body"):  # loops, and a circular buffer's prologue and prefetched copies
            out += _nodes_of(n.body, kinds)
        elif isinstance(n, kinds):
            out.append(n)
    return out


class _Emitter:
    def __init__(self, ir: KernelIR):
        self.ir = ir
        self.consumers = 0  # inside a warp-specialized kernel's consumer role: its thread count
        self.enclosing: list[str] = []  # the C++ indices of the loops around the node being printed
        self.threads: dict[str, int] = {}  # thread index -> the extent of the thread loop around the node
        self.invariants: Invariants | None = None  # inside an unrolled nest: its predicates' named terms
        self.invariant_count = 0
        self.implied: frozenset = frozenset()  # hole predicates a whole tile's guard implies (emit/whole_tile.py)
        # names that never change within a block: thread and block indices, the kernel's parameters
        self.block_uniform = {f"blockIdx.{c}" for c in "xyz"} | {p.name for p in ir.params}
        self.fixed = self.block_uniform | {f"threadIdx.{c}" for c in "xyz"}

    def x(self, expr) -> str:
        return to_cuda(expr, self.ir.names, cast=False, bits=self.ir.index_bits)

    def launch_bounds(self) -> str:
        from ...model.expr import product, try_int

        n = try_int(product(list(self.ir.block)))
        # one block per SM where setmaxnreg moves registers: ptxas then sizes the pool it shares out
        once = ", 1" if any(isinstance(r, WarpRoles) and r.spec.num_registers for r in self.ir.body) else ""
        cluster = f" __cluster_dims__({', '.join(map(str, self.ir.cluster))})" if math.prod(self.ir.cluster) > 1 else ""
        return cluster + (f" __launch_bounds__({n}{once})" if n is not None else "")

    def params(self) -> list[str]:
        out = []
        inputs = {g.name for g in self.ir.globals if g.is_input}
        dtypes = {g.name: g.dtype for g in self.ir.globals}
        for p in self.ir.params:
            if p.kind is ParamKind.TENSOR:
                const = "const " if p.tensor in inputs else ""
                out.append(f"{const}{CTYPES[dtypes[p.tensor].name].storage}* __restrict__ {p.name}")
            elif p.kind is ParamKind.TENSOR_MAP:
                out.append(f"const __grid_constant__ TmaDescriptor {p.name}")
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
            outer = self.threads
            if n.kind is LoopKind.THREAD and n.extent.op == "const":  # its statements run below it (their
                self.threads = {**outer, n.var: n.extent.value}  # thread-extent predicates, or the role's branch)
            try:
                return [f"{pad}// {n.var} over {self.x(n.extent)}: {n.label}"] + self.nodes(n.body, depth)
            finally:
                self.threads = outer
        if n.extent == const(1):  # its index is 0 wherever it is used
            return [f"{pad}{{  // {n.label} (extent 1)"] + self.nodes(n.body, depth + 1) + [f"{pad}}}"]
        if n.kind is LoopKind.UNROLL and self.invariants is None:
            return self.unrolled_nest(n, depth)
        head = [f"{pad}#pragma unroll"] if n.kind is LoopKind.UNROLL else []
        head.append(f"{pad}for ({INDEX_TYPES[self.ir.index_bits]} {n.var} = 0; {n.var} < {self.x(n.extent)}; ++{n.var}) {{  // {n.label}")
        self.enclosing.append(n.var)
        try:
            return head + self.nodes(n.body, depth + 1) + [f"{pad}}}"]
        finally:
            self.enclosing.pop()

    def unrolled_nest(self, n: Loop, depth: int) -> list[str]:
        """An outermost unrolled loop, the invariant divisions of its predicates named before it
        (emit/invariants.py: else NVVM may leave it rolled, its register arrays in local memory);
        with hole predicates, printed twice: for a whole tile without them, and as lowered
        (emit/whole_tile.py)."""
        outer = frozenset(self.fixed | set(self.enclosing))
        self.invariants = Invariants(outer, self.ir.names, self.invariant_count)
        whole = whole_tile(n, frozenset(self.block_uniform | set(self.enclosing)), self.ir, self.threads)
        pad = "  " * depth
        try:
            lines = self.loop(n, depth + (whole is not None))
            if whole is not None:  # a whole tile's nest without the hole predicates its guard implies
                self.implied = whole.implied
                fast = self.loop(n, depth + 1)
                guard = " && ".join(self.cond(c) for c in whole.guard)
                lines = ([f"{pad}if ({guard}) {{  // a whole tile: no hole predicates"] + fast
                         + [f"{pad}}} else {{"] + lines + [f"{pad}}}"])
            named = self.invariants
        finally:
            self.invariants, self.implied = None, frozenset()
        self.invariant_count += named.count
        return [pad + d for d in named.declarations(self.x, INDEX_TYPES[self.ir.index_bits])] + lines

    def sync(self, n: Sync, depth: int) -> list[str]:
        pad = "  " * depth
        # fence_async: shared-memory writes, then read by the async proxy (a TMA store)
        fence = [f"{pad}tp_fence_async_smem();"] if n.fence_async else []
        if self.consumers:  # the producer warpgroup has left: a named barrier of the consumers' threads
            return fence + [f'{pad}asm volatile("bar.sync 1, {self.consumers};" ::: "memory");  // {n.why}']
        return fence + [f"{pad}__syncthreads();  // {n.why}"]

    def warp_roles(self, n: WarpRoles, depth: int) -> list[str]:
        """The producer warpgroup (the last index on the specialized axis) runs its loads and
        returns; the consumers run the rest, with named barriers among themselves."""
        pad = "  " * depth
        axis = n.spec.on.cuda_name
        last = self.x(add(self.ir.block[THREAD_TYPES.index(n.spec.on)], const(-1)))
        producer, consumer = n.body
        regs = n.spec.num_registers
        lines = [f"{pad}if ({axis} == {last}) {{  // the producer warpgroup: the TMA loads"]
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
        self.consumers = n.consumer_threads
        try:
            return lines + self.nodes(consumer.body, depth)
        finally:
            self.consumers = 0

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
        return ["  " * depth + line for line in [f"// {n.comment}", *emit_tma.copy(n, self.x, n.smem)]]

    def matrix_copy(self, n: MatrixCopy, depth: int) -> list[str]:
        # warp-uniform predicates only (LDSM-THREAD-ROWS proved whole warps), e.g. a block past M
        body = emit_ldsm.matrix_copy(n, self.x)
        conds = self.live(n.conds)
        return self.guarded_block(n.comment, conds, body[1:-1], depth) if conds else \
            ["  " * depth + line for line in [f"// {n.comment}", *body]]

    # -- statements ---------------------------------------------------------------------
    def compute(self, s: Compute, depth: int) -> list[str]:
        pad = "  " * depth
        body = self.vector_body(s) if s.vector > 1 else [self.scalar(s)]
        lines = [f"{pad}// {s.comment}"]
        conds = self.live(s.conds)
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

    def live(self, conds: list[Cond]) -> list[Cond]:
        """conds less those a whole tile's guard implies (where it holds)."""
        return [c for c in conds if c not in self.implied] if self.implied else conds

    def cond(self, c: Cond) -> str:
        named = self.invariants.rewrite if self.invariants is not None else (lambda e: e)
        return f"{self.x(named(c.lhs))} {c.op} {self.x(named(c.rhs))}"

    def ref(self, o: Operand) -> str:
        return f"{o.tensor}[{self.x(o.offset)}]"

    def scalar(self, s: Compute) -> str:
        return f"{self.ref(s.out)} = {self.value(s, [self.ref(o) for o in s.ins])};"

    def value(self, s: Compute, args: list[str]) -> str:
        """The stored value of s from its inputs' stored values."""
        out = CTYPES[s.out.dtype.name]
        if s.kind in COPIES and s.ins[0].dtype == s.out.dtype:
            return args[0]  # a copy moves the bits
        if s.kind is OpKind.CAST:
            source = CTYPES[s.ins[0].dtype.name]
            return CASTS[source.compute][s.out.dtype.name].format(source.load.format(args[0]))
        loaded = [f"({out.compute})({CTYPES[o.dtype.name].load.format(a)})" for o, a in zip(s.ins, args)]
        if s.scalar is not None:  # a number operand, already in the compute type
            loaded.insert(s.scalar.position, scalar_literal(s.scalar.value, out.compute))
        if s.kind in ARITHMETIC:
            v = OPS[out.compute][s.name].format(a=loaded[0], b=loaded[-1])
        elif s.kind is OpKind.REDUCTION:  # the accumulator (out, of the compute type) takes one more term
            term = loaded[0] if len(loaded) == 1 else f"({loaded[0]} * {loaded[1]})"  # fms: a product
            v = emit_reduction.combine(s, self.ref(s.out), term)
        else:
            v = loaded[0]
        return out.store.format(v)

    def vector_body(self, s: Compute) -> list[str]:
        """One access of s.vector elements per operand, in words of at most 16 bytes (a
        per-element register operand: an unrolled loop over the elements instead)."""
        copy = s.kind in COPIES and s.ins[0].dtype == s.out.dtype
        if any(o.per_element for o in [s.out] + s.ins):
            return self.gather_body(s)
        if copy:
            return self.move(f"&{self.ref(s.out)}", f"&{self.ref(s.ins[0])}", s.vector * s.out.dtype.bytes)
        lines = []
        for k, o in enumerate(s.ins):
            t = CTYPES[o.dtype.name].storage
            lines.append(f"alignas(16) {t} in{k}[{s.vector}];")
            lines += self.move(f"in{k}", f"&{self.ref(o)}", s.vector * o.dtype.bytes)
        lines.append(f"alignas(16) {CTYPES[s.out.dtype.name].storage} result[{s.vector}];")
        lines.append("#pragma unroll")
        args = [f"in{k}[v]" for k in range(len(s.ins))]
        lines.append(f"for (int v = 0; v < {s.vector}; ++v) result[v] = {self.value(s, args)};")
        lines += self.move(f"&{self.ref(s.out)}", "result", s.vector * s.out.dtype.bytes)
        return lines

    def gather_body(self, s: Compute) -> list[str]:
        """A vector statement with per-element register operands: the others move whole
        vectors through local arrays, the per-element ones are read or written in a loop
        over ELEMENT_VAR, which their offsets contain."""
        n, v = s.vector, ELEMENT_VAR
        lines, args = [], []
        for k, o in enumerate(s.ins):
            if o.per_element:
                args.append(self.ref(o))
                continue
            lines.append(f"alignas(16) {CTYPES[o.dtype.name].storage} in{k}[{n}];")
            lines += self.move(f"in{k}", f"&{self.ref(o)}", n * o.dtype.bytes)
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
    ReduceInit: emit_reduction.init_lines,
    BlockReduce: emit_reduction.block_reduce_lines,
    CpAsyncWait: emit_cp_async.wait_lines,
    CpAsyncCommit: emit_cp_async.commit_lines,
    Prologue: emit_cp_async.prologue_lines,
    Prefetched: emit_cp_async.prefetched_lines,
    MmaIssue: emit_mma.issue_lines,
    WgmmaFence: emit_mma.fence_lines,
    WgmmaWait: emit_mma.wait_lines,
    WarpRoles: _Emitter.warp_roles,
    StageEmptyWait: _Emitter.empty_wait,
    StageRelease: _Emitter.release,
    StageDrain: _Emitter.drain,
    BulkStoreWait: _Emitter.store_wait,
}

def dtype_storage(dtype: DataType) -> str:
    return CTYPES[dtype.name].storage
