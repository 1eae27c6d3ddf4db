"""Returns that equal the episode's score: step rewards in the envs and Gymnasium, episode returns
and GRPO/RLOO advantages in agentenv.credit (TRL's formula for each scale_rewards option)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv.credit import episode_return, group_advantages
from agentenv.envs.coding import CodingEnv
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import ConfigError
from agentenv.records import Trajectory, TurnRecord
from agentenv.tasks import Task

ADD4 = Task(name="add4", prompt="Write `add(a, b)`.", entry_point="add",
            checks=("assert add(2, 3) == 5", "assert add(10, 5) == 15",
                    "assert add(-1, 1) == 0", "assert add(-4, -6) == -10"))
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"       # 0 of 4
HALF = "```python\ndef add(a, b):\n    return abs(a) + abs(b)\n```"  # 2 of 4
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


def play(env: MultiTurnCodingEnv, answers: Sequence[str]) -> tuple[list[float], Trajectory]:
    env.reset(task_index=0)
    rewards, done, i = [], False, 0
    while not done:
        _, reward, done, _ = env.step(answers[min(i, len(answers) - 1)])
        rewards.append(reward)
        i += 1
    assert env.trajectory is not None
    return rewards, env.trajectory


@pytest.mark.parametrize("answers", [[WRONG, HALF, RIGHT], [HALF, HALF, HALF], [HALF, WRONG, WRONG],
                                     [RIGHT], [WRONG]])
def test_by_default_the_summed_step_rewards_equal_the_final_score(answers: list[str]) -> None:
    rewards, trajectory = play(MultiTurnCodingEnv(tasks=[ADD4], max_turns=3), answers)
    assert math.isclose(sum(rewards), trajectory.final_reward, abs_tol=1e-12)
    assert math.isclose(episode_return(trajectory, "delta"), trajectory.final_reward, abs_tol=1e-12)


def test_stalling_no_longer_beats_solving() -> None:
    """Three turns at 0.5 used to earn 1.5, more than solving on turn 1 (1.0)."""
    stall, _ = play(MultiTurnCodingEnv(tasks=[ADD4], max_turns=3), [HALF])
    solve, _ = play(MultiTurnCodingEnv(tasks=[ADD4], max_turns=3), [RIGHT])
    assert sum(stall) == 0.5 < sum(solve) == 1.0
    stall_abs, _ = play(MultiTurnCodingEnv(tasks=[ADD4], max_turns=3, step_reward="absolute"), [HALF])
    assert sum(stall_abs) == 1.5  # the option keeps today's per-turn score


def test_final_pays_only_the_last_step() -> None:
    rewards, trajectory = play(MultiTurnCodingEnv(tasks=[ADD4], max_turns=3, step_reward="final"),
                               [WRONG, HALF, RIGHT])
    assert rewards == [0.0, 0.0, 1.0]
    assert episode_return(trajectory, "final") == 1.0
    assert trajectory.metadata["step_reward"] == "final"


def test_episode_returns_follow_the_env_definitions() -> None:
    """episode_return under each step_reward name equals that env's summed step rewards."""
    for mode in ("delta", "final", "absolute"):
        rewards, trajectory = play(MultiTurnCodingEnv(tasks=[ADD4], max_turns=3, step_reward=mode),
                                   [WRONG, HALF, HALF])
        assert math.isclose(episode_return(trajectory, mode), sum(rewards), abs_tol=1e-12), mode


def test_a_repaired_episode_ranks_above_one_never_solved() -> None:
    """[0, 1] returns 1.0 and [0.9, 0.9, 0.9] returns 0.9 (the per-turn mean ranked them the other way)."""
    repaired, stuck = traj([0.0, 1.0]), traj([0.9, 0.9, 0.9])
    for scheme in ("delta", "final", "improvement", "final_only"):
        assert episode_return(repaired, scheme) > episode_return(stuck, scheme)


def test_single_step_reward_is_the_score_in_every_mode() -> None:
    for mode in ("delta", "final", "absolute"):
        env = CodingEnv(tasks=[ADD4], step_reward=mode)
        env.reset(task_index=0)
        assert env.step(HALF)[1] == 0.5


def test_gymnasium_summed_reward_equals_the_final_score() -> None:
    pytest.importorskip("gymnasium")
    from agentenv.gym import MultiTurnCodingGymEnv

    for mode, expected in (("delta", 1.0), ("final", 1.0), ("absolute", 1.5)):
        env = MultiTurnCodingGymEnv(tasks=[ADD4], max_turns=3, step_reward=mode)
        env.reset(seed=0)
        total = 0.0
        for answer in (WRONG, HALF, RIGHT):
            _, reward, terminated, truncated, _ = env.step(answer)
            total += float(reward)
        assert terminated and not truncated
        assert math.isclose(total, expected), mode


def test_bad_step_reward_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="step_reward must be one of delta, final, absolute"):
        MultiTurnCodingEnv(step_reward="sum")


# -- advantages ------------------------------------------------------------------------------

def traj(scores: list[float], task: str = "t", sample: int = 0) -> Trajectory:
    turns, previous = [], 0.0
    for i, r in enumerate(scores, start=1):
        turns.append(TurnRecord(turn=i, response_text="", code="x", code_hash="h",
                                outcome="pass" if r == 1.0 else "wrong_answer", passed=0, total=1,
                                fraction=r, reward=r, delta=r - previous))
        previous = r
    return Trajectory(task_name=task, turns=turns, sample=sample, stop_reason="max_turns")


def trl_reference(rewards: list[float], group_size: int, scale_rewards: str) -> list[float]:
    """TRL GRPOTrainer's advantages, written from its formula: groups of consecutive rewards,
    (r - group mean) / (std + 1e-4), torch's default (Bessel-corrected) std."""
    out = []
    batch_std = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    for start in range(0, len(rewards), group_size):
        group = rewards[start:start + group_size]
        mean = statistics.fmean(group)
        std = statistics.stdev(group) if scale_rewards == "group" else batch_std
        for r in group:
            out.append(r - mean if scale_rewards == "none" else (r - mean) / (std + 1e-4))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(0, 1, allow_nan=False), min_size=4, max_size=4), min_size=1, max_size=5),
       st.sampled_from(["group", "batch", "none"]))
def test_grpo_advantages_equal_trls_formula(groups: list[list[float]], scale_rewards: str) -> None:
    trajectories = [traj([r], task=f"task{g}", sample=i) for g, rs in enumerate(groups) for i, r in enumerate(rs)]
    ours = group_advantages(trajectories, scale_rewards=scale_rewards)
    expected = trl_reference([r for rs in groups for r in rs], 4, scale_rewards)
    assert ours == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_grpo_advantages_by_hand() -> None:
    """Rewards 0, 0, 1, 1: mean .5, Bessel std sqrt(1/3); TRL divides by std + 1e-4."""
    trajectories = [traj([r], sample=i) for i, r in enumerate([0.0, 0.0, 1.0, 1.0])]
    std = math.sqrt(1 / 3)
    assert group_advantages(trajectories, scale_rewards="group") == pytest.approx(
        [-0.5 / (std + 1e-4)] * 2 + [0.5 / (std + 1e-4)] * 2, rel=1e-15)


def test_rloo_uses_the_mean_of_the_other_samples() -> None:
    trajectories = [traj([r], sample=i) for i, r in enumerate([0.0, 0.5, 1.0])]
    assert group_advantages(trajectories, scale_rewards="none", baseline="loo") == pytest.approx(
        [0.0 - 0.75, 0.5 - 0.5, 1.0 - 0.25])
    assert group_advantages([traj([1.0])], scale_rewards="none", baseline="loo") == [0.0]


def test_trl_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="scale_rewards"):
        group_advantages([traj([1.0])], scale_rewards="max")
    with pytest.raises(ConfigError, match="loo"):
        group_advantages([traj([1.0])], baseline="loo")
