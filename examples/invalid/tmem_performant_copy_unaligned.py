"""PerformantVectorizedCopy (seed 000) without the size assumption: for a symbolic T0_0 the
splits by 4, 128, 2, 2 on the path to the vectorized tmem access (and in tv2's transforms)
need not divide (e.g. T0_0 = 1): SPLIT-DIVISIBILITY. Nothing else depends on T0_0: the
block is TIDx{128} x TIDy{2} whatever the size (warp-collective, 32x32b pattern and
subpartitions hold), lanes 128, columns 16 (32 allocated), vector of 8 32-bit elements."""

import importlib.util
from pathlib import Path

import tileproof as tp

_spec = importlib.util.spec_from_file_location(
    "_tileproof_example_performant_copy", Path(__file__).parent.parent / "valid" / "tmem_performant_copy.py"
)
_valid = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_valid)


@tp.schedule(
    expect=tp.rejected("SPLIT-DIVISIBILITY", allocations={"T2": {"columns_allocated": 32}}),
    target="sm_100a",
)
def performant_vectorized_copy_unaligned():
    return _valid.performant_vectorized_copy_schedule("performant_vectorized_copy_unaligned")
