"""Assumptions no size satisfies (ASSUMPTIONS-SATISFIABLE): every proof would hold vacuously.

examples/valid/assumptions.py holds the fixed schedules.
"""

import tileproof as tp


def _copy(name):
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.split(0, 4)
    t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("ASSUMPTIONS-SATISFIABLE", messages=["no size satisfies T0_0 > 10 and T0_0 < 5"]))
def contradictory_bounds():
    """Each assumption is satisfiable alone, not together; the vectorized split by 4 would be
    "proved" divisible for the empty set of sizes."""
    fusion = _copy("contradictory_bounds")
    fusion.assume("T0_0 > 10")
    fusion.assume("T0_0 < 5")
    fusion.assume("T0_0 % 4 == 0")
    return fusion


@tp.schedule(expect=tp.rejected("ASSUMPTIONS-SATISFIABLE"))
def size_beyond_the_admitted_range():
    """A 16 GiB tensor has 2^32 floats, but symbolic extents are proved for 1 .. 2^31 - 1
    (32-bit indexing): no admitted size satisfies the assumption."""
    fusion = _copy("size_beyond_the_admitted_range")
    fusion.assume("T0_0 >= 2**32")
    fusion.assume("T0_0 % 4 == 0")
    return fusion
