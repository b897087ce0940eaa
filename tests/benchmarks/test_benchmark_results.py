"""benchmarks/results/ holds the current answer of each benchmark, one file per question and
machine (benchmarks/README.md, "Where results go"): every file there is linked from
benchmarks/README.md, every results file the docs name exists (or, named as `<commit>:<path>`, exists
in that commit), and each file's name is the one bench_common.results_path gives for what its JSON
records, so that the script's next run overwrites it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import attention  # benchmarks/attention.py (benchmarks/ is on pytest's pythonpath)
import fuzz  # benchmarks/fuzz.py
import hopper_matmul  # benchmarks/hopper_matmul.py
import matmul_shapes  # benchmarks/matmul_shapes.py
import normalization  # benchmarks/normalization.py
from bench_common import RESULTS, machine_name, results_path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

README = BENCHMARKS / "README.md"
DOCS = sorted([ROOT / "README.md", README, *(ROOT / "docs").glob("*.md")])
# a results file named in prose, a code span or a link: benchmarks/results/x/y.json, results/x/y.json,
# ../benchmarks/results/x/y.json; not one of git history (`1d88eab:benchmarks/results/...`)
MENTION = re.compile(r"(?<![\w:/.-])(?:\.\./)*(?:benchmarks/)?results/((?:[\w.+-]+/)*[\w.+-]+\.json)")
HISTORY = re.compile(r"\b([0-9a-f]{7,40}):(benchmarks/results/[\w./+-]+\.json)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+)")


def _kept() -> list[str]:
    """Every file under benchmarks/results/, relative to it."""
    return sorted(p.relative_to(RESULTS).as_posix() for p in RESULTS.rglob("*") if p.is_file())


def _linked(readme: Path, text: str) -> set[str]:
    """The files under benchmarks/results/ that `text` (the contents of `readme`) links to."""
    out = set()
    for target in LINK.findall(text):
        path = (readme.parent / target).resolve()
        if RESULTS in path.parents:
            out.add(path.relative_to(RESULTS).as_posix())
    return out


def _missing(text: str) -> list[str]:
    """The results files `text` names that benchmarks/results/ does not hold."""
    return [m for m in MENTION.findall(text) if not (RESULTS / m).is_file()]


def _unlinked(kept: list[str], linked: set[str]) -> list[str]:
    return [k for k in kept if k not in linked]


def test_every_results_file_is_linked_from_the_benchmarks_readme():
    kept = _kept()
    assert kept, "benchmarks/results/ is empty"
    assert not _unlinked(kept, _linked(README, README.read_text())), \
        "files in benchmarks/results/ that benchmarks/README.md does not link"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_results_file_a_doc_names_exists(doc):
    assert not _missing(doc.read_text())


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_results_file_a_doc_cites_from_history_exists_in_that_commit(doc):
    cited = HISTORY.findall(doc.read_text())
    if not cited:
        return
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    gone = [f"{commit}:{path}" for commit, path in cited
            if subprocess.run(["git", "cat-file", "-e", f"{commit}:{path}"], cwd=ROOT,
                              capture_output=True, check=False).returncode != 0]
    assert not gone


def _flag(command: str, flag: str) -> str | None:
    m = re.search(rf"{flag}[ =](\S+)", command)
    return m.group(1) if m else None


GPU_UNNAMED = "a GPU the JSON does not name"


def _recorded(script: str, data: dict) -> tuple[str | None, str]:
    """(device, variant) for a results file from what its JSON records: device None for a run
    without a GPU, GPU_UNNAMED where the JSON says a GPU ran it but not which (fuzz.py --run,
    rejected_on_gpu.py)."""
    if script in ("gpu_kernels", "sdpa_spills"):
        return data["device"], ""
    if script == "attention":
        narrowed = _flag(data["command"], "--shapes") is not None
        return data.get("environment", {}).get("device"), attention.results_variant(list(data["shapes"])) if narrowed else ""
    if script == "attention_sanitizer":  # --configs: the configurations' names
        narrowed = _flag(data["command"], "--configs") is not None
        return data.get("environment", {}).get("device"), "-".join(data["configs"]) if narrowed else ""
    if script in ("matmul", "reductions", "launch_overhead", "matmul_overhead", "attention_per_head"):
        return data.get("environment", {}).get("device"), ""
    if script == "normalization":
        shapes = normalization.parse_shapes(",".join(data["shapes"]))
        return data.get("environment", {}).get("device"), normalization.results_variant(shapes)
    if script == "matmul_shapes":
        shapes = matmul_shapes.parse_shapes(",".join(data["shapes"]))
        return data.get("environment", {}).get("device"), matmul_shapes.results_variant(shapes)
    if script == "hopper_matmul":
        shapes = hopper_matmul.parse_shapes(",".join(data["shapes"]))
        return data.get("environment", {}).get("device"), hopper_matmul.results_variant(shapes)
    if script == "fuzz":
        families = _flag(data["command"], "--families")
        variant = fuzz.results_variant(families.split(",") if families else None)
        return (GPU_UNNAMED if "--run" in data["command"].split() else None), variant
    if script == "rejected_on_gpu":
        return GPU_UNNAMED, ""
    if script in ("verify_time", "report_causes"):
        return None, ""
    raise AssertionError(f"benchmarks/results/{script}/: no benchmarks/{script}.py records there")


@pytest.mark.parametrize("kept", _kept())
def test_each_file_is_named_for_the_machine_and_variant_it_records(kept):
    script, name = kept.split("/")
    assert (BENCHMARKS / f"{script}.py").is_file(), f"no benchmarks/{script}.py"
    device, variant = _recorded(script, json.loads((RESULTS / kept).read_text()))
    if device is GPU_UNNAMED:  # only the file's name says which GPU
        device = name.removesuffix(".json").split("_")[0]
        assert device != "cpu", f"{kept} ran on a GPU"
    assert results_path(script, device, variant) == RESULTS / kept


def test_the_checks_find_a_broken_link_an_unlinked_file_and_a_misnamed_one():
    text = ("[ok](results/fuzz/h100.json), [gone](results/fuzz/h900.json), `benchmarks/results/matmul/h100.json`,"
            " ../benchmarks/results/old.json, `git show 1d88eab:benchmarks/results/fuzz.json`")
    assert _missing(text) == ["fuzz/h900.json", "old.json"]
    assert _linked(README, text) == {"fuzz/h100.json", "fuzz/h900.json"}
    assert _unlinked(["fuzz/h100.json", "fuzz/cpu.json"], {"fuzz/h100.json"}) == ["fuzz/cpu.json"]
    assert HISTORY.findall(text) == [("1d88eab", "benchmarks/results/fuzz.json")]
    assert machine_name("NVIDIA H100 80GB HBM3") == "h100" and machine_name(None) == "cpu"
    run = {"command": "python benchmarks/fuzz.py --families wgmma,mutated,mma --seed 40 --run"}
    assert _recorded("fuzz", run) == (GPU_UNNAMED, "mutated-mma-wgmma")
    assert _recorded("fuzz", {"command": "python benchmarks/fuzz.py --seed 34"}) == (None, "")
    d256 = {"command": "python3 benchmarks/attention.py --shapes 11", "environment": {"device": "NVIDIA H200"},
            "shapes": {"4x16(16)x4096x256 causal": {}}}
    assert results_path("attention", *_recorded("attention", d256)) == RESULTS / "attention" / "h200_4x16x16x4096x256c.json"
    h200 = {"environment": {"device": "NVIDIA H200"}, "shapes": ["8000x8000x8192"]}
    assert results_path("hopper_matmul", *_recorded("hopper_matmul", h200)) == \
        RESULTS / "hopper_matmul" / "h200_8000x8000x8192.json"
