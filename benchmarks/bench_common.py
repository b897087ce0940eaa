"""What the benchmark scripts share: where a run's JSON goes (results/<script>/<machine>.json, the
scheme benchmarks/README.md states), recording a job that may fail, and a kernel's launch
configuration for the JSON, and the GPU's clocks warmed before the first timing."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine_name(device: str | None) -> str:
    """The name a machine's results go under: the GPU's model, lowercase ("NVIDIA H100 80GB HBM3" ->
    "h100", "NVIDIA H200" -> "h200": the vendor dropped, then the first word with a digit), or
    "cpu" for a run that used no GPU (device None)."""
    if not device:
        return "cpu"
    words = [w for w in re.split(r"[\s_-]+", device.lower()) if w and w != "nvidia"]
    model = next((w for w in words if any(c.isdigit() for c in w)), "-".join(words))
    return re.sub(r"[^a-z0-9]+", "-", model).strip("-") or "gpu"


def results_path(script: str, device: str | None, variant: str = "") -> Path:
    """results/<script>/<machine>[_<variant>].json: the file a run of `script` on `device`
    overwrites. `variant` names what the run narrowed where that asks another question (fuzz.py's
    families, hopper_matmul.py's shapes); empty for the script's default run."""
    name = machine_name(device) + (f"_{variant}" if variant else "")
    return RESULTS / script / f"{name}.json"


def write_results(results: dict, path: Path, shown: str) -> None:
    """Write a run's JSON to `path` (its folder made), then print `shown` (its table) and where it went."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(shown)
    print(f"wrote {path}")


def cuda_device_name() -> str | None:
    """torch's name for GPU 0 ("NVIDIA H200"), or None where there is none; asked in a child
    process, so that the caller (fuzz.py, whose workers fork from it) never initializes CUDA."""
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name(0))"],
                           capture_output=True, text=True, check=False)
    lines = probe.stdout.strip().splitlines()
    return lines[-1] if probe.returncode == 0 and lines else None


def attempt(results: dict, key: str, fn) -> None:
    """results[key] = fn(), or {"error": ...} when it raises (the run goes on)."""
    try:
        results[key] = fn()
    except Exception as e:  # noqa: BLE001 - a failed entry is recorded, not fatal
        results[key] = {"error": f"{type(e).__name__}: {e}".strip()[:2000],
                        "traceback": traceback.format_exc(limit=4)[-2000:]}


def interleaved(runners: dict, rounds: int, time_one) -> dict:
    """Each of `runners` (name -> a callable) timed in `rounds` rounds by time_one(runner); a round
    times every runner once, starting one further along each round, so that no entry is always
    timed first or right after the same one (the clocks and the caches it leaves behind differ).
    Returns name -> its times, one a round."""
    names = list(runners)
    times: dict = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names) if names else 0
        for name in names[k:] + names[:k]:
            times[name].append(time_one(runners[name]))
    return times


def round_ratio(base: list, times: list) -> float:
    """The median over the rounds of base's time / this entry's in the same round."""
    return statistics.median(b / t for b, t in zip(base, times))


def warm_gpu(torch, seconds: float = 1.0) -> None:
    """Keep GPU 0 busy with bfloat16 products for `seconds`: an idle H200 starts at 345 MHz, and the
    first shape a script times would run at the clocks' ramp (16x4096x4096 timed 0.57 of cuBLAS
    first and 0.85 after)."""
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(10):
            x @ x
        torch.cuda.synchronize()


def launch_info(kernel, **sizes) -> dict:
    """Grid, block and dynamic shared memory of `kernel` (at `sizes` for a symbolic one); a value
    that is not an int (an unbound extent) is written as text."""
    p = kernel.launch_params_for(**sizes) if sizes else kernel.launch_params

    def value(v):
        return v if isinstance(v, int) else str(v)

    return {"grid": [value(v) for v in p.grid], "block": [value(v) for v in p.block],
            "smem_bytes": value(p.shared_memory_bytes)}
