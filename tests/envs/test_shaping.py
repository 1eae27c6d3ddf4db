"""A turn's score and the step reward paid for it."""

from __future__ import annotations

import pytest

from agentenv.envs.shaping import Shaping
from agentenv.errors import ConfigError
from agentenv.grading.result import RunResult

SCORES = [0.25, 0.5, 0.5, 1.0]


def paid(step_reward: str) -> list[float]:
    shaping = Shaping(step_reward=step_reward)
    out, previous = [], None
    for i, score in enumerate(SCORES):
        out.append(shaping.paid(score, previous, i == len(SCORES) - 1))
        previous = score
    return out


def test_delta_pays_each_change_and_sums_to_the_final_score() -> None:
    assert paid("delta") == [0.25, 0.25, 0.0, 0.5]
    assert sum(paid("delta")) == SCORES[-1]


def test_final_pays_only_the_last_step_and_absolute_pays_every_score() -> None:
    assert paid("final") == [0.0, 0.0, 0.0, 1.0]
    assert paid("absolute") == SCORES


def test_the_score_is_the_reward_function_on_the_hidden_result_checked() -> None:
    result = RunResult.from_counts(3, 4, timed_out=False)
    assert Shaping().score(result, "def f(): pass") == 0.75
    assert Shaping().score(result, "   ") == 0.0  # the default's format gate
    assert Shaping(lambda r, c: 1.5).score(result, "x") == 1.0  # clipped to [0, 1]
    with pytest.raises(ConfigError, match="finite"):
        Shaping(lambda r, c: float("nan")).score(result, "x")
    with pytest.raises(ConfigError, match="step_reward"):
        Shaping(step_reward="sometimes")
    assert Shaping(lambda r, c: 0.0).reward_name == "<lambda>"
