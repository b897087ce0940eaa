"""benchmarks/matmul_shapes.py without a GPU: its shapes parse and cover the issue's kinds, the plan
names each shape's choice, the results file's variant, and the summary and table of a results dict
(geometric mean, minimum, whether the choice was near the best configuration)."""

from __future__ import annotations

import json

import pytest

import matmul_shapes as B  # benchmarks/matmul_shapes.py (benchmarks/ is on pytest's pythonpath)
from tileproof.recipes.matmul_heuristic import CONFIGS, WIDE


def test_shapes_parse_and_bad_ones_are_refused():
    assert B.parse_shapes("1024x1024x16384, 16x4096x4096,16x4096x4096") == [(1024, 1024, 16384), (16, 4096, 4096)]
    assert B.parse_shapes("all") == B.SHAPES
    for bad in ("1024x1024", "ax1x8", "0x8x8", "8x12x8", ","):
        with pytest.raises(ValueError):
            B.parse_shapes(bad)


def test_the_shape_set_covers_the_issue():
    m_values = {m for m, _, _ in B.SHAPES}
    assert len(B.SHAPES) >= 16 and min(m_values) <= 64 and max(m_values) >= 8192
    assert (1024, 1024, 16384) in B.SHAPES and (16, 4096, 4096) in B.SHAPES and (3840, 4096, 4096) in B.SHAPES
    assert any(m % 128 or n % 256 for m, n, _ in B.SHAPES)  # no tile divides


def test_the_results_variant_names_a_subset():
    assert B.results_variant(B.SHAPES) == ""
    assert B.results_variant([(16, 4096, 4096), (8, 8, 8)]) == "16x4096x4096-8x8x8"


def test_the_plan_names_each_choice_and_every_configuration(capsys):
    plan = B.plan([(8192, 8192, 8192), (1024, 1024, 16384)])
    assert plan["8192x8192x8192"]["config"] == WIDE.name and plan["8192x8192x8192"]["splits"] == 1
    assert plan["1024x1024x16384"]["splits"] > 1
    assert set(plan["1024x1024x16384"]["estimates"]) == {c.name for c in CONFIGS if not c.swap_ab}  # M > 16
    timed = plan["1024x1024x16384"]["timed_forced"]  # the choice first, then the next estimates
    assert timed[0] == plan["1024x1024x16384"]["config"] and len(timed) == 1 + B.FORCED_ALTERNATIVES
    assert len(B.forced_configs((1024, 1024, 16384), every=True)) == len(CONFIGS) - 1  # all but the swapped one
    assert B.main(["--plan", "--shapes", "16x4096x4096"]) == 0
    assert json.loads(capsys.readouterr().out)["16x4096x4096"]["splits"] > 1


def results(chosen_ms: dict, best_ms: dict) -> dict:
    shapes = {}
    for key, ms in chosen_ms.items():
        shapes[key] = {"cublas": {"ms": 1.0, "tflops": 100.0},
                       "tileproof": {"ms": ms, "tflops": 100 / ms, "vs_cublas": round(1 / ms, 3), "config": "c",
                                     "splits": 1},
                       "configs": {"c": {"ms": ms, "vs_cublas": round(1 / ms, 3)},
                                   "d": {"ms": best_ms[key], "vs_cublas": round(1 / best_ms[key], 3)},
                                   "e": {"skipped": "the configuration does not take this shape"}},
                       "tileproof_symbolic": {"ms": 2 * ms, "vs_cublas": round(1 / (2 * ms), 3)},
                       "triton": {"skipped": "triton does not import"}}
    return {"shapes": shapes}


def test_the_summary_and_table():
    r = results({"a": 0.5, "b": 2.0, "c": 1.0}, {"a": 0.6, "b": 1.0, "c": 1.02})
    r["summary"] = s = B.summary(r)
    assert s == {"shapes": 3, "geomean_vs_cublas": 1.0, "min_vs_cublas": 0.5, "min_shape": "b",
                 "choice_near_best": "2 of 3", "geomean_vs_triton": None, "symbolic_geomean_vs_cublas": 0.5}
    r["shapes"]["a"]["triton"] = {"ms": 1.0}
    assert B.summary(r)["geomean_vs_triton"] == 2.0  # tileproof's 0.5 ms against Triton's 1.0
    text = B.table(r)
    assert "| b | 100.0 | 50.0 | 0.5 | c (1) | d (1.0) | 0.25 | triton does not import |" in text
    assert "geomean vs cuBLAS 1.0, min 0.5 (b), choice within 5 % of the best configuration at 2 of 3 shapes" in text


def test_an_entry_that_failed_shows_its_error():
    r = results({"a": 1.0}, {"a": 1.0})
    r["shapes"]["a"]["tileproof"] = {"error": "InputError: bad"}
    assert B.summary(r) == {"shapes": 0}
    assert "| a | 100.0 | InputError: bad |" in B.table(r)
