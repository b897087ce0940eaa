"""The search space of tp.autotune: the candidate configurations it expands to, checked at the door.

A space is a dict of parameter name -> list of values (every combination, in the order the lists
give them) or a list of dicts (each a configuration). Values must be what JSON writes back as
itself up to tuples (None, bool, int, float, str, and tuples or lists of them), so that a winner
cached on disk is found again among the candidates. Imports nothing of the package but its errors.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..model.errors import ScheduleError

Config = dict[str, Any]


def expand(space) -> list[Config]:
    """The space's candidate configurations, in order: ScheduleError for an empty space, a value
    JSON cannot hold, a parameter without values, or a configuration given twice."""
    if isinstance(space, Mapping):
        configs = _product(space)
    elif isinstance(space, Sequence) and not isinstance(space, (str, bytes)):
        configs = [_checked_config(c, k) for k, c in enumerate(space)]
    else:
        raise ScheduleError(f"autotune: space must be a dict of parameter name -> list of values, or a list of "
                            f"configurations (dicts), got {type(space).__name__} {space!r:.60}")
    if not configs:
        raise ScheduleError("autotune: the space is empty; give at least one configuration")
    seen: dict[str, int] = {}
    for k, config in enumerate(configs):
        key = config_key(config)
        if key in seen:
            raise ScheduleError(f"autotune: configuration {k} repeats configuration {seen[key]}: {key}")
        seen[key] = k
    return configs


def _product(space: Mapping) -> list[Config]:
    names = list(space)
    if not names:
        return []
    for name in names:
        _check_name(name)
        values = space[name]
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise ScheduleError(f"autotune: space[{name!r}] must be a list of values, got {type(values).__name__} "
                                f"{values!r:.60} (write [{values!r:.40}] for one value)")
        if not values:
            raise ScheduleError(f"autotune: space[{name!r}] has no values")
        for value in values:
            _check_value(name, value)
    return [dict(zip(names, combination)) for combination in itertools.product(*(space[n] for n in names))]


def _checked_config(config, k: int) -> Config:
    if not isinstance(config, Mapping):
        raise ScheduleError(f"autotune: configuration {k} of the space must be a dict of parameter name -> value, "
                            f"got {type(config).__name__} {config!r:.60}")
    for name, value in config.items():
        _check_name(name)
        _check_value(name, value)
    return dict(config)


def _check_name(name) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ScheduleError(f"autotune: a parameter name must be a Python identifier (it is passed as a keyword), "
                            f"got {name!r}")


def _check_value(name: str, value) -> None:
    if not _json_like(value):
        raise ScheduleError(f"autotune: {name}={value!r:.60} cannot be cached on disk; values must be None, bool, "
                            f"int, float, str, or tuples or lists of them (pass a name and map it in the builder)")


def _json_like(value) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, (tuple, list)) and all(map(_json_like, value))


def config_key(config: Config) -> str:
    """The configuration as canonical JSON (sorted names, tuples as lists): its identity on disk."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def shown(config: Config) -> str:
    """The configuration as the keywords of the call that builds it: tile=(128, 256), stages=4."""
    return ", ".join(f"{name}={value!r}" for name, value in config.items())


__all__ = ["Config", "config_key", "expand", "shown"]
