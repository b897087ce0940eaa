"""NVRTC compilation (through cuda-python) with an on-disk cubin cache.

The cache key is the sha256 of the source, the options and the NVRTC version, so a
changed kernel, flag or compiler never reuses a stale cubin. ptxas runs verbose (-Xptxas=-v) so
that its log gives each kernel's registers and spills (ptxas.py's Resources); those are cached
beside the cubin as <key>.resources.json (a cubin without them is compiled again). The folder is
$TILEPROOF_CACHE_DIR, else ~/.cache/tileproof. Compiling needs no GPU. Missing NVRTC is
NoDeviceError; NVRTC rejecting our source is CompileError, an InternalError (a tileproof bug).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from ..errors import CompileError, NoDeviceError
from .ptxas import Resources, parse_resources

SOURCE_NAME = "tileproof_kernel.cu"


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - cuda-python is a dependency
        raise NoDeviceError(f"cuda-python's NVRTC bindings are not importable ({e}); pip install cuda-python") from e
    return nvrtc


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # the shared library is missing
        raise NoDeviceError(f"NVRTC is not available ({e}); pip install nvidia-cuda-nvrtc") from e
    _check(err, "nvrtcVersion")
    return major, minor


@functools.lru_cache(maxsize=1)
def cuda_include_dir() -> str | None:
    """Where cuda_fp16.h lives (pip CUDA runtime headers, a CUDA toolkit), or None."""
    try:
        from cuda.pathfinder import locate_nvidia_header_directory

        found = locate_nvidia_header_directory("cudart")
        if found is not None and Path(found.abs_path, "cuda_fp16.h").is_file():
            return str(found.abs_path)
    except Exception:  # pathfinder missing or unable to search: try the usual places
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and Path(root, "include", "cuda_fp16.h").is_file():
            return str(Path(root, "include"))
    return None


def options(arch: str, include_dir: str | None, fast_math: bool = False) -> list[bytes]:
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "-lineinfo", "-Xptxas=-v"]
    if include_dir:
        opts.append(f"-I{include_dir}")
    if fast_math:  # Fusion.fast_math: nvFuser's EnableOption::FastMath
        opts.append("--use_fast_math")
    return [o.encode() for o in opts]


def cache_dir() -> Path:
    return Path(os.environ.get("TILEPROOF_CACHE_DIR") or Path.home() / ".cache" / "tileproof")


def cache_key(source: str, opts: list[bytes]) -> str:
    h = hashlib.sha256(source.encode())
    for o in opts:
        h.update(b"\0" + o)
    h.update(("\0nvrtc %d.%d" % nvrtc_version()).encode())
    return h.hexdigest()


def compile_to_cubin(source: str, arch: str, include_dir: str | None = None, fast_math: bool = False) -> bytes:
    """The cubin of source for arch (sm_90a, ...), from the disk cache when it is there."""
    return compile_kernel(source, arch, include_dir, fast_math)[0]


def compile_kernel(source: str, arch: str, include_dir: str | None = None,
                   fast_math: bool = False) -> tuple[bytes, dict[str, Resources]]:
    """The cubin of source for arch and each entry function's Resources (by name), from the disk
    cache when both are there; `fast_math` compiles with --use_fast_math."""
    opts = options(arch, include_dir, fast_math)
    key = cache_key(source, opts)
    path, resources_path = cache_dir() / f"{key}.cubin", cache_dir() / f"{key}.resources.json"
    try:
        resources = {name: Resources.from_json(r) for name, r in json.loads(resources_path.read_text()).items()}
        return path.read_bytes(), resources
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # missing or unreadable: compile
        pass
    cubin, log = _compile(source, opts, arch)
    resources = parse_resources(log)
    _store(path, cubin)
    _store(resources_path, json.dumps({name: r.to_json() for name, r in resources.items()}).encode())
    return cubin, resources


def _store(path: Path, data: bytes) -> None:
    """Write atomically; a read-only or full cache only costs the next compile."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
            f.write(data)
        os.replace(f.name, path)
    except OSError:
        pass


def _compile(source: str, opts: list[bytes], arch: str) -> tuple[bytes, str]:
    """The cubin and NVRTC's log (ptxas's report of each kernel's resources)."""
    nvrtc = _nvrtc()
    nvrtc_version()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), SOURCE_NAME.encode(), 0, None, None)
    _check(err, "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise _compile_error(_log(nvrtc, prog), source, arch)
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(err, "nvrtcGetCUBINSize")
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check(err, "nvrtcGetCUBIN")
        return cubin, _log(nvrtc, prog)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _log(nvrtc, prog) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0 ").decode(errors="replace")


def _compile_error(log: str, source: str, arch: str) -> CompileError:
    lines = source.splitlines()
    first = next((ln for ln in log.splitlines() if "error" in ln), log.strip().splitlines()[0] if log.strip() else "")
    m = re.search(re.escape(SOURCE_NAME) + r"\((\d+)\)", first)
    where = ""
    if m and 0 < int(m.group(1)) <= len(lines):
        n = int(m.group(1))
        where = f"\n  {n} | {lines[n - 1].strip()}"
    message = (f"NVRTC could not compile the generated kernel for {arch}: {first.strip()}{where}\n"
               f"(the full log is in .log and the source in .source)")
    return CompileError(message, log, source)


def _check(err, what: str) -> None:
    nvrtc = _nvrtc()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")
