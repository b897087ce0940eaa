"""LAUNCH-GRID (issue 32, item 7: accepted => launches): gridDim.x <= 2^31 - 1, gridDim.y and
gridDim.z <= 65535 for every admitted size. The rule reads the grid the kernel is launched with
(execution/indexing.py grid_dims, the KernelIR's grid), its verdict matches enumeration over the
admitted sizes, a symbolic counterexample names the sizes, its hint's assumption makes the schedule
verify, and Kernel.run refuses the same grids with the target's limits."""

from __future__ import annotations

import math

import pytest

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.execution.indexing import grid_dims
from tileproof.model.expr import evaluate
from tileproof.testing import compile_unverified
from tileproof.verifier.context import VerifyContext

P = tp.ParallelType
BLOCKS = (P.BIDx, P.BIDy, P.BIDz)


def rows_on(block, rows, *, tile=1, assume=()):
    """T1 = set(T0) of [rows, 32]: rows in tiles of `tile` (a serial loop) on `block`, columns on TIDx."""
    with tp.Fusion("rows") as fusion:
        t0 = tp.make_contig_concrete_tensor([rows, 32]) if isinstance(rows, int) else tp.make_tensor([rows, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    for a in assume:
        fusion.assume(a)
    t1.split(0, tile)
    t1.axis(0).parallelize(block)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


def launch_grid_errors(fusion):
    return [d for d in tp.verify(fusion).errors if d.code == "LAUNCH-GRID"]


@pytest.mark.parametrize("block,rows,ok", [
    (P.BIDy, 65535, True), (P.BIDy, 65536, False), (P.BIDz, 65535, True), (P.BIDz, 70000, False),
    (P.BIDx, 70000, True),
])
def test_each_grid_dimension_has_its_limit(block, rows, ok):
    errors = launch_grid_errors(rows_on(block, rows))
    assert not errors if ok else [d.message for d in errors] == [
        f"gridDim.{block.cuda_name[-1]} is {rows}, over the hardware's limit of 65535"]


def test_the_rule_reads_the_grid_the_kernel_is_launched_with():
    fusion = rows_on(P.BIDy, "N", tile=128, assume=["N <= 8388480"])
    ctx = VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))
    kernel = lower(fusion.snapshot(), tp.get_target("sm_90a")).kernel
    assert ctx.grid_dims == grid_dims(fusion) == kernel.grid
    assert [evaluate(e, {"N": 8388480}) for e in kernel.grid] == [1, 65535, 1]


# (tile, largest admitted N, step): rejected exactly when some admitted N needs more than 65535 blocks
@pytest.mark.parametrize("tile,most,step", [(1, 65535, 1), (1, 65536, 1), (128, 8388480, 1), (128, 8388481, 1),
                                            (3, 196605, 1), (3, 196606, 1), (1000, 2**31 - 1, 1000), (7, 458752, 8)])
def test_the_verdict_is_that_of_every_admitted_size(tile, most, step):
    assume = [f"N <= {most}"] + ([f"N % {step} == 0"] if step > 1 else [])
    fusion = rows_on(P.BIDy, "N", tile=tile, assume=assume)
    fits = all(math.ceil(n / tile) <= 65535 for n in range(step, most + 1, step))
    errors = launch_grid_errors(fusion)
    smallest = next(n for n in range(step, most + 1, step) if math.ceil(n / tile) > 65535) if not fits else None
    assert not errors if fits else errors[0].counterexample == {"N": smallest, "gridDim.y": math.ceil(smallest / tile)}


def test_a_symbolic_counterexample_names_the_size_and_its_assumption_fixes_it():
    (d,) = launch_grid_errors(rows_on(P.BIDy, "N", tile=128))
    assert d.message == "gridDim.y is 65536 when N = 8388481, over the hardware's limit of 65535"
    assert d.counterexample == {"N": 8388481, "gridDim.y": 65536}
    assert d.notes == ["gridDim.y = ceil(N / 128), the largest extent parallelized on BIDy"]
    assert 'fusion.assume("N <= 8388480")' in d.hint and "BIDx" in d.hint
    assert tp.verify(rows_on(P.BIDy, "N", tile=128, assume=["N <= 8388480"])).ok


def test_a_merged_grid_over_two_sizes():
    """M * N / 512 blocks along x: beyond 2^31 - 1 for the largest sizes; fine under a bound of the
    product (a nonlinear claim, decided by z3)."""
    def merged(*assume):
        with tp.Fusion("merged") as fusion:
            t0 = tp.make_tensor(["M", "N"], contiguity=True)
            fusion.add_input(t0)
            t1 = tp.set(t0)
            fusion.add_output(t1)
        for a in assume:
            fusion.assume(a)
        t1.merge(0).split(0, 512)
        t1.axis(0).parallelize(P.BIDx)
        t1.axis(1).parallelize(P.TIDx)
        return fusion

    (d,) = launch_grid_errors(merged())
    sizes = {k: v for k, v in d.counterexample.items() if k in ("M", "N")}
    assert math.ceil(sizes["M"] * sizes["N"] / 512) == d.counterexample["gridDim.x"] > 2**31 - 1
    assert not launch_grid_errors(merged(f"M * N <= {(2**31 - 1) * 512}"))


def test_a_persistent_grid_is_its_constant_block_count():
    fusion = rows_on(P.BIDx, "N", tile=2**31)  # [ceil(N / 2^31) (a loop), 2^31 (blockIdx.x), 32]
    fusion.tensors[-1].axis(0).parallelize(P.Serial)
    fusion.tensors[-1].axis(1).parallelize(P.BIDx)
    (d,) = launch_grid_errors(fusion)
    assert d.message.startswith("gridDim.x is 2147483648") and "fusion.assume" not in d.hint
    fusion.tensors[-1].axis(1).parallelize(P.Serial)
    fusion.tensors[-1].axis(0).parallelize(P.BIDx)
    assert not launch_grid_errors(fusion)


@pytest.mark.parametrize("block", BLOCKS)
def test_kernel_run_refuses_the_same_grids(block):
    """The rejected schedule built anyway: the launch check names the dimension and the target's
    limit (Target.max_grid_dims, the rule's too)."""
    kernel = compile_unverified(rows_on(block, "N"))
    most = tp.get_target("sm_90a").max_grid_dims[BLOCKS.index(block)]
    assert kernel.launch_params_for(N=min(most, 2**31 - 1)).grid[BLOCKS.index(block)] == min(most, 2**31 - 1)
    if most < 2**31 - 1:
        with pytest.raises(tp.InputError, match=f"gridDim.{block.cuda_name[-1]} = {most + 1}; sm_90a allows {most}"):
            kernel.launch_params_for(N=most + 1)
