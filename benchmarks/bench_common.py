"""What the GPU benchmarks (gpu_kernels.py, reductions.py, matmul.py) share: recording a job that
may fail, and a kernel's launch configuration for the JSON."""

from __future__ import annotations

import traceback


def attempt(results: dict, key: str, fn) -> None:
    """results[key] = fn(), or {"error": ...} when it raises (the run goes on)."""
    try:
        results[key] = fn()
    except Exception as e:  # noqa: BLE001 - a failed entry is recorded, not fatal
        results[key] = {"error": f"{type(e).__name__}: {e}".strip()[:2000],
                        "traceback": traceback.format_exc(limit=4)[-2000:]}


def launch_info(kernel, **sizes) -> dict:
    """Grid, block and dynamic shared memory of `kernel` (at `sizes` for a symbolic one); a value
    that is not an int (an unbound extent) is written as text."""
    p = kernel.launch_params_for(**sizes) if sizes else kernel.launch_params

    def value(v):
        return v if isinstance(v, int) else str(v)

    return {"grid": [value(v) for v in p.grid], "block": [value(v) for v in p.block],
            "smem_bytes": value(p.shared_memory_bytes)}
