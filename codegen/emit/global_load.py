"""C++ for a plain load of a fusion input with a cache operator (hw/global_load.py): the
statement's one access (at most 16 bytes, VECTORIZE-WIDTH) is one `ld.global.{ca,cg,cs}`
(PTX ISA 9.7.9.8: .u8 / .u16 / .u32 into 16- and 32-bit registers, .v2.u32 and .v4.u32 for 8
and 16 bytes), written where the copy writes (a register or shared element)."""

from __future__ import annotations

from ...hw.global_load import WORD_BYTES
from ...model.errors import InternalError
from ..ir import CachedLoad

# bytes -> (the register type, the PTX type, the register constraint, registers per word)
_WORDS = {1: ("unsigned short", "u8", "h", 1), 2: ("unsigned short", "u16", "h", 1), 4: ("unsigned", "u32", "r", 1),
          8: ("unsigned", "v2.u32", "r", 2), 16: ("unsigned", "v4.u32", "r", 4)}


def _helper(cache: str, nbytes: int) -> list[str]:
    reg, ptx, constraint, count = _WORDS[nbytes]
    regs = ", ".join(f"%{k}" for k in range(count))
    outs = ", ".join(f'"={constraint}"(r[{k}])' for k in range(count))
    store = ("*reinterpret_cast<unsigned char*>(dst) = (unsigned char)r[0];" if nbytes == 1
             else f"for (int k = 0; k < {count}; ++k) reinterpret_cast<{reg}*>(dst)[k] = r[k];")
    return [f"template <> __device__ __forceinline__ void tp_ld_global_{cache}<{nbytes}>(void* dst, const void* src) {{",
            f"  {reg} r[{count}];",
            f'  asm volatile("ld.global.{cache}.{ptx} {{{regs}}}, [%{count}];" : {outs} '
            f': "l"(__cvta_generic_to_global(src)));' if count > 1 else
            f'  asm volatile("ld.global.{cache}.{ptx} %0, [%1];" : {outs} : "l"(__cvta_generic_to_global(src)));',
            f"  {store} }}"]


def prelude(loads: list[CachedLoad]) -> list[str]:
    """The ld.global helpers of the caches `loads` use."""
    lines = []
    for cache in sorted({n.cache for n in loads}):
        lines.append(f"// ld.global.{cache}: one word of BYTES bytes from global memory")
        lines.append(f"template <int BYTES> __device__ __forceinline__ void tp_ld_global_{cache}(void* dst, "
                     f"const void* src);")
        for nbytes in WORD_BYTES:
            lines += _helper(cache, nbytes)
    return lines


def load(cache: str, dst: str, src: str, nbytes: int) -> list[str]:
    """The line loading `nbytes` (one word: VECTORIZE-WIDTH proved at most 16) from `src`
    (global) into `dst` with ld.global.{cache}."""
    if nbytes not in WORD_BYTES:
        raise InternalError(f"a cached load of {nbytes} bytes has no ld.global word (1, 2, 4, 8 or 16 bytes)")
    return [f"tp_ld_global_{cache}<{nbytes}>({dst}, {src});"]


def load_lines(emitter, n: CachedLoad, depth: int) -> list[str]:
    """The copy under its predicates, its input read with ld.global.{n.cache}."""
    body = emitter.vector_body(n, load=lambda dst, src, nbytes: load(n.cache, dst, src, nbytes))
    return emitter.guarded_block(n.comment, n.conds, body, depth)


__all__ = ["prelude", "load", "load_lines"]
