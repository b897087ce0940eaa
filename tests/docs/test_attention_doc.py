"""docs/attention.md runs as written: its code blocks in order, each shown output exactly what the
block before it prints."""

from __future__ import annotations

from pathlib import Path

from support import doc_blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "attention.md"


def test_the_walk_through_runs_and_prints_what_it_shows():
    blocks = doc_blocks.blocks(DOC)
    assert sum(b.output is not None for b in blocks) == 10
    assert doc_blocks.run(DOC, gpu=False) == len(blocks)
