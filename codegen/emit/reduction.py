"""C++ for reductions (codegen/lower/reduction.py): the accumulator's init, the block's combine
through tp_block_reduce, and the combine of an accumulation; the store is a plain Compute.

tp_block_reduce leaves in every thread the total of the threads that share its non-reduced
thread indices (a group). Where a group's threads are consecutive lanes (the reduced indices
vary fastest: x, x and y, or all, or others of extent 1 before them), each aligned run of W
lanes inside a group (W: the largest power of two dividing the group size, at most 32) combines
by __shfl_xor_sync butterfly, which gives every lane of the run the same value (IEEE + and max
are commutative, so both partners compute one sum); any group size works (TIDx{96}: W = 32,
TIDx{48}: W = 16), and a partial last warp names only its lanes in the shuffle mask. The runs'
partials then go through shared memory: one __syncthreads after they are written, one after
they are read (the next combine reuses the scratch). Where lanes of one warp belong to different
groups (a reduction over TIDy with TIDx > 1), every thread's value goes through shared memory.
"""

from __future__ import annotations

from ...model.reduction import COMBINE
from ..ir import BlockReduce, Compute, KernelIR, Loop, ReduceInit
from .scalar_types import CTYPES, OPS, scalar_literal

BLOCK_REDUCE = """\
// the block's threads combine acc over the thread indices RX, RY, RZ; every thread ends with its group's total
template <int N, bool RX, bool RY, bool RZ, typename T, typename F>
__device__ __forceinline__ void tp_block_reduce(T (&acc)[N], T* scratch, F op) {
  const unsigned bx = blockDim.x, by = blockDim.y, bz = blockDim.z;
  unsigned r = 0, g = 0, G = 1, NG = 1;  // index in the group and group size; group index and count
  if (RZ) { r = threadIdx.z; G = bz; } else { g = threadIdx.z; NG = bz; }
  if (RY) { r = r * by + threadIdx.y; G *= by; } else { g = g * by + threadIdx.y; NG *= by; }
  if (RX) { r = r * bx + threadIdx.x; G *= bx; } else { g = g * bx + threadIdx.x; NG *= bx; }
  // a group is a run of consecutive lanes when no index varies faster than a reduced one
  const bool lanes = (!RY || RX || bx == 1) && (!RZ || ((RY || by == 1) && (RX || bx == 1)));
  unsigned W = lanes ? (G & (0u - G)) : 1u;  // aligned runs of W lanes lie inside one group
  if (W > 32u) W = 32u;
  const unsigned linear = threadIdx.x + bx * (threadIdx.y + by * threadIdx.z), total = bx * by * bz;
  const unsigned base = linear & ~31u, present = total - base;  // the lanes this warp has
  const unsigned mask = present >= 32u ? 0xffffffffu : ((1u << present) - 1u);
  for (unsigned off = W >> 1; off > 0u; off >>= 1) {
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = op(acc[k], __shfl_xor_sync(mask, acc[k], off));
  }
  const unsigned P = G / W;  // partials per group
  if (P > 1u) {
    if (r % W == 0u) {
#pragma unroll
      for (int k = 0; k < N; ++k) scratch[(k * NG + g) * P + r / W] = acc[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const T* part = scratch + (k * NG + g) * P;
      T v = part[0];
      for (unsigned j = 1; j < P; ++j) v = op(v, part[j]);
      acc[k] = v;
    }
    __syncthreads();
  }
}"""


def _nodes(nodes: list, kind) -> list:
    out = []
    for n in nodes:
        if isinstance(n, Loop):
            out += _nodes(n.body, kind)
        elif isinstance(n, kind):
            out.append(n)
    return out


def prelude(ir: KernelIR) -> list[str]:
    """The helper, where a block combine is emitted."""
    return BLOCK_REDUCE.splitlines() if _nodes(ir.body, BlockReduce) else []


def uses_max(ir: KernelIR) -> bool:
    """Whether a reduction combines floats with tp_max (NaN wins; integers compare plainly)."""
    texts = [OPS[CTYPES[c.out.dtype.name].compute][COMBINE[c.name]] for c in _nodes(ir.body, Compute)
             if c.kind == "reduction"]
    texts += [OPS[CTYPES[b.dtype.name].compute][b.combine] for b in _nodes(ir.body, BlockReduce)]
    return any("tp_max" in t for t in texts)


def init_lines(e, n: ReduceInit, depth: int) -> list[str]:
    pad = "  " * depth
    value = scalar_literal(n.neutral, CTYPES[n.dtype.name].compute)
    if n.elements == 1:
        return [f"{pad}{n.acc}[0] = {value};  // {n.comment}"]
    lines = [f"{pad}#pragma unroll  // {n.comment}",
             f"{pad}for (int k = 0; k < {n.elements}; ++k) {n.acc}[k] = {value};"]
    if n.pinned:  # else ptxas may set some inside the wgmma pipeline, and serializes every wgmma (C7515)
        lines += [f"{pad}#pragma unroll  // the accumulators set here, before the asynchronous wgmmas",
                  f'{pad}for (int k = 0; k < {n.elements}; ++k) asm volatile("" : "+f"({n.acc}[k]) :: "memory");']
    return lines


def combine(s: Compute, acc: str, value: str) -> str:
    """An accumulation's new value: acc combined with the input's value (both in the compute type)."""
    return OPS[CTYPES[s.out.dtype.name].compute][COMBINE[s.name]].format(a=acc, b=value)


def block_reduce_lines(e, n: BlockReduce, depth: int) -> list[str]:
    pad = "  " * depth
    t = CTYPES[n.dtype.name].compute
    op = OPS[t][n.combine].format(a="a", b="b")
    flags = ", ".join("true" if r else "false" for r in n.threads)
    return [f"{pad}// {n.comment}",
            f"{pad}tp_block_reduce<{n.elements}, {flags}>({n.acc}, reinterpret_cast<{t}*>({n.scratch}), "
            f"[]({t} a, {t} b) {{ return {op}; }});"]


__all__ = ["BLOCK_REDUCE", "block_reduce_lines", "combine", "init_lines", "prelude", "uses_max"]
