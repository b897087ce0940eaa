"""A tensor that binds one launch index to two loop axes gets PARALLEL-TYPE-UNIQUE alone: the
visibility rules do not try to prove anything about its (ill-defined) thread or block index.
Found by the fuzzer (seed 21, case 7799): SMEM-BLOCK-VISIBILITY spent 5.8 s in one z3 check."""

from __future__ import annotations

import time
from pathlib import Path

import tileproof as tp
from tileproof.schedule_files import discover

ROOT = Path(__file__).resolve().parents[2]


def test_two_block_axes_are_rejected_by_parallel_type_unique_quickly():
    case = next(c for c in discover([str(ROOT / "examples" / "valid" / "tma_smem.py")])
                if c.name.startswith("swizzle_128b_padded_15_rows"))
    fusion = case.build()
    t1, t2 = (next(t for t in fusion.tensors if t.name == n) for n in ("T1", "T2"))
    t1.axis(3).parallelize(tp.ParallelType.BIDx)
    t2.axis(1).parallelize(tp.ParallelType.TIDx)
    start = time.process_time()
    report = tp.verify(fusion, "sm_90a")
    assert time.process_time() - start < 2.0
    assert "PARALLEL-TYPE-UNIQUE" in report.codes
    assert not {"SMEM-BLOCK-VISIBILITY", "THREAD-VISIBILITY", "GLOBAL-VISIBILITY"} & set(report.codes)
