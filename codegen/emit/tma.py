"""C++ for TMA: the descriptor type, mbarriers, cp.async.bulk.tensor loads and stores.

The PTX follows PTX ISA 9.7.9.25 cp.async.bulk.tensor and 9.7.13.15 mbarrier (checked with
ptxas for sm_90a): the `.shared::cluster` load form takes the CTA's own shared address (a
CTA's shared window is part of its cluster's). In a cluster (execution/cluster.py) the mbarriers'
initialization is published to the cluster by a cluster barrier, a multicast load adds
`.multicast::cluster` and the receivers' mask, and a consumer releases a stage on every
block's empty mbarrier (mapa: the same mbarrier in another block). A 1-D bulk copy (PTX ISA
9.7.9.25.4.1 cp.async.bulk) takes the global run's generic address and its size in bytes in place
of a tensor map and coordinates, as nvFuser's runtime/memory.cu (cpAsyncBulkG2S / S2G) does.
"""

from __future__ import annotations

from ...model.expr import var
from ...hw.mbarrier import phase_bits_init
from ...model.types import Direction
from ..ir import BulkStoreWait, KernelIR, MBarrier, StageDrain, StageEmptyWait, StageRelease, TmaCopy, TmaWait

# the threads' shared-memory writes, ordered before the async proxy's reads (a TMA store, wgmma)
FENCE_ASYNC = """\
__device__ __forceinline__ void tp_fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
"""

PRELUDE = """\
// TMA: a CUtensorMap is 128 opaque bytes, passed by value as a __grid_constant__ parameter
struct __align__(64) TmaDescriptor { unsigned long long opaque[16]; };
__device__ __forceinline__ void tp_mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(tp_smem(bar)), "r"(count) : "memory"); }
__device__ __forceinline__ void tp_mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(tp_smem(bar)), "r"(bytes) : "memory"); }
__device__ __forceinline__ void tp_mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(tp_smem(bar)) : "memory"); }
__device__ __forceinline__ void tp_mbar_wait(unsigned long long* bar, unsigned phase) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n"
                 "selp.u32 %0, 1, 0, p;\\n}" : "=r"(done) : "r"(tp_smem(bar)), "r"(phase) : "memory");
  } }
__device__ __forceinline__ void tp_mbar_arrive_cluster(unsigned long long* bar, unsigned cta) {
  asm volatile("{\\n.reg .b32 remote;\\nmapa.shared::cluster.u32 remote, %0, %1;\\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\\n}"
               :: "r"(tp_smem(bar)), "r"(cta) : "memory"); }
__device__ __forceinline__ unsigned tp_cluster_ctarank() {
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned tp_cluster_ctaid_x() {
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned tp_cluster_ctaid_y() {
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned tp_cluster_ctaid_z() {
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(r)); return r; }
""" + FENCE_ASYNC + """\
__device__ __forceinline__ void tp_bulk_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void tp_bulk_store_wait() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
"""

# a load whose copies per phase are not a constant: each announces its bytes without arriving
EXPECT_TX = """\
__device__ __forceinline__ void tp_mbar_expect_tx_only(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(tp_smem(bar)), "r"(bytes) : "memory"); }
"""

BULK_RUN = """\
__device__ __forceinline__ void tp_bulk_load_run(unsigned dst, const void* src, unsigned bytes,
                                                 unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(tp_smem(bar)) : "memory"); }
__device__ __forceinline__ void tp_bulk_store_run(void* dst, unsigned src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               :: "l"(dst), "r"(src), "r"(bytes) : "memory"); }
"""


def _coord_regs(rank: int, first: int) -> str:
    return ", ".join(f"%{first + k}" for k in range(rank))


def copy_function(direction: Direction, rank: int, multicast: bool = False) -> str:
    """tp_bulk_load_<r>d(dst, tmap, bar, c0..) / tp_bulk_store_<r>d(tmap, src, c0..) /
    tp_bulk_load_multicast_<r>d(dst, tmap, bar, mask, c0..)."""
    cs = ", ".join(f"int c{k}" for k in range(rank))
    ins = ", ".join(f'"r"(c{k})' for k in range(rank))
    if multicast:
        return (f"__device__ __forceinline__ void tp_bulk_load_multicast_{rank}d(unsigned dst, const TmaDescriptor* "
                f"tmap, unsigned long long* bar, unsigned short mask, {cs}) {{\n"
                f'  asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes'
                f'.multicast::cluster [%0], [%1, {{{_coord_regs(rank, 4)}}}], [%2], %3;"\n'
                f'               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(tp_smem(bar)), '
                f'"h"(mask), {ins} : "memory"); }}')
    if direction is Direction.LOAD:
        return (f"__device__ __forceinline__ void tp_bulk_load_{rank}d(unsigned dst, const TmaDescriptor* tmap, "
                f"unsigned long long* bar, {cs}) {{\n"
                f'  asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes'
                f' [%0], [%1, {{{_coord_regs(rank, 3)}}}], [%2];"\n'
                f'               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(tp_smem(bar)), {ins}'
                f' : "memory"); }}')
    return (f"__device__ __forceinline__ void tp_bulk_store_{rank}d(const TmaDescriptor* tmap, unsigned src, {cs}) {{\n"
            f'  asm volatile("cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group'
            f' [%0, {{{_coord_regs(rank, 2)}}}], [%1];"\n'
            f'               :: "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(src), {ins} : "memory"); }}')


def prelude(ir: KernelIR, copies: list[TmaCopy]) -> list[str]:
    """The TMA and mbarrier helpers, where the kernel has TMA copies or mbarriers (a tcgen05.mma's
    commits), [] otherwise."""
    if not ir.tensor_maps and not copies and not ir.mbarriers:
        return []
    kinds = sorted({(c.direction, len(c.coords), c.multicast is not None) for c in copies if c.gmem is None},
                   key=lambda k: (k[0].value, k[1], k[2]))
    runs = BULK_RUN.splitlines() if any(c.gmem is not None for c in copies) else []
    runs += EXPECT_TX.splitlines() if any(c.arrive_when is not None for c in copies) else []
    return PRELUDE.splitlines() + runs + [copy_function(d, r, m) for d, r, m in kinds]


CLUSTER_SYNC = 'asm volatile("barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");'


def barrier_setup(barriers: list[MBarrier], cluster: int = 1) -> list[str]:
    """Declare, initialize (thread 0) and publish the mbarriers, to the block or (cluster > 1
    blocks) to the cluster, whose blocks arrive on each other's; each thread tracks its phase bits."""
    if not barriers:
        return []
    lines = [f"  __shared__ __align__(8) unsigned long long {b.name}{f'[{b.stages}]' if b.stages > 1 else ''};"
             + (f"  // tcgen05.commit of the MMA into {b.tensor}" if b.commit else
                f"  // TMA into {b.tensor}" + (" (one per stage)" if b.stages > 1 else "")) for b in barriers]
    lines.append("  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {")
    for b in barriers:
        lines += ([f"    tp_mbar_init(&{b.name}, {b.count}u);"] if b.stages == 1 else
                  [f"    for (int s = 0; s < {b.stages}; ++s) tp_mbar_init(&{b.name}[s], {b.count}u);"])
    lines.append("    tp_fence_async_smem();  // the initialized barriers, visible to the TMA unit")
    if cluster > 1:
        lines.append('    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // and to the cluster')
    lines.append("  }")
    lines.append(f"  {CLUSTER_SYNC}  // every block's mbarriers initialized before any block multicasts "
                 f"into it or arrives on them" if cluster > 1 else "  __syncthreads();")
    lines += [f"  unsigned {b.name}_phase = {phase_bits_init(empty=b.empty)};"
              + ("  // bit s: the phase stage s's mbarrier waits for next" if b.stages > 1 else "")
              + ("; 1: the stage was never filled, the first wait passes" if b.empty else "") for b in barriers]
    return lines


def _stage_wait(barrier: str, stage: str, why: str) -> list[str]:
    return [f"{{ const unsigned tp_s = {stage};",
            f"  tp_mbar_wait(&{barrier}[tp_s], ({barrier}_phase >> tp_s) & 1u);  // {why}",
            f"  {barrier}_phase ^= 1u << tp_s; }}"]


def wait(n: TmaWait, x) -> list[str]:
    """A wait flips the thread's phase bit of the mbarrier it waits on: a circular buffer's
    iteration i waits on stage i % stages's (x renders an Expr). Each pipelined loop loads every
    stage as often as it waits for it, so the bits carry over to the loop's next run."""
    if n.stages:
        return _stage_wait(n.barrier, f"(unsigned)(({x(var(n.index))}) % {n.stages})", n.why)
    return [f"tp_mbar_wait(&{n.barrier}, {n.barrier}_phase);  // {n.why}", f"{n.barrier}_phase ^= 1u;"]


def empty_wait(n: StageEmptyWait, x) -> list[str]:
    """The producer's wait for stage (i + ahead) % stages to be released (its phase bits start at
    1), by the threads of `guard` where it has one (the loads' issuers)."""
    i = x(var(n.index)) + (f" + {n.ahead}" if n.ahead else "")
    lines = _stage_wait(n.barrier, f"(unsigned)(({i}) % {n.stages})", n.why)
    if not n.guard:
        return lines
    cond = " || ".join("(" + " && ".join(f"{x(c.lhs)} {c.op} {x(c.rhs)}" for c in cs) + ")" for cs in n.guard)
    return [f"if ({cond}) {{"] + [f"  {line}" for line in lines] + ["}"]


def drain(n: StageDrain) -> list[str]:
    """The producer's wait for each stage's next phase (its last release), stage by stage."""
    return [f"for (unsigned tp_s = 0; tp_s < {n.stages}u; ++tp_s) {{  // {n.why}",
            f"  tp_mbar_wait(&{n.barrier}[tp_s], ({n.barrier}_phase >> tp_s) & 1u);",
            f"  {n.barrier}_phase ^= 1u << tp_s;",
            "}"]


LEADER = "((threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y) % 128u) == 0u"


def _arrive(bar: str, cluster: int) -> str:
    """One consumer warpgroup's release of `bar`: in its block, or in each block of its cluster."""
    if cluster == 1:
        return f"tp_mbar_arrive(&{bar});"
    return f"for (unsigned tp_cta = 0; tp_cta < {cluster}u; ++tp_cta) tp_mbar_arrive_cluster(&{bar}, tp_cta);"


def store_wait(n: BulkStoreWait) -> list[str]:
    """The TMA stores this thread issued have read their shared memory (execution/nest.py places
    it); complete: have written global memory too (PTX ISA cp.async.bulk.wait_group without .read),
    then the async proxy's global writes ordered before this thread's generic accesses
    (fence.proxy.async.global), for the barrier that follows to publish them to the block."""
    if n.complete:
        return [f'asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // {n.why}',
                'asm volatile("fence.proxy.async.global;" ::: "memory");']
    return [f"tp_bulk_store_wait();  // {n.why}"]


def release(n: StageRelease, x, cluster: int = 1) -> list[str]:
    """The first thread of each consumer warpgroup (every thread, where threads read the stages)
    arrives on the empty mbarrier of datum i - lag (in the loop), or of each of the last `lag`
    data (after it); in a cluster, on every block's."""
    if n.tail:
        e = x(n.extent)
        return [f"if ({'true' if n.every_thread else LEADER}) {{  // {n.why}",
                f"  for (unsigned long long tp_d = ({e}) > {n.lag}ULL ? ({e}) - {n.lag}ULL : 0ULL; tp_d < ({e}); "
                f"++tp_d) {{ {_arrive(f'{n.barrier}[tp_d % {n.stages}ULL]', cluster)} }}",
                "}"]
    i = x(var(n.index))
    ready = f" && ({i}) >= {n.lag}ULL" if n.lag else ""
    arrive = _arrive(f'{n.barrier}[(({i}) - {n.lag}ULL) % {n.stages}ULL]', cluster)
    if n.every_thread and not n.lag:  # each thread, after its own reads
        return [f"{arrive}  // {n.why}"]
    return [f"if ({'true' if n.every_thread else LEADER}{ready}) {{  // {n.why}", f"  {arrive}", "}"]


def copy(n: TmaCopy, x, smem_base: str, pointer=str) -> list[str]:
    """The issue, for the issuing threads (x renders an Expr, pointer a global tensor's C++
    name). A load's issuer arrives even
    where a hole skips the copy, so the phase still completes; where the copies of a phase are
    not a constant count (`arrive_when`), each copy issued announces its bytes alone and the
    issuer arrives once, at its last copy of the phase, whether a hole skipped it or not: the
    phase cannot complete before every copy's bytes are announced."""
    coords = ", ".join(f"(int){x(c)}" for c in n.coords)
    address = f"tp_smem({smem_base}) + (unsigned){x(n.smem_offset)}"
    rank = len(n.coords)
    bar = None if n.barrier is None else f"&{n.barrier}" if n.stage is None else f"&{n.barrier}[{x(n.stage)}]"
    if n.gmem is not None:  # a 1-D bulk copy: the run's first element, its bytes
        run, size = f"&{pointer(n.gmem)}[{x(n.gmem_offset)}]", f"(unsigned){x(n.nbytes)}"
        if n.direction is Direction.LOAD:
            issue = [_expect_tx(n, bar, size), f"tp_bulk_load_run({address}, {run}, {size}, {bar});"]
            return _guarded(n.issuer, n.bounds, issue, _skipped(n, bar), x, _last_arrival(n, bar, x))
        store = [f"tp_bulk_store_run({run}, {address}, {size});", "tp_bulk_store_commit();"]
        return _guarded(n.issuer, n.bounds, store, [], x)
    if n.direction is Direction.LOAD:
        issue = [_expect_tx(n, bar, f"(unsigned){x(n.nbytes)}"),
                 f"tp_bulk_load_{rank}d({address}, &{n.tensor_map}, {bar}, {coords});"]
        if n.multicast:  # every receiver expects the bytes; one block along the axis loads them for all
            axis, mask, issuer, stride = n.multicast
            base = f"(tp_cluster_ctarank() - tp_cluster_ctaid_{axis}() * {stride}u)"  # the axis's first block
            issue[1:] = [f'if (tp_cluster_ctaid_{axis}() == (unsigned)({x(issuer)})) tp_bulk_load_multicast_{rank}d('
                         f'{address}, &{n.tensor_map}, {bar}, (unsigned short)({mask}u << {base}), {coords});']
        return _guarded(n.issuer, n.bounds, issue, _skipped(n, bar), x, _last_arrival(n, bar, x))
    issue = [f"tp_bulk_store_{rank}d(&{n.tensor_map}, {address}, {coords});", "tp_bulk_store_commit();"]
    return _guarded(n.issuer, n.bounds, issue, [], x)


def _expect_tx(n: TmaCopy, bar: str, size: str) -> str:
    """A load's announcement of its bytes: with its arrival, or alone (`arrive_when`)."""
    return f"tp_mbar_expect_tx{'_only' if n.arrive_when is not None else ''}({bar}, {size});"


def _skipped(n: TmaCopy, bar: str) -> list[str]:
    """What a load's issuer does where a hole skips the copy: arrive, unless it arrives once per phase."""
    return [f"tp_mbar_arrive({bar});"] if n.arrive_when is None else []


def _last_arrival(n: TmaCopy, bar: str, x) -> list[str]:
    """The issuer's one arrival of the phase, at its last copy (`arrive_when`), after the copy."""
    if n.arrive_when is None:
        return []
    last = " && ".join(f"{x(c.lhs)} {c.op} {x(c.rhs)}" for c in n.arrive_when) or "true"
    return [f"if ({last}) tp_mbar_arrive({bar});  // the phase's last copy: every copy's bytes announced"]


def _guarded(issuer, bounds, body: list[str], otherwise: list[str], x, after: list[str] = ()) -> list[str]:
    def cond(cs) -> str:
        return " && ".join(f"{x(c.lhs)} {c.op} {x(c.rhs)}" for c in cs)

    inner = body
    if bounds:
        inner = [f"if ({cond(bounds)}) {{"] + [f"  {b}" for b in body] + ["}"]
        if otherwise:
            inner += ["else {"] + [f"  {b}" for b in otherwise] + ["}"]
    inner = inner + list(after)
    if issuer:
        return [f"if ({cond(issuer)}) {{"] + [f"  {b}" for b in inner] + ["}"]
    return inner
