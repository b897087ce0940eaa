"""A test's independent pieces of work in processes forked from the test's own: CI runs pytest in
one process on a machine of two cores."""

from __future__ import annotations

import multiprocessing

JOBS = 2  # CI's cores


def forked_map(fn, items, jobs: int = JOBS) -> list:
    """[fn(x) for x in items], in order, computed `jobs` at a time in processes forked from this one:
    `fn` a module-level function (a pool sends it by name), its results pickled back. Each process
    starts from this one's state (environment, caches), as a call here would."""
    items = list(items)
    if jobs <= 1 or len(items) < 2:
        return [fn(x) for x in items]
    with multiprocessing.get_context("fork").Pool(min(jobs, len(items))) as pool:
        return pool.map(fn, items, chunksize=1)
