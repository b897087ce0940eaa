"""Rule families, one module each; importing this package registers every rule (verify.py
imports it). A rule module imports the verifier's registry, findings, solver, context and
analysis/, never another rule module.

The order of the imports below is the order the rules are registered in, which is the order
verify runs them and a report lists their findings: keep it, and add a new family at the end.
"""

from . import (  # noqa: F401
    alloc, assumptions, bank, lowering, tma, tma_smem, cluster, cp_async, divisibility, ldsm, visibility, mma,
    perf, pipeline, races, reduction, swizzle, tma_consumer, tmem, vectorize, warp_specialization, wgmma, bulk_copy,
    online, tcgen05,
)
