"""Performance warnings: GLOBAL-COALESCING counts the sectors of the first warp's access,
GRID-SIZE compares the grid with the target's SMs."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def copy(shape, dtype=tp.float32):
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_tensor(shape, dtype=dtype); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    return fusion, t1


def warnings_of(fusion, code, target="sm_90a"):
    report = tp.verify(fusion, target)
    assert report.ok
    return [d for d in report.warnings if d.code == code]


def test_a_warp_walking_a_column_moves_a_sector_per_lane():
    fusion, t1 = copy([1024, 1024])
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.BIDx)
    found = warnings_of(fusion, "GLOBAL-COALESCING")
    assert len(found) == 2  # the load from T0 and the store to T1
    assert all(d.counterexample["sectors"] == 32 and d.counterexample["bytes used"] == 128 for d in found)


def test_rows_and_vectors_are_coalesced():
    fusion, t1 = copy([1024, 1024])
    t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.TIDx)
    assert not warnings_of(fusion, "GLOBAL-COALESCING")
    fusion, t1 = copy([1024, 1024])
    t1.split(1, 4)
    t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.TIDx); t1.axis(2).parallelize(P.Vectorize)
    assert not warnings_of(fusion, "GLOBAL-COALESCING")


def test_half_used_sectors_are_reported_with_the_fraction():
    fusion, t1 = copy([64, 1024])
    t1.split(1, 2)  # lane l reads elements 2l and 2l + 1 in two instructions: half of each sector
    t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.TIDx)
    (d,) = [d for d in warnings_of(fusion, "GLOBAL-COALESCING") if "load" in d.message]
    assert d.counterexample["sectors"] == 8 and d.counterexample["sectors needed"] == 4
    assert "50% of the moved bytes are used" in d.message


def test_symbolic_sizes_are_sampled_within_the_assumptions():
    fusion, t1 = copy(["M", "N"])
    fusion.assume("N % 8192 == 0")
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.BIDx)
    fusion.assume("M <= 1024")
    found = warnings_of(fusion, "GLOBAL-COALESCING")
    assert found and all(d.counterexample["N"] % 8192 == 0 for d in found)


def test_a_grid_smaller_than_the_gpu_is_reported_with_the_target_sms():
    fusion, t1 = copy([8, 262144])
    t1.split(1, 1024)
    t1.axis(0).parallelize(P.BIDx); t1.axis(2).parallelize(P.TIDx)
    (d,) = warnings_of(fusion, "GRID-SIZE")
    assert d.counterexample["blocks"] == 8 and d.counterexample["SMs"] == 132
    (d,) = warnings_of(fusion, "GRID-SIZE", "sm_100a")
    assert d.counterexample["SMs"] == 148


def test_small_kernels_and_growing_grids_are_not_reported():
    fusion, t1 = copy([8, 1024])  # 8192 elements: the launch costs more than idle SMs
    t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.TIDx)
    assert not warnings_of(fusion, "GRID-SIZE")
    fusion, t1 = copy(["N"])  # ceil(N / 128) blocks grow with N
    t1.split(0, 128)
    t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.TIDx)
    assert not warnings_of(fusion, "GRID-SIZE")


def test_a_symbolic_grid_bounded_by_an_assumption_is_reported_at_a_natural_size():
    fusion, t1 = copy([64, "N"])
    fusion.assume("N >= 65536")
    t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.Serial)
    (d,) = warnings_of(fusion, "GRID-SIZE")
    assert d.counterexample["blocks"] == 64 and d.counterexample["N"] == 65536  # the smallest admitted N


def test_a_vectorize_axis_wider_than_any_vector_is_not_sampled():
    """fuzz seed 21 case 4147 took 105 s: a Vectorize axis of extent M * N was sampled element
    by element (16M per lane). Such an axis is no vector access (VECTORIZE-WIDTH rejects it)."""
    from tileproof.verifier.context import VerifyContext
    from tileproof.verifier.rules import perf

    fusion, t1 = copy(["M", "N"])
    t1.merge(0)
    t1.axis(0).parallelize(P.Vectorize)
    ctx = VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))
    (store, load) = sorted(ctx.accesses_to(tp.MemoryType.Global), key=lambda a: a.input_index)
    assert perf._warp_bytes(ctx, load, {"M": 4096, "N": 4096}) is None
