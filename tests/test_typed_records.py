"""The typed records (step info, run summary, report metrics) have exactly the keys the code
fills in: required keys always there, no key the record does not declare."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from agentenv import MultiTurnCodingEnv
from agentenv.envs.info import StepInfo
from agentenv.policies import ScriptedPolicy
from agentenv.report.compare import compare_runs
from agentenv.report.metrics import run_metrics
from agentenv.report.records import (
    ComparedRun,
    Comparison,
    MetricDifference,
    ReviseResult,
    RunMetrics,
    SingleStepArm,
    TaskRow,
)
from agentenv.report.revise import revise_vs_resample
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.rollout.summary import RunRecord, Summary
from agentenv.rollout.summary import TaskRow as SummaryTaskRow
from agentenv.tasks.builtin import builtin_tasks

TASKS = builtin_tasks()[:3]


def _fits(record: Mapping[str, Any], typed: Any) -> None:
    keys = set(record)
    assert typed.__required_keys__ <= keys, typed.__required_keys__ - keys
    assert keys <= typed.__required_keys__ | typed.__optional_keys__, keys - set(typed.__annotations__)


@pytest.mark.parametrize("feedback_from", ["all", "visible"])
def test_step_info_has_the_declared_keys(feedback_from: str) -> None:
    env = MultiTurnCodingEnv(tasks=TASKS, max_turns=2, feedback_from=feedback_from)
    env.reset(task_index=0)
    _obs, _reward, _done, info = env.step("```python\ndef add(a, b):\n    return a - b\n```")
    _fits(info, StepInfo)
    assert ("delta" in info) is (feedback_from == "all")


def test_summary_and_metrics_have_the_declared_keys() -> None:
    result = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=2, max_turns=2))
    _fits(result.summary, Summary)
    _fits(result.summary["run"], RunRecord)
    for row in result.summary["per_task"]:
        _fits(row, SummaryTaskRow)
    metrics = run_metrics(result.trajectories)
    _fits(metrics, RunMetrics)
    for task_row in metrics["by_task"].values():
        _fits(task_row, TaskRow)


def test_a_comparison_has_the_declared_keys() -> None:
    a = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=2, max_turns=1)).trajectories
    b = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=2, max_turns=2)).trajectories
    comparison = compare_runs(a, b, n_boot=50, n_boot_task=20)
    _fits(comparison, Comparison)
    _fits(comparison["a"], ComparedRun)
    for difference in comparison["overall"].values():
        _fits(difference, MetricDifference)


def test_a_revise_result_has_the_declared_keys() -> None:
    single = run_rollouts(TASKS, ScriptedPolicy(TASKS),
                          RolloutConfig(mode="single_step", samples=2)).trajectories
    multi = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(max_turns=2)).trajectories
    result = revise_vs_resample(single, multi, k=2, n_boot=50)
    _fits(result, ReviseResult)
    _fits(result["single_step"], SingleStepArm)
