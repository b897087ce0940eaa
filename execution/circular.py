"""Circular buffering of cp.async copies over a serial loop (and of register tiles over an
unrolled one), and the order in which a loop issues, commits, waits for and reads a
circular-buffered tensor.

Circular buffering (nvFuser's TensorView::circularBuffer, its Pipelined form):
`tv.circular_buffer(stages, prefetch)` on a shared tensor a cp.async fills inside a serial loop
(the circular loop: tv's loop axis just left of its compute-at position) allocates `stages`
tiles; iteration i's data lives in tile i % stages (Allocation.stage_offset). insert_pipelines
rewrites the loop nest, after model/barriers.py placed the other barriers:

    Prologue        before the loop: for p in [0, P): the copy of iteration p (if p < extent),
                    then commit                                          (P = prefetch)
    loop i:         cp.async.wait_group P - 1           (iteration i's group is complete)
                    __syncthreads                       (read after write: every thread's copies;
                                                         write after read: iteration i - 1's reads)
                    Prefetched: the copy of iteration i + P (if i + P < extent), into stage
                    (i + P) % S, which iteration i + P - S <= i - 1 read; commit
                    ... the readers of stage i % S ...

One barrier per iteration orders both hazards where 1 <= P <= S - 1 (CUTLASS's multistage order;
nvFuser issues the refill first and needs a second barrier at the end when P = S - 1). With
P = 0 the loop issues, commits and waits for its own copies before the barrier. With P >= S the
refill comes before the read: PIPELINE-WAR rejects it, PIPELINE-STAGES too. A loop shorter than
the prologue simply issues fewer copies (the predicates), and the groups stay counted since every
iteration commits one group, empty or not.

Registers (nvFuser's circular buffering of shared-memory reads): a register tensor a plain copy
or ldmatrix fills from shared memory, circular-buffered over its loop (the k-slice loop of a
matmul, unrolled), is pipelined the same way without commits, waits or barriers, since a
thread's registers are its own and program order orders them:

    Prologue        before the loop: for p in [0, P): the copy of iteration p (if p < extent)
    loop i:         Prefetched: the copy of iteration i + P (if i + P < extent), into stage
                    (i + P) % S; ... the readers of stage i % S ...

So the load of the next fragments is issued before the tensor-core instructions of this one,
into other registers. Its sources must be complete before the loop starts (PIPELINE-STAGES):
the prefetched copy reads iteration i + P's data in iteration i.

A Timeline is what one iteration of the loop around a cp.async copy and one of its readers
does, step by step, taken from the loop nest with its barriers and waits placed
(model/barriers.py): ISSUE (the copy), COMMIT (cp.async.commit_group), WAIT
(cp.async.wait_group N), SYNC (__syncthreads) and READ (the reader's statement). Iteration k
of the loop reads the data of iteration k; its copy fills the data of iteration k + prefetch,
which lives in stage (k + prefetch) % stages of the tensor's buffer. Without circular
buffering prefetch is 0 and there is one stage.

The verifier's CPASYNC-WAIT, PIPELINE-RAW and PIPELINE-WAR rules decide from a Timeline, for a symbolic
iteration, that every read sees its own data complete and that no stage is refilled while
its previous data is still read (verifier/analysis/pipeline.py); the code generator emits the
nest the Timeline was read from. Pure data: no z3.
"""

from __future__ import annotations


from ..model.options import Pipelined, WarpSpecialized


def circular_axis(tv) -> int | None:
    """The position of tv's circular loop: its loop axis just left of its compute-at position
    (None where tv is not circular-buffered or not inlined)."""
    if getattr(tv, "circular", None) is None or tv.compute_at == 0:
        return None
    return tv.compute_at - 1


def circular_access(tv) -> tuple[int, int, int] | None:
    """What model/barriers.py needs of a circular-buffered copy: (stages, prefetch, the depth of
    its circular loop in the statement's loop path, which holds every loop axis left of it)."""
    pos = circular_axis(tv)
    return None if pos is None else (tv.circular.stages, tv.circular.prefetch, pos)


def specialization(tv) -> WarpSpecialized | None:
    """tv's WarpSpecialized circular buffering, None where it has none or is pipelined."""
    c = getattr(tv, "circular", None)
    return c.type if c is not None and isinstance(c.type, WarpSpecialized) else None


def war_mbarrier(tv) -> bool:
    """Whether tv's circular buffer is Pipelined(uses_mbarrier_for_war=True)."""
    c = getattr(tv, "circular", None)
    return c is not None and isinstance(c.type, Pipelined) and c.type.uses_mbarrier_for_war


def circular_tensors(fusion) -> list:
    """The tensors of `fusion` that circular_buffer was called on, in fusion order."""
    return [t for t in fusion.tensors if getattr(t, "circular", None) is not None]
