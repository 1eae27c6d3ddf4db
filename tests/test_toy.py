"""NumberGuessEnv: the reset/step contract on a game small enough to hold in your head."""

from __future__ import annotations

import pytest

from agentenv import NumberGuessEnv
from agentenv.errors import ConfigError, EnvStateError
from agentenv.toy import RandomGuessPolicy, binary_search_policy, play_episode


def test_binary_search_always_solves_within_seven_guesses() -> None:
    """On [1, 100] binary search needs at most ceil(log2(100)) = 7 guesses."""
    env = NumberGuessEnv(seed=3)
    for _ in range(200):
        steps, ret = play_episode(env, binary_search_policy)
        assert ret == 1.0
        assert 1 <= steps <= 7


def test_random_policy_needs_more_steps_on_average() -> None:
    """The worse policy needs more steps for the same return (the gap RL climbs)."""
    smart = [play_episode(NumberGuessEnv(seed=s), binary_search_policy)[0] for s in range(300)]
    rand_policy = RandomGuessPolicy(seed=0)
    dumb = [play_episode(NumberGuessEnv(seed=s), rand_policy)[0] for s in range(300)]
    assert sum(dumb) / len(dumb) > sum(smart) / len(smart)


def test_observation_narrows_and_reward_is_zero_until_the_hit() -> None:
    """A miss returns reward 0.0, done False, and a narrower range that still holds the secret."""
    env = NumberGuessEnv(seed=11)
    obs = env.reset()
    assert obs == {"low": 1, "high": 100}
    secret = env._secret
    assert secret is not None
    guess = 1 if secret != 1 else 100
    obs, reward, done, _ = env.step(guess)
    assert (reward, done) == (0.0, False)
    assert obs["low"] <= secret <= obs["high"]
    _, reward, done, info = env.step(secret)
    assert (reward, done, info["secret"]) == (1.0, True, secret)


def test_same_seed_gives_same_secrets() -> None:
    """Seeding makes episodes reproducible."""
    a, b = NumberGuessEnv(seed=5), NumberGuessEnv(seed=5)
    assert [a.reset() and a._secret for _ in range(10)] == [b.reset() and b._secret for _ in range(10)]


def test_step_before_reset_says_to_call_reset() -> None:
    """The error names the fix."""
    with pytest.raises(EnvStateError, match=r"reset\(\)"):
        NumberGuessEnv().step(50)


def test_step_after_the_hit_says_to_call_reset() -> None:
    """An ended episode cannot be stepped."""
    env = NumberGuessEnv(seed=0, low=7, high=7)
    env.reset()
    env.step(7)
    with pytest.raises(EnvStateError, match=r"reset\(\)"):
        env.step(7)


def test_max_steps_truncates_the_episode() -> None:
    """An optional step limit ends a failing episode with done=True and truncated in info."""
    env = NumberGuessEnv(seed=0, max_steps=2)
    env.reset()
    secret = env._secret
    wrong = 1 if secret != 1 else 2
    _, _, done, _ = env.step(wrong)
    assert not done
    _, reward, done, info = env.step(wrong)
    assert done and reward == 0.0 and info["truncated"] is True


def test_bad_arguments_get_clear_errors() -> None:
    """Non-int guesses and empty ranges are rejected with ConfigError."""
    with pytest.raises(ConfigError):
        NumberGuessEnv(low=10, high=1)
    env = NumberGuessEnv(seed=0)
    env.reset()
    with pytest.raises(ConfigError, match="int"):
        env.step("50")  # type: ignore[arg-type]
