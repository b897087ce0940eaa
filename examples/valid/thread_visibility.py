"""The schedules of examples/invalid/thread_visibility.py, fixed: each register element is
read by the thread that wrote it, or the hand-off between threads goes through shared
memory (THREAD-VISIBILITY)."""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.accepted())
def broadcast_registers_in_every_thread():
    """T2 left serial: every thread of T3 computes all four rows of T2 into its own registers
    and reads row t / 8 of them (4 registers per thread, no hand-off between threads)."""
    with tp.Fusion("broadcast_registers_in_every_thread") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, 8])
        t1 = tp.make_contig_concrete_tensor([4])
        fusion.add_input(t0)
        fusion.add_input(t1)
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.add(t0, t2)
        fusion.add_output(t3)
    t3.merge(0)
    t3.axis(0).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def registers_handed_over_through_shared_memory():
    """registers_on_tidx_read_on_tidy with T1 in shared memory: threads of one block see
    each other's shared-memory stores (after the barrier the code generator places)."""
    with tp.Fusion("registers_handed_over_through_shared_memory") as fusion:
        t0 = tp.make_contig_concrete_tensor([32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.axis(0).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.TIDy)
    return fusion


@tp.schedule(expect=tp.accepted())
def registers_stored_by_their_threads():
    """registers_stored_by_thread_zero with T2 on T1's threads."""
    with tp.Fusion("registers_stored_by_their_threads") as fusion:
        t0 = tp.make_contig_concrete_tensor([128])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.axis(0).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.TIDx)
    return fusion
