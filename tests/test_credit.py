"""Credit assignment: per-turn returns under each scheme and group-normalised advantages."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentenv import MultiTurnCodingEnv
from agentenv.credit import (
    SCHEMES,
    Trajectory,
    TurnRecord,
    credit_rows,
    episode_return,
    group_advantages,
    turn_advantages,
    turn_returns,
    turn_rewards,
)
from agentenv.errors import ConfigError
from agentenv.tasks import Task

rewards_st = st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=8)


def trajectory(rewards: list[float], task: str = "t", sample: int = 0) -> Trajectory:
    """A trajectory whose turns scored ``rewards`` (deltas as the env computes them)."""
    turns, previous = [], 0.0
    for i, r in enumerate(rewards, start=1):
        turns.append(TurnRecord(turn=i, response_text="", code="x = 1", code_hash="h",
                                outcome="pass" if r == 1.0 else "wrong_answer", passed=0, total=4,
                                fraction=r, reward=r, delta=r - previous))
        previous = r
    return Trajectory(task_name=task, turns=turns, sample=sample, stop_reason="max_turns")


def test_credit_reexports_the_records() -> None:
    """agentenv.credit hands out the same TurnRecord and Trajectory as agentenv.records."""
    import agentenv.records as records

    assert TurnRecord is records.TurnRecord and Trajectory is records.Trajectory


def test_each_scheme_on_wrong_half_right() -> None:
    """On rewards 0, .5, 1 with γ=.9 each scheme gives its documented per-turn returns."""
    traj = trajectory([0.0, 0.5, 1.0])
    g = 0.9
    assert turn_returns(traj, "final_only", g) == pytest.approx([g * g, g, 1.0])
    assert turn_returns(traj, "per_turn", g) == [0.0, 0.5, 1.0]
    assert turn_rewards(traj, "improvement", 1.0) == [0.0, 0.5, 0.5]
    assert turn_returns(traj, "improvement", 1.0) == pytest.approx([1.0, 1.0, 0.5])
    # G_t = γ^(T−t+1) R_T − R_{t−1}
    assert turn_returns(traj, "improvement", g) == pytest.approx([g**3, g**2, g - 0.5])
    assert turn_returns(traj, "discounted", g) == pytest.approx([g * 0.5 + g * g, 0.5 + g, 1.0])


def test_the_env_trajectory_feeds_credit_directly() -> None:
    """A real episode's improvement rewards at γ=1 are its records' deltas."""
    task = Task(name="add4", prompt="Write add(a, b).", entry_point="add",
                checks=("assert add(2, 3) == 5", "assert add(10, 5) == 15",
                        "assert add(-1, 1) == 0", "assert add(-4, -6) == -10"))
    env = MultiTurnCodingEnv(tasks=[task], max_turns=3)
    env.reset()
    for body in ("a - b", "abs(a) + abs(b)", "a + b"):
        _, _, done, _ = env.step(f"```python\ndef add(a, b):\n    return {body}\n```")
    assert done and env.trajectory is not None
    assert turn_rewards(env.trajectory, "improvement") == [t.delta for t in env.trajectory.turns]
    assert sum(turn_rewards(env.trajectory, "improvement")) == env.trajectory.final_reward == 1.0


@given(rewards_st)
def test_improvement_deltas_telescope_to_the_final_reward_at_gamma_one(rewards: list[float]) -> None:
    """With γ=1 the improvement rewards are the deltas and sum to the final reward."""
    traj = trajectory(rewards)
    shaped = turn_rewards(traj, "improvement", 1.0)
    assert shaped == pytest.approx([t.delta for t in traj.turns])
    assert math.fsum(shaped) == pytest.approx(traj.final_reward, abs=1e-9)
    assert turn_returns(traj, "improvement", 1.0)[0] == pytest.approx(traj.final_reward, abs=1e-9)


@given(rewards_st, st.floats(min_value=0.0, max_value=1.0))
def test_returns_are_the_discounted_reward_to_go(rewards: list[float], gamma: float) -> None:
    """For every scheme but per_turn, G_t = r_t + γ G_{t+1}."""
    traj = trajectory(rewards)
    for scheme in ("final_only", "improvement", "discounted"):
        r, g = turn_rewards(traj, scheme, gamma), turn_returns(traj, scheme, gamma)
        for t in range(len(r)):
            following = g[t + 1] if t + 1 < len(g) else 0.0
            assert g[t] == pytest.approx(r[t] + gamma * following, abs=1e-9)


@given(st.lists(rewards_st, min_size=1, max_size=6), st.sampled_from(SCHEMES),
       st.sampled_from(["std", "none"]))
def test_group_advantages_sum_to_about_zero(groups: list[list[float]], scheme: str, scale: str) -> None:
    """Within a group (same task) the advantages sum to ~0."""
    trajs = [trajectory(r, task="same", sample=i) for i, r in enumerate(groups)]
    advantages = group_advantages(trajs, scheme=scheme, gamma=0.95, scale=scale)
    assert len(advantages) == len(trajs)
    assert math.fsum(advantages) == pytest.approx(0.0, abs=1e-6)


@given(st.lists(rewards_st, min_size=2, max_size=6))
def test_std_normalised_advantages_have_unit_variance_unless_degenerate(groups: list[list[float]]) -> None:
    """GRPO scaling gives population variance ~1, or all zeros when every return is equal."""
    trajs = [trajectory(r, task="same") for r in groups]
    advantages = group_advantages(trajs, scheme="final_only")
    returns = [episode_return(t, "final_only") for t in trajs]
    mean = sum(returns) / len(returns)
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / len(returns))
    variance = sum(a * a for a in advantages) / len(advantages)
    if std < 1e-6:
        assert advantages == [0.0] * len(trajs)
    elif std > 1e-3:
        assert variance == pytest.approx(1.0, rel=1e-2)
    else:  # eps keeps tiny spreads from blowing up: never above unit variance
        assert variance <= 1.0 + 1e-9


def test_advantages_are_normalised_per_task_and_keep_input_order() -> None:
    """Two tasks interleaved: each is normalised within its own group, in input order."""
    trajs = [trajectory([1.0], "a"), trajectory([0.0], "b"), trajectory([0.0], "a"),
             trajectory([0.0], "b")]
    advantages = group_advantages(trajs)
    assert advantages[0] == pytest.approx(1.0, abs=1e-5)
    assert advantages[2] == pytest.approx(-1.0, abs=1e-5)
    assert advantages[1] == advantages[3] == 0.0  # task b: no signal


def test_turn_advantages_follow_each_turn_with_normalised_rewards_to_go() -> None:
    """Per-turn advantages have one value per turn; the last turn's is its normalised reward."""
    trajs = [trajectory([0.0, 1.0], "a"), trajectory([0.5, 0.5], "a")]
    advs = turn_advantages(trajs, scheme="per_turn", gamma=1.0)
    assert [len(a) for a in advs] == [2, 2]
    flat = [0.0, 1.0, 0.5, 0.5]
    mean = sum(flat) / 4
    std = math.sqrt(sum((x - mean) ** 2 for x in flat) / 4)
    assert advs[0][1] == pytest.approx((1.0 - mean) / std, abs=1e-5)
    assert advs[0][0] == pytest.approx((0.0 - mean) / std + advs[0][1], abs=1e-5)


def test_credit_rows_give_one_json_row_per_turn_with_every_scheme() -> None:
    """credit_rows is JSON-ready: one row per turn, a return and advantages per scheme."""
    trajs = [trajectory([0.0, 0.5, 1.0], "a", 0), trajectory([1.0], "a", 1)]
    rows = credit_rows(trajs, gamma=0.9)
    assert len(rows) == 4
    json.dumps(rows)
    for scheme in SCHEMES:
        assert {f"return_{scheme}", f"adv_{scheme}", f"turn_adv_{scheme}"} <= set(rows[0])
    assert [r["turn"] for r in rows] == [1, 2, 3, 1]
    assert rows[0]["adv_final_only"] == rows[2]["adv_final_only"]  # episode-level, same per turn


def test_unknown_scheme_or_bad_gamma_is_a_config_error() -> None:
    """A misspelt scheme or a gamma outside [0, 1] is refused with the valid choices."""
    traj = trajectory([0.5])
    with pytest.raises(ConfigError, match="final_only"):
        turn_returns(traj, "finall")
    with pytest.raises(ConfigError, match="gamma"):
        turn_returns(traj, "discounted", gamma=1.5)
    with pytest.raises(ConfigError, match="scale"):
        group_advantages([traj], scale="max")


def test_an_episode_without_turns_has_no_returns() -> None:
    """An empty trajectory gives empty returns and a zero episode return."""
    empty = Trajectory(task_name="t")
    assert turn_returns(empty, "discounted") == [] and episode_return(empty, "improvement") == 0.0
