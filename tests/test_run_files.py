"""The files of a run directory: readable like any other file, and in a deterministic order."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenv.policies import ScriptedPolicy
from agentenv.report import export_credit
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.rollout.store import RunStore
from agentenv.tasks.builtin import builtin_tasks

TASKS = builtin_tasks()[:3]


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_every_file_of_a_run_gets_the_same_mode_as_a_plain_open(tmp_path: Path, umask_022: None) -> None:
    """config.json and summary.json (written via a temporary file) are 0644 like the JSONL."""
    out = tmp_path / "run"
    run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(mode="single_step"), out)
    export_credit(out)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert set(modes) == {"config.json", "summary.json", "trajectories.jsonl", "credit.jsonl"}
    assert set(modes.values()) == {0o644}, modes


def _line(episode_id: str | None) -> str:
    return json.dumps({"episode_id": episode_id, "task_name": "t", "turns": []})


def test_sort_episodes_puts_the_file_in_plan_order_keeping_unplanned_lines_after(tmp_path: Path) -> None:
    """Ranked ids first in rank order; lines the plan does not know keep their order after them."""
    store = RunStore(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    lines = [_line("b#0"), _line("other"), _line("a#0"), _line(None), _line("a#1")]
    store.trajectories_path.write_text("\n".join(lines) + "\n")
    store.sort_episodes({"a#0": 0, "a#1": 1, "b#0": 2})
    ids = [json.loads(line)["episode_id"] for line in store.trajectories_path.read_text().splitlines()]
    assert ids == ["a#0", "a#1", "b#0", "other", None]


def test_sort_episodes_leaves_an_ordered_file_untouched(tmp_path: Path) -> None:
    """Nothing is rewritten when the file is in order already (same inode)."""
    store = RunStore(tmp_path)
    store.trajectories_path.write_text(_line("a#0") + "\n" + _line("a#1") + "\n")
    before = store.trajectories_path.stat().st_ino
    store.sort_episodes({"a#0": 0, "a#1": 1})
    assert store.trajectories_path.stat().st_ino == before
