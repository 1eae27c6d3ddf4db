"""Filters applied after any loader: difficulty, tags, release date, dedupe, seeded shuffle, limit.

Also the one table that maps each benchmark's difficulty labels (APPS' "introductory",
TACO's "MEDIUM_HARD", ...) onto agentenv's three levels, so that ``difficulty=`` filters mean
the same thing whatever the source.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterable, Sequence

from agentenv.errors import ConfigError
from agentenv.tasks.schema import DIFFICULTIES, Task

__all__ = ["DIFFICULTY_ALIASES", "apply_filters", "normalize_difficulty"]

# Benchmark labels -> easy/medium/hard. APPS: introductory/interview/competition; TACO:
# EASY..VERY_HARD; LiveCodeBench and LeetCode: easy/medium/hard. Keys are lower-case.
DIFFICULTY_ALIASES: dict[str, str | None] = {
    "easy": "easy", "introductory": "easy", "beginner": "easy", "basic": "easy",
    "medium": "medium", "interview": "medium", "intermediate": "medium",
    "hard": "hard", "competition": "hard", "medium_hard": "hard", "very_hard": "hard",
    "expert": "hard",
    "": None, "none": None, "unknown": None, "unknown_difficulty": None, "n/a": None,
}


def normalize_difficulty(value: object, *, strict: bool = False) -> str | None:
    """Map a benchmark's difficulty label to easy/medium/hard (None when it has none).

    Unrecognised labels give None, or raise ConfigError when ``strict``.
    """
    if value is None:
        return None
    key = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    if key in DIFFICULTY_ALIASES:
        return DIFFICULTY_ALIASES[key]
    if strict:
        raise ConfigError(f"unknown difficulty label {value!r}; use one of {', '.join(DIFFICULTIES)} "
                          f"or a known alias ({', '.join(k for k in DIFFICULTY_ALIASES if k)})")
    return None


def _as_set(value: str | Iterable[str] | None) -> set[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return {v.strip() for v in value.split(",") if v.strip()}
    return set(value)


def _iso_day(value: str | dt.date) -> str:
    """``since`` as a YYYY-MM-DD string, rejecting what is not an ISO date."""
    if isinstance(value, dt.date):
        return value.isoformat()[:10]
    try:
        return dt.date.fromisoformat(str(value).strip()[:10]).isoformat()
    except ValueError:
        raise ConfigError(f"since must be an ISO date such as 2024-08-01, got {value!r}") from None


def apply_filters(
    tasks: Sequence[Task],
    *,
    difficulty: str | Iterable[str] | None = None,
    tags: str | Iterable[str] | None = None,
    since: str | dt.date | None = None,
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
    since_day = _iso_day(since) if since is not None else None
    out: list[Task] = []
    seen: set[str] = set()
    for task in tasks:
        if wanted_difficulty is not None and task.difficulty not in wanted_difficulty:
            continue
        if wanted_tags is not None and not wanted_tags & set(task.tags):
            continue
        if since_day is not None:
            released = str(task.metadata.get("release_date") or "")
            if not released or released[:10] < since_day:
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
