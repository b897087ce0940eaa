"""Invalid schedules that read registers another thread wrote (THREAD-VISIBILITY). A
register belongs to one thread: a consumer reading a register tensor must run each read in
the thread that wrote the element. A kernel generated from these reads its own, unrelated
registers and stores wrong values without any fault. nvFuser rejects them ("Producer is
required to be in Global, Shared or Tensor Memory based on parallelization strategy").

examples/valid/thread_visibility.py holds the fixed schedules.
"""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.rejected("THREAD-VISIBILITY", messages=["only the thread with threadIdx.x = "]))
def broadcast_registers_on_fewer_threads():
    """T2 = broadcast(T1) holds one value per row of a [4, 8] sum, merged onto TIDx{4};
    T3 = T0 + T2 merged onto TIDx{32}: thread 9 reads row 1 of T2, which thread 1 holds."""
    with tp.Fusion("broadcast_registers_on_fewer_threads") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, 8])
        t1 = tp.make_contig_concrete_tensor([4])
        fusion.add_input(t0)
        fusion.add_input(t1)
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.add(t0, t2)
        fusion.add_output(t3)
    for t in (t2, t3):
        t.merge(0)
        t.axis(0).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("THREAD-VISIBILITY"))
def registers_on_tidx_read_on_tidy():
    """T1 in registers on TIDx{32}, T2 on TIDy{32}: the thread (x = 0, y = 5) stores element 5,
    which the thread (x = 5, y = 0) holds."""
    with tp.Fusion("registers_on_tidx_read_on_tidy") as fusion:
        t0 = tp.make_contig_concrete_tensor([32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.axis(0).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.TIDy)
    return fusion


@tp.schedule(expect=tp.rejected("THREAD-VISIBILITY", messages=["only the thread with threadIdx.x = "]))
def registers_stored_by_thread_zero():
    """T1 in registers on TIDx{128}; the output T2 is left serial, so thread 0 alone stores all
    128 elements (the single-writer predicate), 127 of which other threads hold."""
    with tp.Fusion("registers_stored_by_thread_zero") as fusion:
        t0 = tp.make_contig_concrete_tensor([128])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.axis(0).parallelize(P.TIDx)
    return fusion
