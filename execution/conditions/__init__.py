"""The structural conditions the code generator needs of a schedule, one module per rule family
(named as its verifier/rules/<family>.py): each function returns the Problems it finds, the
verifier's rule of that family reports them, and the code generator refuses a fusion that has one
as a tileproof bug (the verifier rejected it first).

    lowering.py              loop nests, launch axes, registers and local memory, unroll lengths,
                             symbolic factors, intermediates in global memory, what is lowered at all
    pipeline.py              circular buffers: stages, prefetch, the copies a pipeline lowers
    broadcast_loops.py       loops over broadcasts that run once: their index reaches no address
    warp_specialization.py   producer and consumer roles, setmaxnreg's counts
    cluster.py               thread-block clusters and multicast
    reduction.py             where a reduction's axes run and its accumulators fit
    mma.py                   the tensor-core conditions (MMA-*), registers per wgmma instruction
    cp_async.py              cp.async's structure and zero fill

May import model/, hw/ and execution/.
"""
