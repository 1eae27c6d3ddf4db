"""A malformed row column says which row and what to do (ConfigError), not a bare ValueError;
a non-finite episode return never becomes verl's score."""

from __future__ import annotations

import json
import math

import pytest

from agentenv.errors import ConfigError
from agentenv.integrations.trl import code_reward
from agentenv.integrations.verl import DATA_SOURCE, RETURN_KEY, compute_score_batch, to_verl_records
from agentenv.tasks.schema import Task

ADD = Task(name="add", prompt="p", entry_point="add", checks=("assert add(2, 3) == 5",))
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
CHECKS = json.dumps(["assert add(2, 3) == 5"])


@pytest.mark.parametrize("bad", ["x", -1.0, math.inf, [1]])
def test_a_bad_float_tolerance_names_its_row(bad: object) -> None:
    with pytest.raises(ConfigError, match="row 1: float_tolerance"):
        code_reward(completions=[RIGHT, RIGHT], checks=[CHECKS, CHECKS + " "],
                    entry_point=["add", "add"], float_tolerance=[None, bad])


def test_a_null_float_tolerance_pandas_made_nan_is_none() -> None:
    assert code_reward(completions=[RIGHT], checks=[CHECKS], entry_point=["add"],
                       float_tolerance=[float("nan")]) == [1.0]


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_non_finite_episode_return_is_not_the_score(value: float) -> None:
    row = to_verl_records([ADD])[0]
    info = {**row["extra_info"], RETURN_KEY: value}
    out = compute_score_batch([DATA_SOURCE], [RIGHT], [row["reward_model"]["ground_truth"]], [info])
    assert out[0]["score"] == 1.0  # graded from the solution instead
