"""The root of tileproof's exceptions, and the errors of the model layer.

Every tileproof exception is a TileproofError, and keeps a builtin base as a second parent
(ValueError for a wrong call, NotImplementedError for a gap, RuntimeError for the machine).
Your mistake is a ScheduleError (malformed input) or a Report (a bad schedule, never an
exception); our bug is an InternalError ("tileproof bug, please report"), never an accept.
This module sits at the bottom so that every package can raise these.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


class TileproofError(Exception):
    """The root of every exception tileproof raises: `except tp.TileproofError` catches them all."""

    def __reduce__(self):  # pickle without calling __init__: subclasses take other arguments
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls, args, state):
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class InternalError(TileproofError, RuntimeError):
    """A tileproof bug, not the user's mistake: str() starts with "tileproof bug, please report:".

    `rule` is the code of the rule that was running and `query` the solver query (or the
    object being lowered); either may be None, and str() shows those that are set. A rule
    that raises makes its schedule rejected, never accepted.
    """

    def __init__(self, message: str, *, rule: str | None = None, query: str | None = None):
        super().__init__(message)
        self.rule = rule
        self.query = query

    def __str__(self) -> str:
        where = f"rule {self.rule}: " if self.rule is not None else ""
        query = f"\nquery: {self.query}" if self.query is not None else ""
        return f"tileproof bug, please report: {where}{self.args[0]}{query}"


class ScheduleError(TileproofError, ValueError):
    """A schedule-building call received arguments that make no sense.

    Raised at the door ("split: factor must be a positive int or symbol, got -4");
    a well-formed but unsafe schedule is never an exception, it is a Report.
    """


_INTERNAL_DIRS = {"model", "hw", "execution", "verifier", "codegen", "reports"}
# rule_examples.py: the rule docs' builders; a diagnostic points at the doc line that called one
_INTERNAL_FILES = {"__init__.py", "__main__.py", "cli.py", "cli_run.py", "rule_examples.py", "schedule_files.py",
                   "testing.py"}


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
        if _is_users(frame.f_code.co_filename):
            return f"{Path(frame.f_code.co_filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _is_users(filename: str) -> bool:
    """Whether a frame of this file is the user's: not tileproof's, not Python's frozen import
    machinery, not code generated without a file (a dataclass __init__)."""
    if os.path.isabs(filename):  # a relative name resolves against the working directory of the moment
        return _is_users_absolute(filename)
    return filename != "<string>" and not filename.startswith("<frozen") and not _is_internal(Path(filename))


@functools.lru_cache(maxsize=4096)
def _is_users_absolute(filename: str) -> bool:
    """_is_users of an absolute file name, resolved once (every transform a schedule records asks)."""
    return not _is_internal(Path(filename))


def user_traceback(error: BaseException) -> str:
    """The frames of `error`'s traceback that are the user's, as Python prints them
    (`  File "x.py", line 5, in helper` and the line), outermost first; tileproof's own frames
    are left out. '' when the traceback holds none of the user's frames."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _is_users(f.filename)]
    return "".join(traceback.format_list(frames)).rstrip("\n")
