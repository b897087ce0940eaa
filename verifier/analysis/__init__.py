"""Analysis shared by rules and by codegen; rules import analysis, never each other.

    async_order.py   the abstract run of the placed nest (its loops to a fixed point, the path of each
                     violation) that wgmma_order.py and tcgen05_order.py share, and their findings
    assumptions.py   whether some size satisfies a fusion's assumptions and bindings (a witness)
    bank_lanes.py    shared-memory banks lane by lane at a counterexample's point: a conflict's
                     degree, why a swizzle does not separate its lanes, a swizzle call that does
    ldsm.py          the ldmatrix / stmatrix access model and the terms the LDSM rules prove
    smem_operands.py the descriptor of each wgmma / tcgen05.mma shared operand proved valid and read
                     where the schedule put each element (WGMMA-SMEM-LAYOUT, TCGEN05-SMEM-LAYOUT)
    swizzle_axes.py  a user's swizzle call in its own axis numbers, and a copy of the fusion
                     with that call aimed at other axes (to verify a proposed fix)
    tcgen05_order.py TCGEN05-ASYNC-ORDER's abstract run of the placed nest: tcgen05.mma's commits and
                     the waits on their mbarriers before the accumulators' readers
    tma.py           the TMA each TMA op implies (model/tma.py), inferred once per fusion, and
                     the split that made a dimension's box (for hints)
    tma_issues.py    each TMA's access model and issue functions, for the TMA shared-memory
                     rules and CLUSTER-MULTICAST
    tmem.py          tensor-memory access models with lanes and columns; which accesses are
                     warp-collective and which tcgen05 pattern each matches (codegen/lower/tmem.py
                     lowers exactly what these proved)
    tmem_holes.py    whether a tcgen05 access run at the holes of an indivisible split stays in
                     its tensor's allocation and (a store) off every valid element's cell
    visibility.py    the claims that a reader's block / thread wrote what it reads, and their
                     proofs (the visibility rules and the tensor-core layout rules)
    visibility_report.py  the findings of a failing visibility claim: the element misread, who wrote
                     it, the fix (for a fragment: the lane and the fragment map)

May import model/, hw/, execution/ and verifier's access.py, context.py, solver.py and findings.py; never
verifier/rules/, codegen/ or reports/.
"""
