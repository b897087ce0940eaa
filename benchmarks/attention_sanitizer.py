"""Does compute-sanitizer find anything in tileproof's attention kernels? (issue 36)

    python3 benchmarks/attention_sanitizer.py [--out FILE]     # a GPU, torch, compute-sanitizer on PATH
                                                               # or in /usr/local/cuda/bin

For each configuration below (small sizes: the sanitizers are slow) and each tool (racecheck:
shared-memory hazards; synccheck: barrier misuse; memcheck: out-of-bounds and misaligned
accesses), runs one call of the kernel in a child process under `compute-sanitizer --tool T
--error-exitcode 1` and records the tool's ERROR SUMMARY and exit status. The child also checks
the output against float64 PyTorch. Writes JSON (default
benchmarks/results/attention_sanitizer/<machine>.json).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench_common import results_path, write_results  # benchmarks/bench_common.py

TOOLS = ("racecheck", "synccheck", "memcheck")
# (name, AttentionTile keywords, attention() keywords; None: one_tile_attention)
CONFIGS = [
    ("one_tile", dict(rows=128, keys=128, head_dim=64, value_dim=64), None),
    ("online", dict(rows=100, keys=256, key_tile=64, head_dim=128, value_dim=128), {}),
    ("online_pipelined", dict(rows=128, keys=512, key_tile=64, head_dim=64, value_dim=64), {"stages": 3}),
    ("online_producer_2wg", dict(rows=256, keys=512, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240)}),
    # causal with masked key tiles skipped (the per-block trip count), key and row tails
    ("causal_skip_producer_2wg", dict(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, causal=True),
     {"stages": 3, "producer": True, "warpgroups": 2, "registers": (24, 240)}),
    ("causal_skip_tail_lse", dict(rows=77, keys=333, key_tile=64, head_dim=64, value_dim=64, causal=True),
     {"stages": 2, "lse": True}),
    # the intra-warpgroup overlap (the loop rotated: tile i + 1's Q K^T before tile i's P V), causal with skipping
    ("overlap_producer_2wg", dict(rows=256, keys=512, key_tile=128, head_dim=128, value_dim=128),
     {"stages": 3, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True}),
    ("overlap_causal_skip", dict(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, causal=True),
     {"stages": 3, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True}),
    # the overlap with ping-pong: each warpgroup's turn holds tile i + 1's Q K^T, the rescale and tile i's P V
    ("overlap_ping_pong_causal", dict(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, causal=True),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True,
      "ping_pong": True}),
    # a persistent grid of 3 blocks over 8 row tiles (two heads of a group, tails): the producer's pipeline
    # runs on across tiles
    ("persistent_overlap", dict(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2),
     {"stages": 3, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True,
      "persistent": 3}),
    # a causal persistent grid: 2 heads, 2 blocks each over its 3 row tiles (a round past the rows), the skip
    # counts read the row-tile loop's index
    ("persistent_causal", dict(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, group=2, causal=True),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "persistent": 4}),
    # Q loaded by the producer too, two row tiles ahead at most (q_stages): 3 blocks over 8 row tiles, causal
    ("persistent_q_from_producer", dict(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=2,
                                        group=2),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True,
      "persistent": 3, "q_stages": 2}),
    ("persistent_causal_q_from_producer", dict(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128,
                                               group=2, causal=True),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "persistent": 4,
      "q_stages": 2}),
    # recipes.sdpa's causal form: the overlap on a grid of 2 blocks a head over its 3 row tiles, Q ahead, head dim 64
    ("persistent_causal_overlap_q_from_producer", dict(rows=300, keys=300, key_tile=128, head_dim=64, value_dim=64,
                                                       group=2, causal=True),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True,
      "persistent": 4, "q_stages": 2}),
    # with ping-pong too (recipes.sdpa's short-sequence form): 3 blocks over 8 row tiles of 2 key tiles each
    ("persistent_ping_pong_q_from_producer", dict(rows=256, keys=200, key_tile=128, head_dim=64, value_dim=64,
                                                  batch=2, group=2),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True,
      "ping_pong": True, "persistent": 3, "q_stages": 2}),
    # O through shared memory (stmatrix, then a TMA store a box): a persistent grid's warpgroups rewrite their
    # boxes each row tile after the store has read them; with ping-pong, and causal on a per-head grid
    ("persistent_ping_pong_tma_store", dict(rows=256, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=2,
                                            group=2),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True,
      "ping_pong": True, "persistent": 3, "q_stages": 2, "tma_store": True}),
    ("persistent_causal_tma_store", dict(rows=320, keys=320, key_tile=128, head_dim=64, value_dim=64, group=2,
                                         causal=True),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True,
      "persistent": 4, "q_stages": 2, "tma_store": True}),
    # ... at a row tail with a batch and a head of one (the last row tile's stmatrix at its holes, the TMA store
    # clipping them), and with one consumer warpgroup beside the producer
    ("persistent_row_tail_tma_store", dict(rows=200, keys=300, key_tile=128, head_dim=64, value_dim=64),
     {"stages": 2, "producer": True, "warpgroups": 2, "registers": (24, 240), "in_place": True, "overlap": True,
      "persistent": 2, "q_stages": 2, "tma_store": True}),
    ("one_consumer_tma_store", dict(rows=200, keys=256, key_tile=64, head_dim=128, value_dim=128, batch=2),
     {"stages": 2, "producer": True, "warpgroups": 1, "in_place": True, "overlap": True, "tma_store": True}),
    # three consumer warpgroups (192 rows, recipes.sdpa's head dim 64 forms): the overlap on a persistent grid of
    # 3 blocks over 6 row tiles (a row tail), and causal on 2 blocks a head over its 3 row tiles, Q ahead
    ("three_warpgroups_persistent_overlap", dict(rows=500, keys=300, key_tile=128, head_dim=64, value_dim=64,
                                                 batch=2),
     {"stages": 2, "producer": True, "warpgroups": 3, "registers": (24, 160), "in_place": True, "overlap": True,
      "persistent": 3, "q_stages": 2}),
    ("three_warpgroups_causal_per_head", dict(rows=500, keys=500, key_tile=128, head_dim=64, value_dim=64, group=2,
                                              causal=True),
     {"stages": 2, "producer": True, "warpgroups": 3, "registers": (24, 160), "in_place": True, "persistent": 4,
      "q_stages": 2}),
]
CHILD = """
import math, sys, torch, tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention, attention_views, one_tile_attention
tile = AttentionTile(**{tile})
options = {options}
kernel = tp.compile(one_tile_attention(tile) if options is None else attention(tile, **options), "sm_90a")
b, hkv = 1, tile.batch
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(s, generator=g).to(torch.bfloat16).cuda() for s in
           ((b, hkv * tile.group, tile.rows, tile.head_dim), (b, hkv, tile.keys, tile.head_dim),
            (b, hkv, tile.keys, tile.value_dim)))
outs = kernel.run(*attention_views(q, k, v))
torch.cuda.synchronize()
kk, vv = (t.double().repeat_interleave(tile.group, dim=1) for t in (k, v))
scores = q.double() @ kk.transpose(-1, -2) * tile.softmax_scale
if tile.causal:  # bottom-right aligned, as AttentionTile(causal=True) masks
    i = torch.arange(tile.rows).view(-1, 1)
    j = torch.arange(tile.keys).view(1, -1)
    scores = scores.masked_fill((j > i + tile.keys - tile.rows).cuda(), float("-inf"))
want = torch.softmax(scores, dim=-1) @ vv
got = outs[0].reshape(want.shape).double()
err = ((got - want).abs().max() / want.abs().max()).item()
print("rel_err", err)
sys.exit(0 if err < 2e-2 else 3)
"""


def sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in sorted(Path("/usr/local").glob("cuda*"), reverse=True):
        candidate = root / "bin" / "compute-sanitizer"
        if candidate.exists():
            return str(candidate)
    return None


def run_one(tool_path: str, tool: str, tile: dict, options) -> dict:
    code = CHILD.format(tile=repr(tile), options=repr(options))
    # the kernels' errors, not the host's API calls (the driver's own probes return errors by design)
    proc = subprocess.run([tool_path, "--tool", tool, "--error-exitcode", "1", "--report-api-errors", "no",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                          env=os.environ.copy())
    text = proc.stdout + proc.stderr
    summary = (re.search(r"ERROR SUMMARY: (\d+) error", text)
               or re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", text))
    err = re.search(r"rel_err ([0-9.e+-]+)", text)
    return {"exit": proc.returncode, "errors": int(summary.group(1)) if summary else None,
            "rel_err": float(err.group(1)) if err else None,
            **({"output_head": text[:3000]} if proc.returncode or not summary else {})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON path (default: benchmarks/results/attention_sanitizer/<machine>.json; with "
                                  "--configs, <machine>_<configs>.json)")
    ap.add_argument("--configs", help="only these CONFIGS, by name (comma-separated; default all)")
    args = ap.parse_args(argv)
    only = set(args.configs.split(",")) if args.configs else None
    if only and only - {name for name, _, _ in CONFIGS}:
        ap.error(f"--configs: no configuration named {', '.join(sorted(only - {n for n, _, _ in CONFIGS}))}")
    import torch

    tool_path = sanitizer()
    if not torch.cuda.is_available() or tool_path is None:
        print("attention_sanitizer.py needs a CUDA GPU and compute-sanitizer", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0)
    results = {"command": " ".join(["python3", "benchmarks/attention_sanitizer.py"] + (argv or sys.argv[1:])),
               "issue": 36, "environment": {"device": device, "torch": torch.__version__,
                                             "sanitizer": tool_path}, "configs": {}}
    for name, tile, options in CONFIGS:
        if only and name not in only:
            continue
        results["configs"][name] = {"tile": tile, "options": options,
                                    **{tool: run_one(tool_path, tool, tile, options) for tool in TOOLS}}
        print(name, {tool: results["configs"][name][tool]["errors"] for tool in TOOLS}, flush=True)
    clean = all(r[t]["exit"] == 0 and r[t]["errors"] == 0 for r in results["configs"].values() for t in TOOLS)
    results["clean"] = clean
    shown = "\n".join(f"{n}: " + ", ".join(f"{t} {r[t]['errors']} errors (exit {r[t]['exit']})" for t in TOOLS)
                      for n, r in results["configs"].items())
    variant = "-".join(name for name, _, _ in CONFIGS if name in only) if only else ""
    out = results_path("attention_sanitizer", device, variant) if args.out is None else Path(args.out)
    write_results(results, out, shown + f"\nclean: {clean}")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
