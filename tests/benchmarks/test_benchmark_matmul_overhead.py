"""benchmarks/matmul_overhead.py without a GPU: its shapes parse, bad arguments are refused, and the
table shows each shape's configuration, timed entries and failed ones."""

from __future__ import annotations

import pytest

import matmul_overhead as mo


def test_shapes_parse_and_bad_ones_are_refused(capsys):
    assert mo.parse_shapes("16x4096x4096,128X256x64") == [(16, 4096, 4096), (128, 256, 64)]
    for bad in ("16x4096", "16x0x64", "axbxc"):
        with pytest.raises(ValueError):
            mo.parse_shapes(bad)
    with pytest.raises(SystemExit):
        mo.main(["--shapes", "64x64"])
    assert "--shapes expects MxNxK" in capsys.readouterr().err


def test_the_table_shows_the_configuration_and_failed_entries():
    timed = {"median_us": 30.1, "p10_us": 29.0, "p90_us": 33.0, "calls": 10, "loop_us": 31.5}
    text = mo.table({"shapes": {
        "16x4096x4096": {"choice": {"config": "128x128_split_k", "splits": 4},
                         "entries": {"tileproof_matmul": timed, "torch_matmul": {"error": "RuntimeError: no"}}},
        "8x8x8": {"error": "InputError: K = 8"}}})
    assert "| 16x4096x4096 | 128x128_split_k x4 | tileproof_matmul | 30.1 | 29.0 | 33.0 | 31.5 |" in text
    assert "| 16x4096x4096 | 128x128_split_k x4 | torch_matmul | RuntimeError: no |" in text
    assert "InputError: K = 8" in text
