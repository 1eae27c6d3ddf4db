"""The envs flag a step the sandbox could not grade, and no report scores it as 0.

``CodingEnv``/``MultiTurnCodingEnv`` return ``info["infra_error"]`` (None on graded steps), the
trajectory records the fault, the rollout summary and ``agentenv report`` leave such episodes
out of mean reward, pass@1 and pass@k and count them. Faults are injected as in
tests/test_reward_infra_faults.py: the grader raises ``SandboxError``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentenv import CodingEnv, MultiTurnCodingEnv
from agentenv.errors import SandboxError
from agentenv.grading.scoring import SandboxGrader, Scored
from agentenv.records import Trajectory
from agentenv.report.metrics import run_metrics
from agentenv.report.text import format_report
from agentenv.rollout.summary import summarize
from agentenv.tasks import Task

ADD = Task(name="add", prompt="Write `add(a, b)`.", entry_point="add",
           checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0"))
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
LOST = "the sandbox worker died twice while running this submission"


class LostGrader:
    """The sandbox's grader, except that the first ``faults`` submissions lose their worker."""

    def __init__(self, faults: int = 1) -> None:
        self.inner = SandboxGrader()
        self.faults = faults

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        if self.faults:
            self.faults -= 1
            raise SandboxError(LOST)
        return self.inner.score(task, code, timeout=timeout)

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self.score(task, code, timeout=timeout)


def test_coding_env_flags_the_step_and_records_it_unscored() -> None:
    env = CodingEnv(tasks=[ADD], grader=LostGrader())
    env.reset(task_index=0)
    _, reward, done, info = env.step(RIGHT)
    assert info["infra_error"] is not None and LOST in info["infra_error"]
    assert info["outcome"] == "infra_error" and done and reward == 0.0
    assert not info["terminated"] and not info["truncated"]
    trajectory = env.trajectory
    assert trajectory is not None and trajectory.infra_failed and trajectory.turns == []
    assert trajectory.stop_reason == "infra_error"
    again = Trajectory.from_dict(json.loads(json.dumps(trajectory.to_dict())))
    assert again.infra_error == trajectory.infra_error and again.infra_failed


def test_a_graded_step_says_infra_error_none() -> None:
    env = CodingEnv(tasks=[ADD])
    env.reset(task_index=0)
    _, reward, _, info = env.step(RIGHT)
    assert info["infra_error"] is None and reward == 1.0
    assert env.trajectory is not None and not env.trajectory.infra_failed


def test_multiturn_takes_the_turn_back_and_a_later_grade_clears_the_flag() -> None:
    env = MultiTurnCodingEnv(tasks=[ADD], grader=LostGrader(), max_turns=2)
    obs = env.reset(task_index=0)
    obs2, reward, done, info = env.step(WRONG)
    assert info["infra_error"] and not done and reward == 0.0 and info["turn"] == 1
    assert obs2["messages"] == obs["messages"]  # nothing was committed
    assert env.trajectory is not None and env.trajectory.infra_failed
    _, reward, done, info = env.step(RIGHT)
    assert info["infra_error"] is None and done and reward == 1.0 and info["turn"] == 1
    assert not env.trajectory.infra_failed and len(env.trajectory.turns) == 1


def test_astep_flags_it_too() -> None:
    env = MultiTurnCodingEnv(tasks=[ADD], grader=LostGrader())
    env.reset(task_index=0)
    _, _, done, info = asyncio.run(env.astep(RIGHT))
    assert info["infra_error"] and not done


def test_raise_mode_keeps_the_exception() -> None:
    env = CodingEnv(tasks=[ADD], grader=LostGrader(), on_infra_error="raise")
    env.reset(task_index=0)
    with pytest.raises(SandboxError):
        env.step(RIGHT)


def _episodes() -> list[Trajectory]:
    """Two graded single-step episodes (one solved, one not) and one the sandbox lost."""
    out = []
    for grader, action in ((None, RIGHT), (None, WRONG), (LostGrader(), RIGHT)):
        env = CodingEnv(tasks=[ADD], grader=grader)
        env.reset(task_index=0)
        env.step(action)
        assert env.trajectory is not None
        out.append(env.trajectory)
    for i, t in enumerate(out):
        t.episode_id, t.sample = f"add#{i}", i
    return out


def test_summary_and_report_leave_infra_failed_episodes_out_and_count_them() -> None:
    episodes = _episodes()
    summary = summarize(episodes)
    assert summary["infra_errors"] == 1 and summary["episodes"] == 2
    assert summary["mean_reward"] == 0.5 and summary["pass@1"] == 0.5  # not 1/3
    metrics = run_metrics(episodes)
    assert metrics["run"]["infra_errors"] == 1 and metrics["run"]["episodes"] == 2
    assert metrics["overall"]["pass@1"] == 0.5 and metrics["overall"]["mean_reward"] == 0.5
    assert "infra errors: 1 episode" in format_report(metrics)


def test_the_cli_report_shows_the_count(tmp_path: Path, capsys: Any) -> None:
    from agentenv.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectories.jsonl").write_text(
        "".join(json.dumps(t.to_dict()) + "\n" for t in _episodes()), encoding="utf-8")
    assert main(["report", str(run), "--no-credit", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "infra errors: 1 episode" in out
    assert json.loads((run / "report" / "metrics.json").read_text())["run"]["infra_errors"] == 1


def test_rollout_keeps_treating_a_flagged_step_as_a_sandbox_fault() -> None:
    from agentenv.rollout.episode import run_episode

    env = CodingEnv(tasks=[ADD], grader=LostGrader())
    with pytest.raises(SandboxError, match="died twice"):
        run_episode(env, lambda obs: RIGHT, task_index=0)
