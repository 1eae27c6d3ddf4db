"""Curricula by pass rate and DAPO's dynamic sampling in the rollout runner
(agentenv.rollout.curriculum): tasks drawn by a running pass-rate window, groups whose rewards
are all equal dropped."""

from __future__ import annotations

import collections
import itertools
from pathlib import Path

import pytest

from agentenv.errors import ConfigError
from agentenv.policies.scripted import fence
from agentenv.rollout import (
    PassRateCurriculum,
    PassRateWindow,
    RolloutConfig,
    informative,
    run_curriculum,
    split_groups,
)
from agentenv.tasks.builtin import builtin_tasks


def test_the_window_keeps_only_the_last_outcomes() -> None:
    window = PassRateWindow(window=4)
    assert window.rate("t") is None
    for passed in (False, False, False, False, True, True):
        window.record("t", passed)
    assert window.seen("t") == 4
    assert window.rate("t") == 0.5  # the first two failures are forgotten


def test_weights_favour_tasks_solved_about_half_the_time() -> None:
    curriculum = PassRateCurriculum(["easy", "hard", "edge", "new"], window=4, floor=0.05)
    for _ in range(4):
        curriculum.record("easy", True)
        curriculum.record("hard", False)
    for passed in (True, False, True, False):
        curriculum.record("edge", passed)
    assert curriculum.weight("edge") == 1.0
    assert curriculum.weight("easy") == curriculum.weight("hard") == 0.05
    assert curriculum.weight("new") == 1.0  # unseen: explored
    drawn = collections.Counter(name for _ in range(3000) for name in curriculum.sample(1))
    assert drawn["edge"] > 5 * drawn["easy"] and drawn["edge"] > 5 * drawn["hard"]
    assert drawn["easy"] > 0 and drawn["hard"] > 0  # the floor: no task is starved


def test_a_draw_holds_distinct_tasks_and_is_reproducible() -> None:
    names = [f"t{i}" for i in range(6)]
    a, b = PassRateCurriculum(names, seed=3), PassRateCurriculum(names, seed=3)
    draws = [a.sample(4) for _ in range(5)]
    assert draws == [b.sample(4) for _ in range(5)]
    assert all(len(set(d)) == 4 for d in draws)
    assert sorted(a.sample(10)) == sorted(names)
    with pytest.raises(ConfigError):
        a.sample(0)


def test_groups_whose_rewards_are_all_equal_are_dropped() -> None:
    assert not informative([1.0, 1.0, 1.0])
    assert not informative([0.0, 0.0])
    assert informative([0.0, 0.5])
    assert not informative([0.5, None])  # a fault is left out; one reward has no variance
    assert informative([None, 0.2, 0.4])
    kept, dropped = split_groups({"a": [1.0, 1.0], "b": [0.0, 1.0], "c": [0.25, 0.25], "d": [0.3, 0.2]})
    assert kept == ["b", "d"] and dropped == ["a", "c"]


def _policy() -> object:
    """Always right on ``add``, always wrong on ``is_palindrome``, alternately on ``fizzbuzz``."""
    tasks = {t.name: t for t in builtin_tasks()}
    calls: dict[str, itertools.count[int]] = collections.defaultdict(itertools.count)

    def policy(obs: dict) -> str:
        name = obs["task_name"]
        right = name == "add" or (name == "fizzbuzz" and next(calls[name]) % 2 == 0)
        if right:
            return fence(tasks[name].reference_solution or "")
        return fence(f"def {obs['entry_point']}(*args):\n    return None\n")

    policy.blocking = False  # type: ignore[attr-defined]
    return policy


def test_the_runner_draws_by_pass_rate_and_keeps_only_informative_groups(tmp_path: Path) -> None:
    tasks = [t for t in builtin_tasks() if t.name in ("add", "is_palindrome", "fizzbuzz")]
    config = RolloutConfig(mode="single_step", samples=2, seed=1, concurrency=2)
    curriculum = PassRateCurriculum(tasks, window=4, seed=1)
    result = run_curriculum(tasks, _policy(), config, tmp_path / "run", rounds=3, tasks_per_round=3,
                            curriculum=curriculum)
    assert len(result.rounds) == 3
    first = result.rounds[0]
    assert sorted(first.drawn) == ["add", "fizzbuzz", "is_palindrome"]
    assert set(first.weights.values()) == {1.0}  # nothing seen yet
    for r in result.rounds:  # only fizzbuzz's groups have rewards that differ
        assert set(r.kept) <= {"fizzbuzz"}
        assert set(r.dropped) == set(r.drawn) - {"fizzbuzz"}
    assert all(sorted(t.task_name for t in group) == ["fizzbuzz"] * 2 for group in result.groups)
    assert result.rounds[1].weights == {"add": 0.05, "is_palindrome": 0.05, "fizzbuzz": 1.0}
    assert result.pass_rates == {"add": 1.0, "is_palindrome": 0.0, "fizzbuzz": 0.5}
    assert (tmp_path / "run" / "round-000" / "trajectories.jsonl").is_file()
    # round seeds differ, so a task drawn again gets new episodes
    seeds = {r.index: {t.seed for t in r.result.trajectories} for r in result.rounds}
    assert seeds[0].isdisjoint(seeds[1])


def test_a_curriculum_run_again_into_its_directory_replays_its_draws_without_new_episodes(
        tmp_path: Path) -> None:
    tasks = [t for t in builtin_tasks() if t.name in ("add", "is_palindrome", "fizzbuzz", "is_leap_year")]
    config = RolloutConfig(mode="single_step", samples=2, seed=4, concurrency=2)
    first = run_curriculum(tasks, _policy(), config, tmp_path / "run", rounds=2, tasks_per_round=2)
    again = run_curriculum(tasks, _policy(), config, tmp_path / "run", rounds=2, tasks_per_round=2)
    assert [r.drawn for r in again.rounds] == [r.drawn for r in first.rounds]
    assert all(r.result.skipped == 4 for r in again.rounds)
    assert again.pass_rates == first.pass_rates and len(first.pass_rates) >= 2  # outcomes read back


def test_a_group_of_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="samples >= 2"):
        run_curriculum(builtin_tasks()[:2], _policy(), RolloutConfig(samples=1), rounds=1, tasks_per_round=1)
