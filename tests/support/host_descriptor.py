"""A kernel prelude's shared-memory descriptor packer (tp_wgmma_desc, tp_umma_desc:
codegen/emit/mma.py) compiled for the host and run, so a test compares the bits the kernel builds
with the Python model's encoding, without a GPU."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def host_descriptors(helper: str, function: str, rows: list[tuple[int, int, int, int]]) -> list[int]:
    """`function(start, lbo, sbo, layout)` of the C++ source `helper` at each row, as the host
    computes it (the device qualifiers defined away). Skips the test where there is no host C++
    compiler."""
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    main = "#include <cstdio>\nint main() { unsigned s, l, b, y;\n" \
           f"  while (std::scanf(\"%u %u %u %u\", &s, &l, &b, &y) == 4) std::printf(\"%llu\\n\", {function}(s, l, b, y)); }}\n"
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "desc.cpp", Path(tmp) / "desc"
        src.write_text("#define __device__\n#define __forceinline__ inline\n" + helper + "\n" + main)
        subprocess.run([cxx, "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
        stdin = "".join(f"{s} {l} {b} {y}\n" for s, l, b, y in rows)
        out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.split()
    return [int(v) for v in out]
