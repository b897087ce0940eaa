"""What ptxas reports of a compiled kernel's resources (registers, spills, stack), read from
NVRTC's log of a compile with `-Xptxas=-v`, and the note a spilling kernel gets.

ptxas writes, for each entry function:

    ptxas info    : Compiling entry function 'k' for 'sm_90a'
    ptxas info    : Function properties for k
    ptxas         .     2048 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 32 registers, used 0 barriers, 2048 bytes cumulative stack size

and, where it could not keep a kernel's wgmma.mma_async in flight together (performance advice,
numbered C75xx):

    ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized
                    due to non wgmma instructions defining accumulator registers of a wgmma between
                    start and end of the pipeline stage in the function 'k'

Pure Python; imports nothing of tileproof.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_SERIALIZED = re.compile(r"\((C\d+)\) Potential Performance Loss: wgmma\.mma_async instructions are serialized due to "
                         r"(.+?) in the function '([^']+)'")
MAX_REGISTERS = 255  # per thread, on every architecture since sm_35
MAX_SETMAXNREG = 248  # the most of those a setmaxnreg count (a multiple of 8) gives


@dataclass(frozen=True)
class Resources:
    """A kernel's resources as ptxas allocated them: registers per thread, the bytes of registers
    spilled to local memory and loaded back (static counts over the code, not per run), and the
    per-thread stack frame in local memory (spill slots and register arrays ptxas could not keep
    in registers, such as a dynamically indexed one); `wgmma_serialized`: ptxas's reason, with its
    code, where it made each wgmma.mma_async wait for the one before ("" where it did not)."""

    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_frame_bytes: int
    wgmma_serialized: str = ""

    @property
    def spills(self) -> bool:
        """Whether ptxas moved registers to local memory and back."""
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    def to_json(self) -> dict:
        """The fields as a dict (the disk cache's <key>.resources.json)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Resources:
        """to_json's inverse; KeyError, TypeError or ValueError where data is not that (a cache entry
        written before a field was: compiled again)."""
        if not isinstance(data["wgmma_serialized"], str):
            raise TypeError(f"wgmma_serialized: expected a str, got {data['wgmma_serialized']!r}")
        return cls(**{k: int(data[k]) for k in ("registers", "spill_store_bytes", "spill_load_bytes",
                                                "stack_frame_bytes")}, wgmma_serialized=data["wgmma_serialized"])


def parse_resources(log: str) -> dict[str, Resources]:
    """Each entry function's Resources, by its (mangled) name, from a verbose ptxas log; entries
    the log does not describe in full are left out."""
    entries: set[str] = set()
    frames: dict[str, tuple[int, int, int]] = {}
    registers: dict[str, int] = {}
    serialized: dict[str, str] = {}
    current = None
    for line in log.splitlines():
        if m := _SERIALIZED.search(line):
            serialized[m.group(3)] = f"{m.group(1)}: {m.group(2)}"
        elif m := _ENTRY.search(line):
            entries.add(m.group(1))
        elif m := _PROPERTIES.search(line):
            current = m.group(1)
        elif (m := _FRAME.search(line)) and current is not None:
            frames[current] = tuple(map(int, m.groups()))
        elif (m := _REGISTERS.search(line)) and current is not None:
            registers[current] = int(m.group(1))
    return {name: Resources(registers[name], frames[name][1], frames[name][2], frames[name][0],
                            serialized.get(name, ""))
            for name in sorted(entries) if name in registers and name in frames}


def serialized_note(name: str, resources: Resources) -> str | None:
    """What a kernel whose wgmma.mma_async ptxas serialized should be told, or None."""
    if not resources.wgmma_serialized:
        return None
    return (f"{name}: ptxas serialized its wgmma.mma_async ({resources.wgmma_serialized}): each waits for the one "
            f"before, which can make the kernel much slower (an H200 attention kernel ran 0.78 of the same schedule "
            f"without it); the usual cause is a condition around a wgmma or its accumulator, such as the guard of "
            f"a persistent grid whose blocks do not divide its tiles (give it a count that divides them)")


def spill_note(name: str, resources: Resources, setmaxnreg: tuple[int, int] | None = None) -> str | None:
    """What a kernel that spills registers should be told, or None where it does not spill.
    `setmaxnreg`: the producer's and the consumers' register counts of a warp-specialized kernel,
    which ptxas's count (the one at launch) does not show."""
    if not resources.spills:
        return None
    r = resources
    if setmaxnreg:
        producer, consumers = setmaxnreg
        count = (f"with {r.registers} registers per thread at launch, {consumers} in the consumers after "
                 f"setmaxnreg ({producer} in the producer)")
        more = ("" if consumers >= MAX_SETMAXNREG else
                " or give the consumers more (tp.WarpSpecialized(num_registers=...), taking them from the producer)")
    else:
        count = f"with {r.registers} registers per thread" + (" (the most a thread may have)"
                                                             if r.registers >= MAX_REGISTERS else "")
        more = ("" if r.registers >= MAX_REGISTERS else
                " or let a thread have more registers (fewer threads per block: __launch_bounds__ gives a block of "
                "T threads at most 65536 / T registers each; or setmaxnreg through tp.WarpSpecialized(num_registers="
                "...))")
    return (f"{name}: ptxas spilled registers to local memory ({r.spill_store_bytes} bytes of spill stores, "
            f"{r.spill_load_bytes} bytes of spill loads, a {r.stack_frame_bytes}-byte stack frame per thread) "
            f"{count}; spills go through the L1 cache and can make the kernel several times slower: hold fewer "
            f"values per thread (smaller register tiles, such as a smaller key or N tile of an MMA){more}")
