"""Revise vs resample offline, for real: the scripted policy samples per seed, the study gives a
non-degenerate interval, and the report warns when a study is degenerate or a 'difference' is
rounding noise or a single pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.policies import ScriptedPolicy
from agentenv.report import compare_runs, revise_vs_resample
from agentenv.report.stats import bootstrap_difference, paired_bootstrap
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.tasks.builtin import builtin_tasks

TASKS = builtin_tasks()


@pytest.fixture(scope="module")
def offline_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("study")
    runs = {"single": root / "single", "multi": root / "multi", "single_fixed": root / "fixed"}
    run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(mode="single_step", samples=3, seed=1),
                 runs["single"])
    run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(max_turns=3, samples=3, seed=1), runs["multi"])
    run_rollouts(TASKS, ScriptedPolicy(TASKS, sample=False), RolloutConfig(mode="single_step", samples=3, seed=1),
                 runs["single_fixed"])
    return runs


def test_the_offline_study_is_not_degenerate(offline_runs: dict[str, Path]) -> None:
    """With per-sample seeds, samples differ, resampling sometimes wins, and the interval of
    revise − 1@3 has width (the audit's artefact was +1.000 with CI [1, 1])."""
    result = revise_vs_resample(offline_runs["single"], offline_runs["multi"], n_boot=2000)
    diff = result["revise_minus_1@k"]
    assert diff["low"] < diff["high"]
    assert 0.0 < result["overall"]["1@k"] < 1.0 and 0.0 < result["overall"]["pass@1"] < 1.0
    assert diff["estimate"] < 1.0
    assert not any("identical single-step samples" in w or "zero variance" in w for w in result["warnings"])


def test_an_arm_at_its_ceiling_on_every_task_is_warned_about(offline_runs: dict[str, Path]) -> None:
    """The scripted policy's script ends in the reference within 3 turns, so revising solves every
    task by turn 3: the interval then only measures the resample arm, and the report says so.
    Read up to turn 2, both arms vary and nothing is said."""
    at_3 = revise_vs_resample(offline_runs["multi"], offline_runs["multi"], n_boot=200)
    assert {row["solve@k"] for row in at_3["by_task"].values()} == {1.0}
    assert any("multi-turn arm's solve@k is 1.000 on every task" in w for w in at_3["warnings"])
    at_2 = revise_vs_resample(offline_runs["multi"], offline_runs["multi"], k=2, n_boot=200)
    assert len({row["solve@k"] for row in at_2["by_task"].values()}) > 1
    assert not any("on every task" in w for w in at_2["warnings"])


def test_a_policy_that_does_not_sample_is_warned_about(offline_runs: dict[str, Path]) -> None:
    result = revise_vs_resample(offline_runs["single_fixed"], offline_runs["multi"], n_boot=500)
    assert any("identical single-step samples" in w for w in result["warnings"])


def test_zero_variance_differences_are_warned_about(offline_runs: dict[str, Path]) -> None:
    """Unsampled single-step against unsampled multi-turn: the audit's artefact (+1 on every
    task, CI [1, 1]); now it comes with a warning."""
    from agentenv.rollout.store import read_trajectories

    fixed = read_trajectories(offline_runs["single_fixed"])
    multi_fixed = run_rollouts(TASKS, ScriptedPolicy(TASKS, sample=False),
                               RolloutConfig(max_turns=3, samples=1, seed=1), None).trajectories
    result = revise_vs_resample(fixed, multi_fixed, n_boot=200)
    diff = result["revise_minus_1@k"]
    assert diff["estimate"] == diff["low"] == diff["high"] == 1.0
    assert any("zero variance" in w for w in result["warnings"])
    assert any("identical single-step samples" in w for w in result["warnings"])


def test_a_single_pair_is_never_significant() -> None:
    assert not paired_bootstrap([0.8], n_boot=200).excludes_zero
    assert not bootstrap_difference([[0.0]], [[1.0]], n_boot=200)[0].excludes_zero


def test_rounding_noise_is_never_significant() -> None:
    noise = [1e-17, 2e-17, 3e-17, 1.5e-17]
    interval = paired_bootstrap(noise, n_boot=500)
    assert interval.low > 0.0 and not interval.excludes_zero
    assert paired_bootstrap([0.1, 0.2, 0.15, 0.3], n_boot=500).excludes_zero  # real signal still is


def test_compare_flags_neither_noise_nor_one_task(offline_runs: dict[str, Path]) -> None:
    from agentenv.rollout.store import read_trajectories

    runs = read_trajectories(offline_runs["multi"])
    same = compare_runs(runs, runs, n_boot=300)
    assert not any(m["difference"]["excludes_zero"] for m in same["overall"].values())
    one_task = [t for t in runs if t.task_name == TASKS[0].name]
    other = [t for t in read_trajectories(offline_runs["single"]) if t.task_name == TASKS[0].name]
    result = compare_runs(other, one_task, n_boot=300)
    assert not any(m["difference"]["excludes_zero"] for m in result["overall"].values())


def test_a_multi_turn_run_can_be_the_resample_arm_with_identical_prompts(offline_runs: dict[str, Path]) -> None:
    """Its first turns are the fresh samples: both arms were posed the very same prompts."""
    same = revise_vs_resample(offline_runs["multi"], offline_runs["multi"], n_boot=500)
    assert same["single_step"]["from_first_turns"]
    assert not any("announce one attempt" in w for w in same["warnings"])
    single = revise_vs_resample(offline_runs["single"], offline_runs["multi"], n_boot=500)
    assert any("announce one attempt" in w for w in single["warnings"])
    assert same["revise_minus_1@k"]["low"] < same["revise_minus_1@k"]["high"]


def test_report_takes_one_multi_turn_run_twice(offline_runs: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from agentenv.cli import main

    run = str(offline_runs["multi"])
    assert main(["report", run, run, "--out", str(tmp_path / "r")]) == 0
    assert "revise - 1@3" in capsys.readouterr().out
