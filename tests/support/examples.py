"""A bundled example file as a module, for its helpers (examples/valid or examples/invalid)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_module(kind: str, stem: str):
    """examples/<kind>/<stem>.py, loaded under a name of its own (the two kinds share stems)."""
    spec = importlib.util.spec_from_file_location(f"_example_{kind}_{stem}", EXAMPLES / kind / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
