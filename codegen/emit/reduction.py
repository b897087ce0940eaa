"""C++ for reductions (codegen/lower/reduction.py): the accumulator's init, the block's combine
through tp_block_reduce, the grid's through tp_grid_reduce (an allreduce's through
tp_grid_allreduce, a grid-wide barrier; a round of a group's grid reductions through
tp_grid_partials, tp_grid_arrive or tp_grid_barrier, tp_grid_combine and tp_grid_release), and the
combine of an accumulation; the store is a plain Compute.

tp_block_reduce leaves in every thread the total of the threads that share its non-reduced
thread indices (a group). Where a group's threads are consecutive lanes (the reduced indices
vary fastest: x, x and y, or all, or others of extent 1 before them), each aligned run of W
lanes inside a group (W: the largest power of two dividing the group size, at most 32) combines
by __shfl_xor_sync butterfly, which gives every lane of the run the same value (IEEE + and max
are commutative, so both partners compute one sum); any group size works (TIDx{96}: W = 32,
TIDx{48}: W = 16), and a partial last warp names only its lanes in the shuffle mask. The runs'
partials then go through shared memory: one __syncthreads after they are written, one after
they are read (the next combine reuses the scratch). Where W is 32 (whole warps: the shuffles take
constant offsets and a full mask) and the P partials a group has are a power of two, each aligned
run of P lanes reads every partial once and combines them by log2(P) shuffles; otherwise every
thread combines its group's P partials in turn. Where lanes of one warp belong to different
groups (a reduction over TIDy with TIDx > 1), every thread's value goes through shared memory.
In a warp-specialized kernel the helper spans the consumer role only (consumers_block_reduce).

A Welford's accumulator holds states (WELFORD: tp_welford_state<T>, its update and Chan's combine), and
tp_block_reduce combines them as it does numbers: T is the state, op the combine, and
__shfl_xor_sync of a state shuffles its three fields (found by argument-dependent lookup); the
scratch holds a state per partial.
"""

from __future__ import annotations

from ...hw.threads import CONSUMER_BARRIER
from ...model.errors import InternalError
from ...model.expr import try_int
from ...model.reduction import COMBINE
from ...model.welford import WELFORD_OPS
from ...model.types import THREAD_TYPES
from ..ir import BlockReduce, Compute, GridReduce, GroupedGridReduce, KernelIR, ReduceInit, SiblingStep, WarpRoles, walk
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
  const unsigned shift = __ffs(W) - 1u;  // W is a power of two: r / W and G / W are shifts
  const unsigned linear = threadIdx.x + bx * (threadIdx.y + by * threadIdx.z), total = bx * by * bz;
  if (W == 32u) {  // whole warps in one group: constant offsets, a full mask (no divergence checks)
#pragma unroll
    for (unsigned off = 16u; off > 0u; off >>= 1) {
#pragma unroll
      for (int k = 0; k < N; ++k) acc[k] = op(acc[k], __shfl_xor_sync(0xffffffffu, acc[k], off));
    }
  } else {
    const unsigned base = linear & ~31u, present = total - base;  // the lanes this warp has
    const unsigned mask = present >= 32u ? 0xffffffffu : ((1u << present) - 1u);
    for (unsigned off = W >> 1; off > 0u; off >>= 1) {
#pragma unroll
      for (int k = 0; k < N; ++k) acc[k] = op(acc[k], __shfl_xor_sync(mask, acc[k], off));
    }
  }
  const unsigned P = G >> shift;  // partials per group
  if (P > 1u) {
    if ((r & (W - 1u)) == 0u) {
#pragma unroll
      for (int k = 0; k < N; ++k) scratch[(k * NG + g) * P + (r >> shift)] = acc[k];
    }
    __syncthreads();
    if (W == 32u && (P & (P - 1u)) == 0u) {
      // P (at most 32) a power of two: each aligned run of P lanes reads every partial once, and
      // log2(P) shuffles combine them (one shared load a thread, not P dependent ones)
#pragma unroll
      for (int k = 0; k < N; ++k) {
        T v = scratch[(k * NG + g) * P + (linear & (P - 1u))];
#pragma unroll
        for (unsigned off = 16u; off > 0u; off >>= 1) {
          if (off < P) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
        }
        acc[k] = v;
      }
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const T* part = scratch + (k * NG + g) * P;
        T v = part[0];
        for (unsigned j = 1; j < P; ++j) v = op(v, part[j]);
        acc[k] = v;
      }
    }
    __syncthreads();
  }
}"""


WELFORD = """\
// a Welford state (model/welford.py): the mean of the elements seen, the sum of their squared deviations from
// it, and their count, an integer C (nvFuser's N is its index type; a float count stops at 2^24 in float32)
template <typename T, typename C>
struct tp_welford_state {
  T avg, m2;
  C n;
};
// the state after one more element x (nvFuser's welfordCombine with a count of one)
template <typename T, typename C>
__device__ __forceinline__ tp_welford_state<T, C> tp_welford_update(tp_welford_state<T, C> s, T x) {
  const C n = s.n + C(1);
  const T delta = x - s.avg, avg = s.avg + delta / T(n);
  return {avg, s.m2 + delta * (x - avg), n};
}
// two states combined by Chan's formula; an empty one (n == 0: a thread that saw no element) leaves the other
// as it is, with no division by zero. The larger count goes first (then the smaller mean, the smaller m2), so
// the partners of a shuffle compute the same bits and the block's threads end with one total
template <typename T, typename C>
__device__ __forceinline__ tp_welford_state<T, C> tp_welford_combine(tp_welford_state<T, C> a, tp_welford_state<T, C> b) {
  if (b.n > a.n || (b.n == a.n && (b.avg < a.avg || (b.avg == a.avg && b.m2 < a.m2)))) {
    const tp_welford_state<T, C> t = a;
    a = b;
    b = t;
  }
  if (b.n == C(0)) return a;  // a.n >= b.n: both empty too
  const C n = a.n + b.n;
  const T w = T(b.n) / T(n), delta = b.avg - a.avg;
  return {a.avg + delta * w, a.m2 + b.m2 + delta * delta * T(a.n) * w, n};
}
// a state combined with a partial one given as its three values (an rfactor's partial outputs)
template <typename T, typename C, typename N>
__device__ __forceinline__ tp_welford_state<T, C> tp_welford_merge(tp_welford_state<T, C> s, T avg, T m2, N n) {
  return tp_welford_combine(s, tp_welford_state<T, C>{avg, m2, C(n)});
}
// tp_block_reduce's shuffle of a state: its three fields, each a shuffle of its own
template <typename T, typename C>
__device__ __forceinline__ tp_welford_state<T, C> __shfl_xor_sync(unsigned mask, tp_welford_state<T, C> s, unsigned off) {
  return {__shfl_xor_sync(mask, s.avg, off), __shfl_xor_sync(mask, s.m2, off), __shfl_xor_sync(mask, s.n, off)};
}"""


GRID_REDUCE = """\
// the blocks of a segment combine acc (execution/grid_reduction.py): each writer stores its partials at
// work[slot..], fences them, and thread 0 counts the block on *semaphore; the block that reads ranks - 1
// is the last: it combines every block's partials of its lanes (rank j at first + j * stride, the threads
// along RX/RY/RZ taking j = reducer, reducer + reducers, ...), then across RX/RY/RZ, and returns the
// semaphore to 0. No block waits for another. Returns whether this block was the last.
template <int N, bool RX, bool RY, bool RZ, typename T, typename F>
__device__ __forceinline__ bool tp_grid_reduce(T (&acc)[N], T* work, unsigned long long slot, unsigned long long first,
    unsigned long long stride, unsigned long long ranks, unsigned* semaphore, bool writer, unsigned long long reducer,
    unsigned long long reducers, T* scratch, F op, T neutral) {
  volatile T* w = work;  // not cached in L1: other blocks write it
  if (writer) {
#pragma unroll
    for (int k = 0; k < N; ++k) w[slot + k] = acc[k];
  }
  __threadfence();  // each writer's partials reach the GPU's memory
  __syncthreads();  // ... before thread 0 counts the block
  const bool leader = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
  unsigned ticket = 0u;
  if (leader) {
    __threadfence();  // cumulative: the block's partials, ordered before it by the barrier
    ticket = atomicAdd(semaphore, 1u);
    __threadfence();  // the last block reads the partials after the count that proves them written
  }
  const bool last = __syncthreads_or(leader && ticket == (unsigned)(ranks - 1ull)) != 0;
  if (!last) return false;
#pragma unroll
  for (int k = 0; k < N; ++k) acc[k] = neutral;
  for (unsigned long long j = reducer; j < ranks; j += reducers) {
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = op(acc[k], w[first + j * stride + k]);
  }
  if (RX || RY || RZ) tp_block_reduce<N, RX, RY, RZ>(acc, scratch, op);
  if (leader) atomicExch(semaphore, 0u);  // every block of the segment has counted: ready for the next launch
  return true;
}"""


GRID_ALLREDUCE = """\
// an allreduce over the blocks of a segment (execution/grid_reduction.py): each writer stores its partials at
// work[slot..] and fences them; the blocks meet at a grid-wide barrier on *semaphore (nvFuser's grid_sync::sync):
// thread 0 adds 1, in the block of rank ranks - 1 2^31 - (ranks - 1), so bit 31 flips once every block of the
// segment has arrived and no earlier, and waits for the flip; then every block combines every block's partials of
// its lanes (rank j at first + j * stride, j = reducer, reducer + reducers, ...) and across RX/RY/RZ, so every
// block holds the total. The low 31 bits end as they began: the next use (next launch) waits for the next flip.
// The blocks wait for each other: the kernel is launched cooperatively (all of them resident).
template <int N, bool RX, bool RY, bool RZ, typename T, typename F>
__device__ __forceinline__ void tp_grid_allreduce(T (&acc)[N], T* work, unsigned long long slot,
    unsigned long long first, unsigned long long stride, unsigned long long ranks, unsigned long long rank,
    unsigned* semaphore, bool writer, unsigned long long reducer, unsigned long long reducers, T* scratch, F op,
    T neutral) {
  volatile T* w = work;  // not cached in L1: other blocks write it
  if (writer) {
#pragma unroll
    for (int k = 0; k < N; ++k) w[slot + k] = acc[k];
  }
  __threadfence();  // each writer's partials reach the GPU's memory
  __syncthreads();  // ... before thread 0 arrives for the block
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    __threadfence();  // cumulative: the block's partials, ordered before its arrival by the barrier
    const unsigned increment = rank + 1ull == ranks ? 0x80000000u - (unsigned)(ranks - 1ull) : 1u;
    const unsigned arrived = atomicAdd(semaphore, increment);
    const volatile unsigned* s = semaphore;
    unsigned ns = 8u;
    while (((arrived ^ *s) & 0x80000000u) == 0u) {  // bit 31 flips when the last of the segment arrives
      __nanosleep(ns);
      if (ns < 256u) ns *= 2u;
    }
    __threadfence();  // the partials are read after the flip that proves them written
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < N; ++k) acc[k] = neutral;
  for (unsigned long long j = reducer; j < ranks; j += reducers) {
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = op(acc[k], w[first + j * stride + k]);
  }
  if (RX || RY || RZ) tp_block_reduce<N, RX, RY, RZ>(acc, scratch, op);
}"""


GRID_ROUND = """\
// a round of grid reductions (execution/grid_reduction.py grid_round, nvFuser's GroupedGridReduction): every
// member's writers store its partials (tp_grid_partials), then the block counts itself once on the round's
// semaphore (tp_grid_arrive: the block that reads ranks - 1 is the last, every member's partials of every block
// written and fenced before), or an allreduce round's blocks meet at one grid-wide barrier (tp_grid_barrier);
// the last block (every block, after a barrier) combines each member's partials (tp_grid_combine) and returns
// the semaphore to 0 (tp_grid_release). One block holds every member's total.
template <int N, typename T>
__device__ __forceinline__ void tp_grid_partials(const T (&acc)[N], T* work, unsigned long long slot, bool writer) {
  volatile T* w = work;  // not cached in L1: other blocks read it
  if (writer) {
#pragma unroll
    for (int k = 0; k < N; ++k) w[slot + k] = acc[k];
  }
}
template <int N, bool RX, bool RY, bool RZ, typename T, typename F>
__device__ __forceinline__ void tp_grid_combine(T (&acc)[N], T* work, unsigned long long first,
    unsigned long long stride, unsigned long long ranks, unsigned long long reducer, unsigned long long reducers,
    T* scratch, F op, T neutral) {
  volatile T* w = work;  // not cached in L1: other blocks wrote it
#pragma unroll
  for (int k = 0; k < N; ++k) acc[k] = neutral;
  for (unsigned long long j = reducer; j < ranks; j += reducers) {
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = op(acc[k], w[first + j * stride + k]);
  }
  if (RX || RY || RZ) tp_block_reduce<N, RX, RY, RZ>(acc, scratch, op);
}"""


GRID_ROUND_COUNT = """\
// a plain round's count: returns whether this block is the last of its segment to arrive
__device__ __forceinline__ bool tp_grid_arrive(unsigned long long ranks, unsigned* semaphore) {
  __threadfence();  // each writer's partials, of every member, reach the GPU's memory
  __syncthreads();  // ... before thread 0 counts the block
  const bool leader = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
  unsigned ticket = 0u;
  if (leader) {
    __threadfence();  // cumulative: the block's partials, ordered before it by the barrier
    ticket = atomicAdd(semaphore, 1u);
    __threadfence();  // the last block reads the partials after the count that proves them written
  }
  return __syncthreads_or(leader && ticket == (unsigned)(ranks - 1ull)) != 0;
}
// in the last block, after its combines: every block of the segment has counted, ready for the next launch
__device__ __forceinline__ void tp_grid_release(unsigned* semaphore) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) atomicExch(semaphore, 0u);
}"""


GRID_ROUND_BARRIER = """\
// an allreduce round's grid-wide barrier (tp_grid_allreduce's): thread 0 adds 1, in the block of rank
// ranks - 1 2^31 - (ranks - 1), and waits until bit 31 flips; the low 31 bits end as they began
__device__ __forceinline__ void tp_grid_barrier(unsigned long long ranks, unsigned long long rank, unsigned* semaphore) {
  __threadfence();  // each writer's partials, of every member, reach the GPU's memory
  __syncthreads();  // ... before thread 0 arrives for the block
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    __threadfence();  // cumulative: the block's partials, ordered before its arrival by the barrier
    const unsigned increment = rank + 1ull == ranks ? 0x80000000u - (unsigned)(ranks - 1ull) : 1u;
    const unsigned arrived = atomicAdd(semaphore, increment);
    const volatile unsigned* s = semaphore;
    unsigned ns = 8u;
    while (((arrived ^ *s) & 0x80000000u) == 0u) {  // bit 31 flips when the last of the segment arrives
      __nanosleep(ns);
      if (ns < 256u) ns *= 2u;
    }
    __threadfence();  // the partials are read after the flip that proves them written
  }
  __syncthreads();
}"""


GRID_WELFORD = """\
// a grid Welford (execution/grid_reduction.py): each writer stores its states' fields at work[slot..] of three
// workspaces, avg, m2 and n (nvFuser's gridWelford keeps three too), and the block counts itself with
// tp_grid_arrive; the last block starts each state empty and combines every block's states of its lanes in rank
// order (rank j at first + j * stride, j = reducer, reducer + reducers, ...) by Chan's formula, where an empty
// partial (n == 0) leaves the state as it is, then across RX/RY/RZ, and returns the semaphore (tp_grid_release);
// an allreduce's blocks meet at tp_grid_barrier instead, and every block combines
template <int N, typename T, typename C>
__device__ __forceinline__ void tp_grid_welford_partials(const tp_welford_state<T, C> (&acc)[N], T* avg, T* m2, C* n,
    unsigned long long slot, bool writer) {
  volatile T* a = avg;  // not cached in L1: other blocks read them
  volatile T* m = m2;
  volatile C* c = n;
  if (writer) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      a[slot + k] = acc[k].avg;
      m[slot + k] = acc[k].m2;
      c[slot + k] = acc[k].n;
    }
  }
}
template <int N, bool RX, bool RY, bool RZ, typename T, typename C>
__device__ __forceinline__ void tp_grid_welford_combine(tp_welford_state<T, C> (&acc)[N], T* avg, T* m2, C* n,
    unsigned long long first, unsigned long long stride, unsigned long long ranks, unsigned long long reducer,
    unsigned long long reducers, tp_welford_state<T, C>* scratch) {
  volatile T* a = avg;  // not cached in L1: other blocks wrote them
  volatile T* m = m2;
  volatile C* c = n;
#pragma unroll
  for (int k = 0; k < N; ++k) acc[k] = tp_welford_state<T, C>{};
  for (unsigned long long j = reducer; j < ranks; j += reducers) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const unsigned long long at = first + j * stride + k;
      acc[k] = tp_welford_combine(acc[k], tp_welford_state<T, C>{a[at], m[at], c[at]});
    }
  }
  if (RX || RY || RZ) {
    tp_block_reduce<N, RX, RY, RZ>(acc, scratch, [](tp_welford_state<T, C> x, tp_welford_state<T, C> y) {
      return tp_welford_combine(x, y);
    });
  }
}"""


def _nodes(nodes: list, kind) -> list:
    """The nodes of `kind` anywhere under `nodes` (in loops, a whole-tile nest's two versions, ...)."""
    return [n for n in walk(nodes) if isinstance(n, kind)]


def prelude(ir: KernelIR) -> list[str]:
    """The helpers, where a block or grid combine is emitted (the grid's calls the block's)."""
    grids, rounds = _nodes(ir.body, GridReduce), _nodes(ir.body, GroupedGridReduce)
    welfords = [n for n in grids if n.combine == "welford"]  # tp_grid_welford_*, by tp_grid_arrive or tp_grid_barrier
    grids = [n for n in grids if n.combine != "welford"]
    grid, allreduce = any(not n.allreduce for n in grids), any(n.allreduce for n in grids)
    block = bool(grids) or bool(rounds) or bool(welfords) or bool(_nodes(ir.body, BlockReduce))
    roles = next((n for n in ir.body if isinstance(n, WarpRoles)), None)
    helper = BLOCK_REDUCE if roles is None else consumers_block_reduce(ir, roles)
    welford = WELFORD.splitlines() if any(b.welford_count for b in ir.buffers) else []  # before the block helper calls it
    out = (welford + (helper.splitlines() if block else []) + (GRID_REDUCE.splitlines() if grid else [])
           + (GRID_ALLREDUCE.splitlines() if allreduce else []))
    # a group's grid reductions in one round: its helpers only where there is one; a grid Welford counts as a round
    out += GRID_ROUND.splitlines() if rounds else []
    out += GRID_ROUND_COUNT.splitlines() if any(not n.allreduce for n in welfords + rounds) else []
    out += GRID_ROUND_BARRIER.splitlines() if any(n.allreduce for n in welfords + rounds) else []
    return out + (GRID_WELFORD.splitlines() if welfords else [])


def consumers_block_reduce(ir: KernelIR, roles: WarpRoles) -> str:
    """tp_block_reduce of a warp-specialized kernel: its combines run in the consumer role, whose
    threads are the block's without the producer's indices on the specialized axis (returned by
    then): the consumers' extents for blockDim, their named barrier for __syncthreads (nvFuser's
    blockReduce gets the compute threads' dims and a bar.sync of them too)."""
    at = THREAD_TYPES.index(roles.spec.on)
    dims = [roles.consumer_indices if k == at else try_int(e) for k, e in enumerate(ir.block)]
    if any(d is None for d in dims):
        raise InternalError("a warp-specialized kernel's block is not constant (WS-ROLES)")
    bx, by, bz = dims
    return (BLOCK_REDUCE
            .replace("const unsigned bx = blockDim.x, by = blockDim.y, bz = blockDim.z;",
                     f"const unsigned bx = {bx}u, by = {by}u, bz = {bz}u;  // the consumer role's threads")
            .replace("__syncthreads();",
                     f'asm volatile("bar.sync {CONSUMER_BARRIER}, {roles.consumer_threads};" ::: "memory");'))


def uses_max(ir: KernelIR) -> bool:
    """Whether a reduction combines floats with tp_max or tp_min (NaN wins; integers compare plainly)."""
    texts = [OPS[CTYPES[c.out.dtype.name].compute][COMBINE[c.name]] for c in _nodes(ir.body, Compute)
             if c.kind == "reduction" and c.name not in WELFORD_OPS]
    texts += [OPS[CTYPES[b.dtype.name].compute][b.combine] for b in _nodes(ir.body, (BlockReduce, GridReduce))
              if b.combine != "welford"]
    texts += [OPS[CTYPES[m.dtype.name].compute][m.combine] for n in _nodes(ir.body, GroupedGridReduce)
              for m in n.members]
    return any("tp_max" in t or "tp_min" in t for t in texts)


def init_lines(e, n: ReduceInit, depth: int) -> list[str]:
    pad = "  " * depth
    value = scalar_literal(n.neutral, CTYPES[n.dtype.name].compute)
    if n.welford_count:  # avg, m2 and n all 0
        value = f"{state_type(n.dtype, n.welford_count)}{{}}"
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


def state_type(dtype, count) -> str:
    """The C++ type of a Welford state of `dtype` values and a `count` dtype count."""
    return f"tp_welford_state<{CTYPES[dtype.name].compute}, {CTYPES[count.name].compute}>"


def welford_update(s: Compute, acc: str, values: list[str]) -> str:
    """A Welford accumulation's new state: acc after one more element (one input), or combined with a
    partial state (an rfactor's: the three partial outputs avg, var_sum, n, each of its own type)."""
    if len(values) == 1:
        return f"tp_welford_update({acc}, {values[0]})"
    return f"tp_welford_merge({acc}, {', '.join(values)})"


def _scratch_pointer(scratch: str | None, t: str) -> str:
    """The scratch argument: the shared buffer, or a null pointer where the combine is shuffles only."""
    return f"reinterpret_cast<{t}*>({scratch})" if scratch else f"static_cast<{t}*>(nullptr)"


def block_reduce_lines(e, n: BlockReduce, depth: int) -> list[str]:
    pad = "  " * depth
    t = CTYPES[n.dtype.name].compute
    if n.combine == "welford":  # Welford states, three values shuffled together (WELFORD)
        t, op = state_type(n.dtype, n.welford_count), "tp_welford_combine(a, b)"
    else:
        op = OPS[t][n.combine].format(a="a", b="b")
    flags = ", ".join("true" if r else "false" for r in n.threads)
    return [f"{pad}// {n.comment}",
            f"{pad}tp_block_reduce<{n.elements}, {flags}>({n.acc}, {_scratch_pointer(n.scratch, t)}, "
            f"[]({t} a, {t} b) {{ return {op}; }});"]


def sibling_step_lines(e, n: SiblingStep, depth: int) -> list[str]:
    return [f"{'  ' * depth}// {n.comment}"]


def grid_reduce_lines(e, n: GridReduce, depth: int) -> list[str]:
    pad = "  " * depth
    if n.combine == "welford":
        return _grid_welford_lines(e, n, pad)
    t = CTYPES[n.dtype.name].compute
    op = OPS[t][n.combine].format(a="a", b="b")
    flags = ", ".join("true" if r else "false" for r in n.threads)
    writer = " && ".join(e.cond(c) for c in n.writer) or "true"
    scratch = _scratch_pointer(n.scratch, t)
    if n.allreduce:
        return [f"{pad}// {n.comment}",
                f"{pad}tp_grid_allreduce<{n.elements}, {flags}>({n.acc}, {n.work}, {e.x(n.slot)}, {e.x(n.first)}, "
                f"{e.x(n.stride)}, {e.x(n.ranks)}, {e.x(n.rank)}, {n.semaphores} + {e.x(n.semaphore)}, {writer}, "
                f"{e.x(n.reducer)}, {e.x(n.reducers)}, {scratch}, [] ({t} a, {t} b) {{ return {op}; }}, "
                f"{scalar_literal(n.neutral, t)});"]
    lines = [f"{pad}// {n.comment}",
             f"{pad}const bool {n.flag} = tp_grid_reduce<{n.elements}, {flags}>({n.acc}, {n.work}, {e.x(n.slot)}, "
             f"{e.x(n.first)}, {e.x(n.stride)}, {e.x(n.ranks)}, {n.semaphores} + {e.x(n.semaphore)}, {writer}, "
             f"{e.x(n.reducer)}, {e.x(n.reducers)}, {scratch}, [] ({t} a, {t} b) {{ return {op}; }}, "
             f"{scalar_literal(n.neutral, t)});"]
    for name, index, dim in n.last:  # the store's single writer: blockIdx == tp_last holds in the last block only
        lines.append(f"{pad}const unsigned long long {name} = {n.flag} ? {index} : {dim};")
    return lines


def _grid_welford_lines(e, n: GridReduce, pad: str) -> list[str]:
    """A grid Welford (GRID_WELFORD): its states' partials to the three workspaces, the block counted
    on its semaphore (tp_grid_arrive, a round's count), the last block's combine, the semaphore returned."""
    t = state_type(n.dtype, n.welford_count)
    flags = ", ".join("true" if r else "false" for r in n.threads)
    writer = " && ".join(e.cond(c) for c in n.writer) or "true"
    works = ", ".join(n.welford_work)
    semaphore = f"{n.semaphores} + {e.x(n.semaphore)}"
    combine = (f"tp_grid_welford_combine<{n.elements}, {flags}>({n.acc}, {works}, {e.x(n.first)}, {e.x(n.stride)}, "
               f"{e.x(n.ranks)}, {e.x(n.reducer)}, {e.x(n.reducers)}, {_scratch_pointer(n.scratch, t)});")
    lines = [f"{pad}// {n.comment}",
             f"{pad}tp_grid_welford_partials<{n.elements}>({n.acc}, {works}, {e.x(n.slot)}, {writer});"]
    if n.allreduce:  # every block combines after the grid-wide barrier (an allreduce round's)
        return lines + [f"{pad}tp_grid_barrier({e.x(n.ranks)}, {e.x(n.rank)}, {semaphore});", f"{pad}{combine}"]
    lines += [f"{pad}const bool {n.flag} = tp_grid_arrive({e.x(n.ranks)}, {semaphore});",
              f"{pad}if ({n.flag}) {{",
              f"{pad}  {combine}",
              f"{pad}  tp_grid_release({semaphore});",
              f"{pad}}}"]
    for name, index, dim in n.last:  # the stores of the three outputs: blockIdx == tp_last in the last block only
        lines.append(f"{pad}const unsigned long long {name} = {n.flag} ? {index} : {dim};")
    return lines


def grouped_grid_reduce_lines(e, n: GroupedGridReduce, depth: int) -> list[str]:
    """A round: every member's partials, one count (or one grid barrier), then each member's combine in the
    last block (every block), the semaphore returned once; the first member's flag and last-block indices."""
    pad = "  " * depth
    first = n.members[0]
    writer = " && ".join(e.cond(c) for c in first.writer) or "true"
    semaphore = f"{first.semaphores} + {e.x(first.semaphore)}"
    lines = [f"{pad}// {n.comment}"]
    for m in n.members:
        lines.append(f"{pad}tp_grid_partials<{m.elements}>({m.acc}, {m.work}, {e.x(m.slot)}, {writer});")
    combines = []
    for m in n.members:
        t = CTYPES[m.dtype.name].compute
        op = OPS[t][m.combine].format(a="a", b="b")
        flags = ", ".join("true" if r else "false" for r in m.threads)
        scratch = _scratch_pointer(m.scratch, t)
        combines.append(f"tp_grid_combine<{m.elements}, {flags}>({m.acc}, {m.work}, {e.x(m.first)}, {e.x(m.stride)}, "
                        f"{e.x(m.ranks)}, {e.x(m.reducer)}, {e.x(m.reducers)}, {scratch}, "
                        f"[] ({t} a, {t} b) {{ return {op}; }}, {scalar_literal(m.neutral, t)});")
    if n.allreduce:
        lines.append(f"{pad}tp_grid_barrier({e.x(first.ranks)}, {e.x(first.rank)}, {semaphore});")
        return lines + [f"{pad}{c}" for c in combines]
    lines.append(f"{pad}const bool {first.flag} = tp_grid_arrive({e.x(first.ranks)}, {semaphore});")
    lines.append(f"{pad}if ({first.flag}) {{")
    lines += [f"{pad}  {c}" for c in combines]
    lines.append(f"{pad}  tp_grid_release({semaphore});")
    lines.append(f"{pad}}}")
    for name, index, dim in first.last:  # every member's store and reader: blockIdx == tp_last, the round's last block
        lines.append(f"{pad}const unsigned long long {name} = {first.flag} ? {index} : {dim};")
    return lines


__all__ = ["BLOCK_REDUCE", "GRID_ALLREDUCE", "GRID_REDUCE", "GRID_ROUND", "GRID_ROUND_BARRIER", "GRID_ROUND_COUNT",
           "GRID_WELFORD", "WELFORD", "block_reduce_lines", "combine", "grid_reduce_lines", "grouped_grid_reduce_lines",
           "init_lines", "prelude", "sibling_step_lines", "state_type", "uses_max", "welford_update"]
