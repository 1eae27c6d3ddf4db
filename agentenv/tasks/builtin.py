"""The builtin task set: one TOML file per task under the packaged ``tasks/builtin`` folder.

Files are read in name order (``000_add.toml`` first), so task 0 is ``add``. Each file holds
the fields of :class:`agentenv.tasks.Task` at its top level; a malformed file raises
TaskFormatError naming the file, the task and the field.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from agentenv._resources import data_dir
from agentenv.errors import TaskFormatError
from agentenv.tasks.schema import Task

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["builtin_tasks", "load", "load_dir", "load_file"]


def load_file(path: Path) -> Task:
    """Read one TOML task file."""
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError(f"is not valid TOML ({exc}); fix the syntax", path=str(path)) from None
    data.setdefault("source", "builtin")
    return Task.from_dict(data, path=str(path))


def load_dir(directory: Path) -> list[Task]:
    """Read every ``*.toml`` task file in ``directory``, in name order, with unique names."""
    tasks = [load_file(p) for p in sorted(directory.glob("*.toml"))]
    if not tasks:
        raise TaskFormatError("holds no *.toml task files", path=str(directory))
    seen: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.name in seen:
            raise TaskFormatError(f"duplicate task name (also task #{seen[task.name]})",
                                  path=str(directory), task=task.name, field="name")
        seen[task.name] = i
    return tasks


@functools.lru_cache(maxsize=1)
def _builtin_tuple() -> tuple[Task, ...]:
    return tuple(load_dir(data_dir("tasks") / "builtin"))


def builtin_tasks() -> list[Task]:
    """The builtin task set as a fresh list (``agentenv.TASKS``); files are parsed once."""
    return list(_builtin_tuple())


def load(**options: Any) -> list[Task]:
    """Load the builtin task set (takes no loader-specific options)."""
    if options:
        raise TypeError(f"the builtin loader takes no options, got {sorted(options)}")
    return builtin_tasks()
