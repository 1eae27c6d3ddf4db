"""Choosing one task of a task set: by index or by name, each checked in one place.

:func:`task_index` validates an index (the environments' ``reset(task_index=)``, Gymnasium's
``options={"task_index": ...}``); :func:`index_of` finds a task by name, with a "did you mean"
hint. Both raise ConfigError saying what would have been accepted.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from agentenv.errors import ConfigError
from agentenv.tasks.schema import Task

__all__ = ["index_of", "task_index"]


def task_index(tasks: Sequence[Task], index: Any, *, negative: bool = False) -> int:
    """``index`` if it picks a task of ``tasks`` (an int, not a bool; from the end too when
    ``negative``), else ConfigError."""
    n = len(tasks)
    low = -n if negative else 0
    if isinstance(index, bool) or not isinstance(index, int) or not low <= index < n:
        raise ConfigError(f"task_index must be an int in [0, {n}), got {index!r}")
    return index


def index_of(tasks: Sequence[Task], name: str, *, where: str | None = None) -> int:
    """The index of the task called ``name``; ConfigError with the closest name otherwise.

    ``where`` names the task set (the CLI's ``--tasks`` value) for the message's hint.
    """
    names = [t.name for t in tasks]
    if name in names:
        return names.index(name)
    close = difflib.get_close_matches(str(name), names, n=1)
    if where is None:
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"no task named {name!r}.{hint}")
    hint = f"; did you mean {close[0]!r}?" if close else f"; see `agentenv tasks list --tasks {where}`"
    raise ConfigError(f"no task named {name!r} in {where}{hint}")
