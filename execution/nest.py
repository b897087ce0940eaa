"""The placed nest: the barriers, mbarrier and async-group waits, circular-buffer pipelines and
wgmma fences and waits of one loop nest, placed once by the passes below in this order. The code
generator lowers exactly this nest (codegen/lower/syncs.py) and the verifier proves it
(verifier/analysis/barrier_nest.py: SMEM-RACE, CPASYNC-WAIT, PIPELINE-*, WGMMA-ASYNC-ORDER).
"""

from __future__ import annotations

from .barriers import Async, BulkStoreWait, Hazards, insert_barriers, statement_paths
from .pipeline import insert_pipelines
from .wgmma_order import insert_wgmma_waits


def place_syncs(tree: list, on_chip: set[str], hazards: Hazards) -> None:
    """Place every synchronisation of `tree` (in place): the barriers and waits of plain on-chip
    hand-offs, then the circular buffers' pipelines, then wgmma's fences and waits around them; a
    kernel whose TMA stores read shared memory ends waiting for those reads."""
    stores = any(a.kind is Async.TMA_STORE for _, a, _ in statement_paths(tree, hazards))
    insert_barriers(tree, on_chip, hazards)
    insert_pipelines(tree, hazards)
    insert_wgmma_waits(tree, hazards)
    if stores:
        tree.append(BulkStoreWait("the TMA stores have read shared memory before the block exits"))
