"""Curricula by pass rate with code_reward's helpers (agentenv.integrations.trl): the reward
records outcomes per task, a sampler draws batches from them, and a mask marks GRPO groups whose
rewards are all equal (DAPO's dynamic sampling)."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from agentenv.errors import ConfigError
from agentenv.integrations.trl import (
    PassRateCurriculum,
    PassRateSampler,
    group_mask,
    make_code_reward,
    to_records,
)
from agentenv.policies.scripted import fence
from agentenv.tasks.builtin import builtin_tasks

TASKS = [t for t in builtin_tasks() if t.name in ("add", "is_palindrome", "fizzbuzz")]


def _batch(rows: list[dict[str, Any]], group: int) -> dict[str, list[Any]]:
    """TRL's call: every column, one entry per completion, each row repeated ``group`` times."""
    repeated = [row for row in rows for _ in range(group)]
    return {key: [row[key] for row in repeated] for key in rows[0] if key != "prompt"}


def test_the_reward_records_each_rows_outcome_under_its_task() -> None:
    rows = to_records(TASKS)
    curriculum = PassRateCurriculum(TASKS, window=8)
    reward = make_code_reward(curriculum=curriculum)
    by_name = {t.name: t for t in TASKS}
    completions = []
    for row in rows:  # add: right twice; is_palindrome: wrong twice; fizzbuzz: one of each
        right = fence(by_name[row["task_name"]].reference_solution or "")
        wrong = fence(f"def {row['entry_point']}(*args):\n    return None\n")
        completions += {"add": [right, right], "is_palindrome": [wrong, wrong],
                        "fizzbuzz": [right, wrong]}[row["task_name"]]
    rewards = reward(completions=completions, **_batch(rows, 2))
    assert curriculum.window.rates() == {"add": 1.0, "is_palindrome": 0.0, "fizzbuzz": 0.5}
    assert group_mask(rewards, 2) == [False, False, False, False, True, True]


def test_the_reward_without_task_names_cannot_feed_a_curriculum() -> None:
    columns = _batch(to_records(TASKS[:1]), 1)
    del columns["task_name"]
    with pytest.raises(ConfigError, match="task_name"):
        make_code_reward(curriculum=PassRateCurriculum(TASKS))(completions=["x"], **columns)


def test_the_mask_drops_only_groups_whose_rewards_are_all_equal() -> None:
    assert group_mask([1.0, 1.0, 0.0, 1.0, 0.5, 0.5], 2) == [False, False, True, True, False, False]
    assert group_mask([0.2, None, 0.4], 3) == [True] * 3
    with pytest.raises(ConfigError):
        group_mask([1.0, 0.0, 1.0], 2)


def test_the_sampler_draws_groups_of_rows_by_the_live_pass_rates() -> None:
    names = [t.name for t in TASKS]
    curriculum = PassRateCurriculum(names, window=4, seed=0)
    sampler = PassRateSampler(curriculum, names, prompts_per_batch=2, repeat=3, batches=400)
    indices = list(sampler)
    assert len(indices) == len(sampler) == 400 * 2 * 3
    groups = [indices[i:i + 3] for i in range(0, len(indices), 3)]
    assert all(len(set(g)) == 1 for g in groups)  # each row repeated once per generation
    for _ in range(4):  # now add is always solved, is_palindrome never, fizzbuzz half the time
        curriculum.record("add", True)
        curriculum.record("is_palindrome", False)
    for passed in (True, False, True, False):
        curriculum.record("fizzbuzz", passed)
    one = PassRateSampler(curriculum, names, prompts_per_batch=1, repeat=3, batches=400)
    drawn = collections.Counter(names[i] for i in list(one)[::3])
    assert drawn["fizzbuzz"] > 5 * drawn["add"] and drawn["fizzbuzz"] > 5 * drawn["is_palindrome"]
    assert drawn["add"] > 0 and drawn["is_palindrome"] > 0  # the floor: never starved
