"""Run a document's code blocks in order, as a reader would: every ```python block in one
namespace, and each ```text block right after one is that block's exact output. A python block
whose first line is `# needs a GPU` runs only where the caller says a GPU is there."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

BLOCK = re.compile(r"^```(python|text)\n(.*?)^```", re.S | re.M)
NEEDS_GPU = "# needs a GPU"


@dataclass
class Block:
    code: str
    line: int  # where it starts in the document (1-based)
    output: str | None  # the text block after it, if any
    needs_gpu: bool


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    found: list[Block] = []
    for m in BLOCK.finditer(text):
        kind, body = m.group(1), m.group(2)
        if kind == "python":
            found.append(Block(body, text.count("\n", 0, m.start()) + 1, None,
                               body.lstrip().startswith(NEEDS_GPU)))
        elif found and found[-1].output is None:
            found[-1].output = body
        else:
            raise AssertionError(f"{path.name}: a text block with no python block before it")
    return found


def run(path: Path, gpu: bool) -> int:
    """Run the blocks (the GPU ones only if `gpu`), checking each shown output; returns how many ran."""
    namespace: dict = {"__name__": f"doc_{path.stem}"}
    ran = 0
    for b in blocks(path):
        if b.needs_gpu and not gpu:
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(b.code, f"{path.name}:{b.line}", "exec"), namespace)  # noqa: S102 - our own docs
        if b.output is not None:
            shown = [line.rstrip() for line in b.output.strip().splitlines()]
            got = [line.rstrip() for line in out.getvalue().strip().splitlines()]
            assert got == shown, f"{path.name}:{b.line}: the block printed\n" + "\n".join(got)
        ran += 1
    return ran
