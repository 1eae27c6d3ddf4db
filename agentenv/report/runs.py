"""Reading a run directory: ``trajectories.jsonl`` (one episode per line) and ``summary.json``.

Owns the loading, the validation that makes a bad file one clear error naming the file and the
line, and the small questions every analysis asks of a run first: which mode it was, which
template ids it used, and its episodes grouped by task. Not here: any metric.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv.errors import RunFormatError
from agentenv.log import get_logger
from agentenv.records import Trajectory

__all__ = [
    "SUMMARY_FILE",
    "TRAJECTORIES_FILE",
    "by_task",
    "load_run",
    "load_summary",
    "mixed_templates",
    "mixed_templates_warning",
    "run_mode",
    "run_settings",
    "task_order",
    "trajectories_path",
]

TRAJECTORIES_FILE = "trajectories.jsonl"
SUMMARY_FILE = "summary.json"

_log = get_logger(__name__)


def trajectories_path(run: str | Path) -> Path:
    """The ``trajectories.jsonl`` of a run: ``run`` is the run directory or the file itself."""
    path = Path(run)
    if path.is_file():
        return path
    hint = (f"pass a run directory written by `agentenv run` (it holds {TRAJECTORIES_FILE} and "
            f"{SUMMARY_FILE}) or the path of a {TRAJECTORIES_FILE}")
    if path.suffix == ".jsonl" or not path.is_dir():
        raise RunFormatError(f"no such file or run directory; {hint}", path=str(path))
    path = path / TRAJECTORIES_FILE
    if not path.is_file():
        raise RunFormatError(f"no such file: the run has not finished an episode yet, or {hint}",
                             path=str(path))
    return path


def load_run(run: str | Path, *, partial: bool = False) -> list[Trajectory]:
    """Every episode of a run, in file order, as :class:`~agentenv.records.Trajectory` objects.

    Blank lines are skipped, and so is a torn last line (no newline at the end and not JSON: an
    episode being written when the file was read). An episode written twice (an ``episode_id``
    seen again) counts once: the last line wins, except that a partial record (an episode the
    infrastructure stopped, to be continued by a resume) never replaces a finished one.
    Episodes still partial are left out (they are not finished: no metric may count them)
    unless ``partial=True``. A line that is not a JSON object, or that does not hold a
    trajectory, raises :class:`~agentenv.errors.RunFormatError` naming the file and the line.
    """
    path = trajectories_path(run)
    episodes: dict[str, Trajectory] = {}
    anonymous: list[tuple[int, Trajectory]] = []
    order: dict[str, int] = {}
    duplicates = 0
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RunFormatError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                             path=str(path)) from None
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        lineno = index + 1
        if index == last and not text.endswith("\n") and not _is_json(line):
            # A run still being written (or killed mid-write) leaves a torn last line.
            _log.warning("torn_last_line_skipped", path=str(path), line=lineno)
            continue
        trajectory = _parse_line(line, path, lineno)
        if trajectory.episode_id is None:
            anonymous.append((lineno, trajectory))
            continue
        previous = episodes.get(trajectory.episode_id)
        if previous is None:
            order[trajectory.episode_id] = lineno
        elif not previous.partial:
            duplicates += 1  # a partial record superseded by its finished one is no duplicate
            if trajectory.partial:
                continue
        episodes[trajectory.episode_id] = trajectory
    if duplicates:
        _log.warning("duplicate_episodes", path=str(path), count=duplicates, kept="last")
    unfinished = [eid for eid, t in episodes.items() if t.partial]
    if unfinished and not partial:
        _log.warning("partial_episodes_skipped", path=str(path), count=len(unfinished),
                     hint="resume the run (the same `agentenv run` command) to finish them")
        for eid in unfinished:
            del episodes[eid]
    ordered = sorted([(order[eid], t) for eid, t in episodes.items()] + anonymous,
                     key=lambda pair: pair[0])
    if not ordered:
        raise RunFormatError("holds no episodes; did the run finish any?", path=str(path))
    return [t for _, t in ordered]


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def _parse_line(line: str, path: Path, lineno: int) -> Trajectory:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RunFormatError(f"not valid JSON ({exc.msg} at column {exc.colno}); the line may "
                             "be cut short by an interrupted run: delete it and re-run to resume",
                             path=str(path), line=lineno) from None
    if not isinstance(data, dict):
        raise RunFormatError(f"expected a JSON object (one trajectory), got {type(data).__name__}",
                             path=str(path), line=lineno)
    if not isinstance(data.get("task_name"), str):
        raise RunFormatError("missing the string field 'task_name'; is this a trajectories file?",
                             path=str(path), line=lineno)
    turns = data.get("turns", [])
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise RunFormatError("field 'turns' must be a list of turn objects",
                             path=str(path), line=lineno)
    try:
        return Trajectory.from_dict(data)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise RunFormatError(f"not a trajectory record: {exc}", path=str(path), line=lineno) from None


def load_summary(run: str | Path) -> dict[str, Any] | None:
    """The run's ``summary.json`` as a dict, or None when the run has none."""
    path = Path(run)
    if path.is_file():
        path = path.parent
    path = path / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFormatError(f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})",
                             path=str(path), line=exc.lineno) from None
    if not isinstance(data, dict):
        raise RunFormatError("expected a JSON object", path=str(path))
    return data


def run_mode(trajectories: Sequence[Trajectory]) -> str:
    """``"single_step"`` or ``"multi_turn"``; a run that mixes the two is an error."""
    modes = {t.mode for t in trajectories}
    if len(modes) != 1:
        raise RunFormatError(f"a run must hold one mode, found {sorted(modes)}; split the "
                             "episodes into one run directory per mode")
    return modes.pop()


def task_order(name: str) -> tuple[Any, ...]:
    """Sort key for task names: digit runs compare as numbers ("HumanEval/2" before "/10")."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", name) if part)


def by_task(trajectories: Sequence[Trajectory]) -> dict[str, list[Trajectory]]:
    """Episodes grouped by task name, tasks in name order (:func:`task_order`) and samples by
    index, so every table built on it is the same whatever order the episodes finished in."""
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for trajectory in trajectories:
        groups[trajectory.task_name].append(trajectory)
    return {name: sorted(groups[name], key=lambda t: (t.sample, t.episode_id or ""))
            for name in sorted(groups, key=task_order)}


def run_settings(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """What the episodes say about how the run was made (each a sorted list of distinct values)."""

    def distinct(values: Any) -> list[Any]:
        return sorted({v for v in values if v is not None}, key=str)

    template_sets = {json.dumps(t.template_ids, sort_keys=True) for t in trajectories}
    mixed = mixed_templates(trajectories)
    return {
        "mode": distinct(t.mode for t in trajectories),
        "policy": distinct(t.policy for t in trajectories),
        "model": distinct(t.model for t in trajectories),
        "max_turns": distinct(t.max_turns for t in trajectories),
        "token_budget": distinct(t.token_budget for t in trajectories),
        "feedback_from": distinct(t.feedback_from for t in trajectories),
        "tokenizer": distinct(t.metadata.get("tokenizer") for t in trajectories),
        "template_ids": [json.loads(s) for s in sorted(template_sets)],
        "mixed_templates": mixed,
    }


def mixed_templates(trajectories: Sequence[Trajectory]) -> dict[str, dict[str, int]]:
    """The templates a run used in more than one version (a template edited between a run and
    its resume): ``{name: {template id: episodes}}``; empty when every episode used the same."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for trajectory in trajectories:
        for name, template_id in trajectory.template_ids.items():
            counts[name][template_id] += 1
    return {name: dict(sorted(ids.items())) for name, ids in sorted(counts.items()) if len(ids) > 1}


def mixed_templates_warning(mixed: dict[str, dict[str, int]], label: str = "the run") -> str | None:
    """One line saying which templates ``label`` mixes, with the episodes of each version."""
    if not mixed:
        return None
    parts = [f"{name} (" + ", ".join(f"{tid}: {n} episode{'s' if n != 1 else ''}"
                                     for tid, n in ids.items()) + ")" for name, ids in mixed.items()]
    return (f"{label} mixes template versions: {'; '.join(parts)}; a template was edited between "
            "runs into the same --out, so its metrics average over both versions")
