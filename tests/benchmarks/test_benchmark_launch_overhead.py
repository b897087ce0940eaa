"""benchmarks/launch_overhead.py without a GPU: the timing loop calls what it times the number of
times it says (warm-up, batches, the untimed step before each call), and the table shows skipped
and failed entries."""

from __future__ import annotations

from types import SimpleNamespace

import launch_overhead as lo


def test_host_us_times_every_call_after_the_warmup_and_syncs_between_batches():
    counts = {"call": 0, "before": 0, "sync": 0}
    torch = SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda: counts.__setitem__("sync", counts["sync"] + 1)))
    r = lo.host_us(torch, lambda: counts.__setitem__("call", counts["call"] + 1), 250,
                   before=lambda: counts.__setitem__("before", counts["before"] + 1))
    assert counts == {"call": lo.WARMUP + 250, "before": lo.WARMUP + 250, "sync": 1 + 3}
    assert r["calls"] == 250 and 0 <= r["p10_us"] <= r["median_us"] <= r["p90_us"]


def test_the_table_shows_skipped_and_failed_entries():
    text = lo.table({"entries": {"torch_add": {"median_us": 6.3, "p10_us": 6.0, "p90_us": 7.1, "calls": 10},
                                 "triton": {"skipped": "triton does not import"},
                                 "tileproof_matmul": {"error": "InputError: bad"}}})
    assert "| torch_add | 6.3 | 6.0 | 7.1 |" in text
    assert "| triton | triton does not import | | |" in text and "InputError: bad" in text


def test_bad_arguments_are_refused(capsys):
    import pytest

    with pytest.raises(SystemExit):
        lo.main(["--shape", "64"])
    assert "--shape expects MxN" in capsys.readouterr().err
