"""Every schedule of seed 000 (the nvFuser tensor-memory tutorial), translated into the
schedule files under examples/, verifies to the verdict it declares; plus the seed's
numbers checked explicitly, and verification time."""

from __future__ import annotations

import importlib.util
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import tileproof as tp
from tileproof.schedule_files import discover

EXAMPLES = Path(__file__).parents[2] / "examples"
CASES = discover([str(EXAMPLES)])
BY_NAME = {c.name: c for c in CASES}

# The seed-000 schedules and the verdict each must get (name -> file it lives in). The
# schedule files declare the full expectations; this list makes sure none goes missing.
SEED_CASES = {
    "gsg_copy_naive": "valid/gsg_copy.py",
    "gsg_copy_bidx": "valid/gsg_copy.py",
    "gsg_copy_inline1": "valid/gsg_copy.py",
    "gsg_copy_inline1_bidx": "valid/gsg_copy.py",
    "gsg_copy_inline1_tidx": "valid/gsg_copy.py",
    "gsg_copy_inline1_tidx_bidx": "valid/gsg_copy.py",
    "too_many_lanes": "invalid/tmem_allocation.py",
    "too_many_cols": "invalid/tmem_allocation.py",
    "not_warp_collective": "invalid/tmem_access.py",
    "not_contiguous": "invalid/tmem_access.py",
    "one_lane": "invalid/tmem_access.py",
    "wrong_subpartition": "invalid/tmem_access.py",
    "wrong_subpartition2": "invalid/tmem_access.py",
    "warp_xyz": "valid/tmem_access.py",
    "warp_group_xyz": "valid/tmem_access.py",
    "warp_group_xy_col_z": "valid/tmem_access.py",
    "warp_group_x_col_yz": "valid/tmem_access.py",
    "x1_warp_group_y_col_z": "valid/tmem_access.py",
    "complicated1": "valid/tmem_complicated.py",
    "complicated2": "valid/tmem_complicated.py",
    "tmem_transpose": "valid/tmem_transpose.py",
    "performant_vectorized_copy": "valid/tmem_performant_copy.py",
    "performant_vectorized_copy_unaligned": "invalid/tmem_performant_copy_unaligned.py",
}
VEC = [1, 2, 4, 8, 16, 32, 64, 128]
SEED_CASES.update({f"tmem_vectorization[st_vec={s},ld_vec={l}]": "valid/tmem_vectorization.py" for s in VEC for l in VEC})


def _load_example_module(rel: str):
    path = EXAMPLES / rel
    spec = importlib.util.spec_from_file_location(f"_seed_example_{path.stem}_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _verify(case):
    fusion = case.build()
    assert isinstance(fusion, tp.Fusion), f"{case.name} must return its Fusion"
    return fusion, tp.verify(fusion, target=case.target)


def _allocation_of(fusion):
    return lambda tensor, key: getattr(tp.allocation(fusion.tensor(tensor)), key)


def _describe(report) -> str:
    return "\n".join(f"  {d.code}: {d.message}" for d in report.diagnostics) or "  (no diagnostics)"


# -- every schedule file verifies as declared -------------------------------------------


def test_every_seed_schedule_is_translated():
    missing = sorted(set(SEED_CASES) - set(BY_NAME))
    assert not missing, f"seed-000 schedules missing from examples/: {missing}"
    for name, rel in SEED_CASES.items():
        loc = BY_NAME[name].location or ""
        assert rel in loc.replace("\\", "/"), f"{name} should live in examples/{rel}, found at {loc}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_schedule_file_verdict(case):
    """The verdict the file declares, and exactly the warnings it declares
    (tp.accepted(warnings=...) or tp.rejected(..., warnings=...)), accepted or rejected:
    `tileproof verify examples/` prints no other."""
    fusion, report = _verify(case)
    problems = case.expect.mismatches(report, _allocation_of(fusion))
    undeclared = sorted({d.code for d in case.expect.unexpected_warnings(report)})
    if undeclared:
        verdict = "accepted" if case.expect.ok else "rejected"
        problems.append(f"warning {', '.join(undeclared)} not declared in tp.{verdict}(warnings=...)")
    assert problems == [], f"{case.name}: " + "; ".join(problems) + "\n" + _describe(report)


# -- the seed's numbers, explicitly ----------------------------------------------------------


def _diag(report, code):
    found = [d for d in report.diagnostics if d.code == code]
    assert found, f"no {code} diagnostic; got:\n{_describe(report)}"
    return found[0]


def test_too_many_lanes_numbers():
    fusion, report = _verify(BY_NAME["too_many_lanes"])
    assert not report.ok
    a = tp.allocation(fusion.tensor("T2"))
    assert a.lanes == 429  # 3 * 11 * 13 (seed: "tried to allocate 429, but only 128 available")
    assert a.columns == 17
    msg = _diag(report, "TMEM-LANES").message
    assert "429" in msg and "128" in msg, msg


def test_too_many_cols_numbers():
    fusion, report = _verify(BY_NAME["too_many_cols"])
    assert not report.ok
    a = tp.allocation(fusion.tensor("T2"))
    assert a.lanes == 32
    assert a.columns == 1105  # 5 * 13 * 17 (seed: "tried to allocate 1105, but only 512 available")
    msg = _diag(report, "TMEM-COLUMNS").message
    assert "1105" in msg and "512" in msg, msg


@pytest.mark.parametrize("name,floats", [
    ("gsg_copy_naive", 8),
    ("gsg_copy_bidx", 2),
    ("gsg_copy_inline1", 4),
    ("gsg_copy_inline1_bidx", 1),
    ("gsg_copy_inline1_tidx", 8),
    ("gsg_copy_inline1_tidx_bidx", 2),
])
def test_gsg_copy_smem_bytes(name, floats):
    fusion = BY_NAME[name].build()
    assert tp.allocation(fusion.tensor("T1")).bytes == floats * 4
    assert tp.verify(fusion, target="sm_90a").ok


@pytest.mark.parametrize("name", ["complicated1", "complicated2"])
def test_complicated_allocates_64_columns(name):
    fusion, report = _verify(BY_NAME[name])
    a = tp.allocation(fusion.tensor("T2"))
    assert a.lanes == 128
    assert a.columns == 64
    assert a.columns_allocated == 64
    assert report.ok, _describe(report)


def test_performant_vectorized_copy_32_columns():
    fusion, report = _verify(BY_NAME["performant_vectorized_copy"])
    a = tp.allocation(fusion.tensor("T2"))
    assert a.lanes == 128
    assert a.columns == 16  # TIDy{2} * Serial{2} * Vec'{4}
    assert a.columns_allocated == 32  # the minimum allocation unit
    assert report.ok, _describe(report)


def test_performant_vectorized_copy_unaligned_is_rejected_for_divisibility():
    fusion, report = _verify(BY_NAME["performant_vectorized_copy_unaligned"])
    assert report.codes == ["SPLIT-DIVISIBILITY"], _describe(report)


@pytest.mark.parametrize("st_vec", VEC)
@pytest.mark.parametrize("ld_vec", VEC)
def test_vectorization_columns(st_vec, ld_vec):
    fusion, report = _verify(BY_NAME[f"tmem_vectorization[st_vec={st_vec},ld_vec={ld_vec}]"])
    want = max(st_vec, 32) if st_vec == ld_vec else 256
    assert tp.allocation(fusion.tensor("T2")).columns_allocated == want
    assert report.ok, _describe(report)


def test_complicated1_at_4096():
    mod = _load_example_module("valid/tmem_complicated.py")
    fusion = mod.complicated1_schedule(4096, 4096)
    report = tp.verify(fusion, target="sm_100a")
    assert report.ok, _describe(report)
    assert tp.allocation(fusion.tensor("T2")).columns_allocated == 64


def test_complicated1_same_schedule_at_64():
    """The seed's Complicated1 schedule, unchanged, on a 64 x 64 tensor. Its factors were
    chosen for 4096 x 4096: the row axis is split into [2, 16, 8, 2, 8, 1] (2048 | rows
    needed) and the column axis into [2, 4, 8, 64] (2048 | cols needed); at 64 x 64 the
    splits by 8 and 4 (columns) and 8 and 16 (rows) act on extents 1 and 4, which they do not
    divide. These splits are in the transforms of the tensor-memory tensor: SPLIT-DIVISIBILITY.
    And fancy_transformations' third XOR swizzle pairs an axis of 64 with one of 64/64 = 1
    (x ^ y leaves [0, 1)): SWIZZLE-BIJECTIVITY. The tensor-memory rules hold: lanes
    TIDy{8} * TIDx{8} = 64 (lane = t), columns 64, 64 threads in whole warps, warp w on
    lanes 32w..32w+31. The 4096 x 4096 schedule is the seed's accepted one."""
    mod = _load_example_module("valid/tmem_complicated.py")
    fusion = mod.complicated1_schedule(64, 64)
    report = tp.verify(fusion, target="sm_100a")
    assert report.codes == ["SPLIT-DIVISIBILITY", "SWIZZLE-BIJECTIVITY"], _describe(report)


# -- verification time ----------------------------------------------------------------


def _median_verify_seconds(case, repeats=5) -> float:
    """Median of `repeats` verifications of one built fusion, in CPU seconds of this process
    (verification is single-threaded; time a loaded CI machine spends running other workers
    does not count). Stops early, with the first time, when a run takes over 3 s."""
    fusion = case.build()
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        tp.verify(fusion, target=case.target)
        times.append(time.process_time() - t0)
        if times[0] > 3.0:
            break
    return statistics.median(times)


def test_seed_examples_verify_fast(capsys):
    """Goal: every seed example verifies in under 0.5 s (median of 5); the assertion allows
    1.0 s so that a loaded CI machine does not fail it. Medians are printed."""
    medians = {c.name: _median_verify_seconds(c) for c in CASES if c.name in SEED_CASES}
    mod = _load_example_module("valid/tmem_complicated.py")
    for rows in (64, 4096):
        fusion = mod.complicated1_schedule(rows, rows)
        case = SimpleNamespace(build=lambda f=fusion: f, target="sm_100a")
        medians[f"complicated1_schedule({rows}x{rows})"] = _median_verify_seconds(case)
    with capsys.disabled():
        print("\nverification time (median of 5):")
        for name, s in sorted(medians.items(), key=lambda kv: -kv[1]):
            flag = "  (over the 0.5 s goal)" if s >= 0.5 else ""
            print(f"  {s * 1000:8.1f} ms  {name}{flag}")
    slow = {n: round(s, 3) for n, s in medians.items() if s >= 1.0}
    assert not slow, f"seed examples slower than 1 s to verify: {slow}"
