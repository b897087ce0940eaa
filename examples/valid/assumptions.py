"""The schedules of examples/invalid/assumptions.py, fixed: assumptions some size satisfies."""

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


@tp.schedule(expect=tp.accepted())
def consistent_bounds():
    fusion = _copy("consistent_bounds")
    fusion.assume("T0_0 > 10")
    fusion.assume("T0_0 < 500")
    fusion.assume("T0_0 % 4 == 0")
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GRID-SIZE",)))
def size_within_the_admitted_range():
    fusion = _copy("size_within_the_admitted_range")
    fusion.assume("T0_0 >= 2**30")
    fusion.assume("T0_0 % 4 == 0")
    return fusion
