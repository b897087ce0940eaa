"""What the code generator lowers, as pure functions that return the problems they find.

Each function below is one condition the lowering needs; an empty list means the fusion meets
it. The verifier reports the problems (verifier/rules/lowering.py, one rule code per function),
and the code generator calls the same functions for what it cannot emit and raises InternalError
on a problem (codegen/lower/loop_nest.py NotLowered), since the verifier should have rejected the
schedule. So a verified schedule compiles. REGISTER-BUDGET (a warning) and UNROLL-LENGTH guard
compile time and register use; codegen emits such kernels (tileproof.testing.compile_unverified).

    launch_axis_clashes   PARALLEL-TYPE-UNIQUE    a thread/block index names one loop axis per tensor
    symbolic_registers    REGISTER-SIZE-CONSTANT  register (Local) tensors have a compile-time size
    register_budget       REGISTER-BUDGET         register tensors fit 255 32-bit registers per thread (warning)
    local_memory          LOCAL-MEMORY-SIZE       a thread's register tensors fit its 512 KiB of local memory
    unroll_lengths        UNROLL-LENGTH           unrolled loops repeat statements at most 1024 times
    symbolic_factors      SYMBOLIC-FACTOR         split factors are ints or extent symbols
    loop_groups           INLINE-LOOP-MAP, INLINE-PARALLEL-MATCH: inlined loops are one loop
    nest / nest_problems  LOOP-NEST-ORDER         the loops nest around the statements in order
    global_intermediates  GLOBAL-INTERMEDIATE     intermediates live on chip
    unsupported_features  LOWERING-SUPPORTED      ops and features the code generator lowers

The loop structure (execution_order, loop_groups, nest) lives here too: the code generator
builds its loops from it (codegen/lower/loop_nest.py), so the rules check the loops that are emitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping



@dataclass(frozen=True)
class Problem:
    """One reason a fusion cannot be lowered: `message` lowercase with the numbers, `values`
    those numbers by name (a diagnostic's counterexample), `hint` the fix."""

    message: str
    hint: str
    tensor: str | None = None
    ids: tuple[str, ...] = ()
    values: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    location: str | None = None

    def __str__(self) -> str:
        return self.message
