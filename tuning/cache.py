"""The autotuning cache on disk: one JSON file per sweep key (the builder, the space, the target, the
GPU's name, the inputs' shapes, strides and dtypes, the extent sizes, tileproof's version), holding
the winner's configuration, its time and its schedule's fingerprint, and every candidate's time.

    <cache_dir>/<sha256 of the key>.json   (default cache_dir: $TILEPROOF_CACHE_DIR/autotune,
                                            ~/.cache/tileproof/autotune)

A file that cannot be read, or whose key differs, is a miss; a write that fails only costs the next
sweep. Imports the runtime's cache folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..codegen.runtime.nvrtc import cache_dir as tileproof_cache_dir


def default_dir() -> Path:
    return tileproof_cache_dir() / "autotune"


def key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def load(directory: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The entry stored for `key`, or None."""
    try:
        entry = json.loads((directory / f"{key_digest(key)}.json").read_text())
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("key") == key else None


def store(directory: Path, key: dict[str, Any], entry: dict[str, Any]) -> Path | None:
    """Write {"key": key, **entry} atomically; the path, or None when the folder is not writable."""
    path = directory / f"{key_digest(key)}.json"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, suffix=".tmp") as f:
            json.dump({"key": key, **entry}, f, indent=1, sort_keys=True)
        os.replace(f.name, path)
    except OSError:
        return None
    return path


__all__ = ["default_dir", "key_digest", "load", "store"]
