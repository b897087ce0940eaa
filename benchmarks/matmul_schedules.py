"""The matmul benchmark's tileproof schedules (benchmarks/matmul.py, issue 12).

SCHEDULES maps a name to (dtype, builder): dtype "tf32" (float32 operands, tensor cores in tf32)
or "bf16" (bfloat16 operands); builder(M, N, K) returns a tp.Fusion computing
D[M, N] = sum_k A[M, 1, K] B[1, N, K] in float32. The operands' memory layout is the one their
allocation domains say (the benchmark builds its inputs that way, and times cuBLAS and Triton on
the same layout). benchmarks/matmul.py times every entry; add a schedule by adding an entry.
"""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "valid"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import mma as _mma  # noqa: E402  (examples/valid/mma.py)

SIZE = 8192  # M = N = K


def moye_double_buffered(m, n, k):
    """The seed's double-buffered kernel as the seed schedules it (examples/valid/mma.py): block
    tile 128 x 128 x 16, four warps, m16n8k8 tf32, A M-major, B K-major, two cp.async stages, the
    fragments read from shared memory element by element."""
    return _mma.moye_double_buffered(m, n, k)


SCHEDULES = {
    "moye_double_buffered": ("tf32", moye_double_buffered),
}

DTYPES = ("tf32", "bf16")
