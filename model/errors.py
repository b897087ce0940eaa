"""Errors for malformed input (the user's call was wrong), distinct from a bad schedule."""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


class ScheduleError(ValueError):
    """A schedule-building call received arguments that make no sense.

    Raised at the door ("split: factor must be a positive int or symbol, got -4");
    a well-formed but unsafe schedule is never an exception, it is a Report.
    """


_INTERNAL_DIRS = {"model", "verifier", "codegen", "reports"}
_INTERNAL_FILES = {"__init__.py", "__main__.py", "cli.py", "api.py", "schedule_files.py"}


def _is_internal(path: Path) -> bool:
    try:
        parts = path.resolve().relative_to(_PACKAGE_DIR).parts
    except (OSError, ValueError):
        return False
    return parts[0] in _INTERNAL_DIRS or (len(parts) == 1 and parts[0] in _INTERNAL_FILES)


def user_location() -> str | None:
    """file:line of the innermost caller outside the tileproof package."""
    frame = sys._getframe(1)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        generated = frame.f_code.co_filename == "<string>"  # dataclass-generated __init__
        if not generated and not _is_internal(path) and not path.name.startswith("<frozen"):
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return None
