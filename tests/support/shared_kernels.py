"""The bundled examples' kernels, compiled once a session and shared by the tests that check them:
tests/codegen/test_accepted_compiles.py compiles every accepted valid example (NVRTC), and
test_codegen.py (every one it lowers, for sm_90a), test_codegen_tmem.py (the tensor-memory ones, for
sm_100a) and test_codegen_tma.py (the TMA ones) check the kernels of those very schedules; their
private_cache empties tp.compile's memory cache before each test, which would compile them all
again. A kernel is kept under tp.compile's own key, the schedule's fingerprint for the target
(model/fingerprint.py: fusions of one fingerprint lower to the same kernel), so it is shared with
an identical schedule only; a test that runs first (alone, or in another order) compiles its own."""

from __future__ import annotations

import tileproof as tp
from tileproof.model.fingerprint import fingerprint
from tileproof.model.targets import get_target

KERNELS: dict[str, object] = {}  # fingerprint -> Kernel


def _key(fusion, target: str) -> str:
    return fingerprint(fusion, get_target(target).name)


def keep(fusion, target: str, kernel) -> None:
    """Share `kernel`, which tp.compile made of `fusion` for `target`."""
    KERNELS[_key(fusion, target)] = kernel


def compiled(fusion, target: str):
    """tp.compile(fusion, target), or the kernel kept for an identical schedule."""
    key = _key(fusion, target)
    if key not in KERNELS:
        KERNELS[key] = tp.compile(fusion, target)
    return KERNELS[key]
