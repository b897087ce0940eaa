"""benchmarks/normalization.py's parts that need no GPU: the shapes, the results file's variant,
the bytes each op moves, the other row classes timed, the summary."""

from __future__ import annotations

import pytest

import normalization as B  # benchmarks/normalization.py (benchmarks/ is on pytest's pythonpath)
from bench_common import RESULTS, interleaved, results_path, round_ratio


def test_shapes_parse_and_name_the_results_file():
    assert B.parse_shapes("32768x1024, 2048X32768") == [(32768, 1024), (2048, 32768)]
    with pytest.raises(SystemExit, match="expected MxN"):
        B.parse_shapes("32768")
    assert B.results_variant(B.SHAPES) == ""
    assert results_path("normalization", "NVIDIA H200", B.results_variant([(1024, 4096)])) == \
        RESULTS / "normalization" / "h200_1024x4096.json"


def test_bytes_moved_are_the_rows_in_and_out_and_the_weights():
    assert B.bytes_moved("copy", 2048, 32768) == 2 * 2048 * 32768 * 2
    assert B.bytes_moved("softmax", 2048, 32768) == B.bytes_moved("copy", 2048, 32768)
    assert B.bytes_moved("layer_norm", 4, 8) - B.bytes_moved("rms_norm", 4, 8) == 8 * 2


def test_the_other_classes_are_those_a_block_of_1024_threads_holds_with_the_fewest_threads():
    from tileproof.recipes.normalization import RowClass, row_class

    def others(n):
        return [(r.batch, r.max_threads) for r in B.other_classes(n, row_class(n))]

    assert others(1024) == [(1, 128), (2, 64), (8, 32)]
    assert others(32768) == [(4, 1024), (8, 512)]  # the chosen class is staged in shared memory
    assert others(16384) == [(2, 1024), (4, 512), (8, 256)]
    assert all(r.admits(16384) for r in B.other_classes(16384, RowClass()))


def test_the_staged_and_looped_classes_are_timed_from_8192_elements():
    from tileproof.recipes.normalization import RowClass, row_class

    def looped(n):
        return [(r.staged, r.batch, r.max_threads) for r in B.looped_classes(n, row_class(n))]

    assert looped(4096) == []
    shapes = [(b, t) for b, t in B.STAGED_SHAPES]
    assert looped(8192) == [(True, b, t) for b, t in shapes] + [(False, b, t) for b, t in shapes]
    # past STAGED_BYTES: looped only, the chosen one (1 vector over LOOPED_THREADS) not again
    assert looped(1 << 17) == [(False, b, t) for b, t in shapes if (b, t) != (1, 512)]
    chosen = row_class(32768)
    assert chosen.staged and (True, chosen.batch, chosen.max_threads) not in looped(32768)
    assert len(looped(32768)) == 2 * len(shapes) - 1
    assert all(r.looped and r.admits(32768) for r in B.looped_classes(32768, RowClass()))


def test_the_summary_is_the_worst_shape_per_op():
    tp = lambda copy, compiled: {"tileproof": {"vs_copy": copy, "vs_compiled": compiled}}  # noqa: E731
    results = {"a": {"softmax": tp(0.95, 1.2), "layer_norm": tp(0.9, 1.0), "rms_norm": {"error": "x"}},
               "b": {"softmax": tp(0.85, 1.1), "layer_norm": tp(0.92, 0.99), "rms_norm": tp(0.9, 1.0)}}
    summary = B.summarize(results)
    assert summary["softmax"] == {"vs_copy": 0.85, "vs_compiled": 1.1}
    assert summary["layer_norm"] == {"vs_copy": 0.9, "vs_compiled": 0.99}
    assert summary["rms_norm"] == {"vs_copy": None, "vs_compiled": None}


def test_the_entries_are_timed_in_rounds_each_starting_one_further_along():
    order = []
    times = interleaved({"copy": "c", "ours": "o", "theirs": "t"}, 4, lambda r: order.append(r) or len(order))
    assert "".join(order) == "cot" + "otc" + "tco" + "cot"
    assert times == {"copy": [1, 6, 8, 10], "ours": [2, 4, 9, 11], "theirs": [3, 5, 7, 12]}
    assert round_ratio([2.0, 3.0, 4.0], [1.0, 3.0, 2.0]) == 2.0  # per round 2, 1, 2
