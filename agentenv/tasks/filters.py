"""Filters applied after any loader: difficulty, tags, release date, dedupe, seeded shuffle, limit."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from agentenv.errors import ConfigError
from agentenv.tasks.schema import DIFFICULTIES, Task

__all__ = ["apply_filters"]


def _as_set(value: str | Iterable[str] | None) -> set[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return {v.strip() for v in value.split(",") if v.strip()}
    return set(value)


def apply_filters(
    tasks: Sequence[Task],
    *,
    difficulty: str | Iterable[str] | None = None,
    tags: str | Iterable[str] | None = None,
    since: str | None = None,
    dedupe: bool = False,
    shuffle_seed: int | None = None,
    limit: int | None = None,
) -> list[Task]:
    """Return the tasks that pass every filter, in order (or shuffled with ``shuffle_seed``).

    ``difficulty`` and ``tags`` accept a comma-separated string or an iterable; a task is kept
    when its difficulty is listed and it carries at least one listed tag. ``since`` keeps tasks
    whose ``metadata["release_date"]`` (ISO date) is on or after it. ``dedupe`` drops tasks
    whose prompt hash was already seen. ``limit`` is applied last.
    """
    wanted_difficulty = _as_set(difficulty)
    if wanted_difficulty is not None and not wanted_difficulty <= set(DIFFICULTIES):
        raise ConfigError(
            f"unknown difficulty {sorted(wanted_difficulty - set(DIFFICULTIES))}; "
            f"use one or more of {', '.join(DIFFICULTIES)}"
        )
    wanted_tags = _as_set(tags)
    out: list[Task] = []
    seen: set[str] = set()
    for task in tasks:
        if wanted_difficulty is not None and task.difficulty not in wanted_difficulty:
            continue
        if wanted_tags is not None and not wanted_tags & set(task.tags):
            continue
        if since is not None:
            released = str(task.metadata.get("release_date") or "")
            if not released or released[:10] < since[:10]:
                continue
        if dedupe:
            if task.prompt_hash in seen:
                continue
            seen.add(task.prompt_hash)
        out.append(task)
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(out)
    if limit is not None:
        if limit < 0:
            raise ConfigError(f"limit must be >= 0, got {limit}")
        out = out[:limit]
    return out
