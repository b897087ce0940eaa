"""What the kernel does, derived once per fusion and target: the only source of execution facts
for the verifier (which proves them), the code generator (which renders them) and the reports
(which draw them).

    statements.py        each tensor's statement: loop indices, ranges, predicates (TensorExecution)
    predicates.py        which predicates a statement's kernel checks, and the claims (proved by the
                         verifier, recorded on its Report) that drop more or that instructions need
    accesses.py          each access to shared or tensor memory per thread, point and register
    indexing.py          index maps from the IterDomain graph; promotion.py, loops promoted through merges
    allocation.py        what is allocated for a tensor; smem_plan.py, where shared buffers sit;
                         tmem_regions.py, which tensor-memory tensors share a tcgen05.alloc region
    clipped_holes.py     statements that run at their holes unpredicated; zero_padding.py, past K on zeros
    loops.py             execution order, loop groups and the nest of loops around the statements
    conditions/          the structural conditions codegen needs, one module per rule family;
                         problems.py, the Problem they return
    nest.py              the placed nest: every sync, placed once (barriers, then pipelines, then wgmma,
                         then tcgen05.mma)
    barriers.py          hazards, __syncthreads, mbarrier and async-group waits
    circular.py          which tensors are circular-buffered, over which loop, with which option
    pipeline.py          circular buffers placed on the nest and the timeline the pipeline proofs read
    warp_roles.py        warp specialization: producer and consumer roles, setmaxnreg
    wgmma_order.py       wgmma fences and waits; wgmma_operands.py, the shared operands and descriptors
                         (of tcgen05.mma too)
    tcgen05_order.py     tcgen05.mma's commits and the waits on their mbarriers; tcgen05.py, its
                         accumulator cells in tensor memory and its instruction descriptor
    tma_issue.py         one TMA instruction per loop point; cp_async.py, one cp.async per point
    mma.py               an MmaOp's Mma axes and fragments; mma_execution.py, its statement seen from
                         each fragment (conditions/mma.py: what its schedule needs)
    reduction.py         init / accumulate / combine / store of a reduction
    cluster.py           thread-block clusters and TMA multicast

May import model/ and hw/; never verifier/, codegen/ or reports/. No z3.
"""
