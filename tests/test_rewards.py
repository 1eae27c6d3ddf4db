"""Reward functions: format gate, dense, sparse, outcome levels and combinations."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentenv.errors import ConfigError
from agentenv.grading.result import Failure, RunResult
from agentenv.rewards import (
    checked_reward,
    combine,
    dense_reward,
    format_gate,
    get_reward,
    outcome_reward,
    sparse_reward,
)

CODE = "def f():\n    return 1\n"


def result(passed: int, total: int, kind: str = "assertion") -> RunResult:
    failures = tuple(Failure(i, f"check {i}", kind, "failed") for i in range(passed, total))  # type: ignore[arg-type]
    return RunResult.from_counts(passed, total, timed_out=kind == "timeout", failures=failures)


def test_dense_reward_is_the_fraction_of_checks_passed() -> None:
    """3 of 4 checks -> 0.75."""
    assert dense_reward(result(3, 4), CODE) == 0.75


def test_format_gate_gives_zero_for_empty_code_whatever_the_result() -> None:
    """No code means no credit, even if a result claims passes."""
    assert dense_reward(result(4, 4), "  \n") == 0.0
    assert sparse_reward(result(4, 4), "") == 0.0
    assert format_gate(lambda r, c: 0.9)(result(4, 4), "") == 0.0
    assert format_gate(lambda r, c: 0.9)(result(4, 4), CODE) == 0.9


def test_sparse_reward_is_one_only_when_all_pass() -> None:
    """Partial progress collapses to 0 under the sparse reward."""
    assert sparse_reward(result(4, 4), CODE) == 1.0
    assert sparse_reward(result(3, 4), CODE) == 0.0
    assert sparse_reward(result(0, 4), CODE) == 0.0


def test_outcome_reward_maps_outcomes_to_levels() -> None:
    """A syntax error and a wrong answer can be worth different amounts."""
    fn = outcome_reward({"pass": 1.0, "wrong_answer": 0.2, "syntax_error": 0.0})
    assert fn(result(4, 4), CODE) == 1.0
    assert fn(result(1, 4), CODE) == 0.2
    assert fn(result(0, 4, kind="syntax"), CODE) == 0.0
    with pytest.raises(ConfigError, match="unknown outcome"):
        outcome_reward({"passed": 1.0})


def test_combine_is_a_weighted_mean() -> None:
    """combine({dense: 3, sparse: 1}) on 2/4 passed -> (3*0.5 + 0) / 4."""
    fn = combine({dense_reward: 3.0, sparse_reward: 1.0})
    assert fn(result(2, 4), CODE) == pytest.approx(0.375)
    with pytest.raises(ConfigError):
        combine({dense_reward: -1.0})


def test_checked_reward_clips_and_rejects_bad_values() -> None:
    """User rewards are clipped into [0, 1]; NaN or non-numbers are a clear error."""
    assert checked_reward(lambda r, c: 7, result(1, 1), CODE) == 1.0
    assert checked_reward(lambda r, c: -2.0, result(1, 1), CODE) == 0.0
    with pytest.raises(ConfigError, match="finite"):
        checked_reward(lambda r, c: math.nan, result(1, 1), CODE)
    with pytest.raises(ConfigError, match="number"):
        checked_reward(lambda r, c: "high", result(1, 1), CODE)  # type: ignore[arg-type,return-value]


def test_get_reward_resolves_names_and_passes_callables() -> None:
    """Names map to the builtins; unknown names list the choices."""
    assert get_reward("dense") is dense_reward
    assert get_reward(sparse_reward) is sparse_reward
    with pytest.raises(ConfigError, match="dense"):
        get_reward("shaped")


@given(st.integers(0, 50).flatmap(lambda t: st.tuples(st.integers(0, t), st.just(t))), st.text())
def test_builtin_rewards_stay_in_unit_interval(counts: tuple[int, int], code: str) -> None:
    """Every builtin reward lies in [0, 1] for any counts and any code."""
    r = result(*counts)
    for fn in (dense_reward, sparse_reward):
        assert 0.0 <= fn(r, code) <= 1.0
