"""The builtin task set: one TOML file per task under the packaged ``tasks/builtin`` folder.

Files are read in name order (``000_add.toml`` first), so task 0 is ``add``. Each file holds
the fields of :class:`agentenv.tasks.Task` at its top level; a malformed file raises
TaskFormatError naming the file, the task and the field.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping
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
    """Read one TOML task file. A check that does not compile is named with the line of the
    file it starts on (when its text can be found there)."""
    text = path.read_text(encoding="utf-8")
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError(f"is not valid TOML ({exc}); fix the syntax", path=str(path)) from None
    data.setdefault("source", "builtin")
    try:
        return Task.from_dict(data, path=str(path))
    except TaskFormatError as exc:
        problems = [(f, _with_file_line(m, data, text)) for f, m in exc.problems]
        raise TaskFormatError(problems[0][1], path=exc.path, task=exc.task, problems=problems) from None


_CHECK_REF = re.compile(r"^(checks|visible_checks)\[(\d+)\] ")


def _with_file_line(message: str, data: Mapping[str, Any], text: str) -> str:
    """``message`` about ``checks[i]``, with the line of the file where that check starts."""
    match = _CHECK_REF.match(message)
    checks = data.get(match.group(1)) if match else None
    if match is None or not isinstance(checks, list) or int(match.group(2)) >= len(checks):
        return message
    check = checks[int(match.group(2))]
    first = next((line.strip() for line in str(check).splitlines() if line.strip()), "") \
        if isinstance(check, str) else ""
    lines = text.splitlines()
    found = [i for i, line in enumerate(lines, start=1) if first and first in line]
    return f"{message} [line {found[0]} of the file]" if len(found) == 1 else message


def load_dir(directory: Path, problems: list[str] | None = None) -> list[Task]:
    """Read every ``*.toml`` task file in ``directory``, in name order, with unique names.

    With ``problems`` (a list), a file that does not load adds one line per problem to it and
    is left out, instead of raising: every broken file is reported at once."""
    tasks: list[Task] = []
    files = sorted(directory.glob("*.toml"))
    for path in files:
        try:
            tasks.append(load_file(path))
        except TaskFormatError as exc:
            if problems is None:
                raise
            problems += exc.lines()
    if not files:
        raise TaskFormatError("holds no *.toml task files", path=str(directory))
    seen: dict[str, int] = {}
    unique = []
    for i, task in enumerate(tasks):
        if task.name in seen:
            error = TaskFormatError(f"duplicate task name (also task #{seen[task.name]})",
                                    path=str(directory), task=task.name, field="name")
            if problems is None:
                raise error
            problems.append(str(error))
            continue
        seen[task.name] = i
        unique.append(task)
    return unique


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
