"""The teaching toy: a number-guessing game with the same reset/step contract as the coding envs.

``NumberGuessEnv`` hides a secret in [low, high] (default [1, 100]); a guess is rewarded 1.0
on a hit, else 0.0 with a narrowed range as the next observation. Two policies come with it:
``binary_search_policy`` (optimal, at most 7 guesses on [1, 100]) and ``RandomGuessPolicy``
(guesses uniformly inside the current range). There are no labels anywhere in this loop, only
rewards and observations. Not here: anything about code or sandboxes.
"""

from __future__ import annotations

import random
from typing import Any

from agentenv.errors import ConfigError, EnvStateError

__all__ = ["NumberGuessEnv", "RandomGuessPolicy", "binary_search_policy", "play_episode"]


class NumberGuessEnv:
    """Guess the secret number in [low, high]. Reward 1.0 on a hit, else 0.0."""

    def __init__(self, seed: int | None = None, low: int = 1, high: int = 100,
                 max_steps: int | None = None) -> None:
        if low > high:
            raise ConfigError(f"NumberGuessEnv needs low <= high, got low={low}, high={high}")
        self._rng = random.Random(seed)
        self.range = (low, high)
        self.max_steps = max_steps
        self._secret: int | None = None
        self._low, self._high = low, high
        self._steps = 0
        self._done = True

    def reset(self) -> dict[str, int]:
        """Draw a new secret and return the full range as the first observation."""
        self._secret = self._rng.randint(*self.range)
        self._low, self._high = self.range
        self._steps = 0
        self._done = False
        return {"low": self._low, "high": self._high}

    def step(self, guess: int) -> tuple[dict[str, int], float, bool, dict[str, Any]]:
        """Score one guess; the observation is the narrowed range."""
        if self._secret is None:
            raise EnvStateError("Cannot call NumberGuessEnv.step() before reset(); call env.reset() first.")
        if self._done:
            raise EnvStateError("This episode is over; call env.reset() to start a new one.")
        if isinstance(guess, bool) or not isinstance(guess, int):
            raise ConfigError(f"a guess must be an int, got {type(guess).__name__}")
        self._steps += 1
        if guess == self._secret:
            self._done = True
            return {}, 1.0, True, {"secret": self._secret, "steps": self._steps}
        if guess < self._secret:
            self._low = max(self._low, guess + 1)
        else:
            self._high = min(self._high, guess - 1)
        obs = {"low": self._low, "high": self._high}
        truncated = self.max_steps is not None and self._steps >= self.max_steps
        if truncated:
            self._done = True
            return obs, 0.0, True, {"secret": self._secret, "steps": self._steps, "truncated": True}
        return obs, 0.0, False, {"steps": self._steps}


def binary_search_policy(obs: dict[str, int]) -> int:
    """Guess the middle of the remaining range."""
    return (obs["low"] + obs["high"]) // 2


class RandomGuessPolicy:
    """Guess uniformly at random inside the remaining range (a worse, but not hopeless, policy)."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    def __call__(self, obs: dict[str, int]) -> int:
        return self._rng.randint(obs["low"], obs["high"])


def play_episode(env: NumberGuessEnv, policy: Any, max_steps: int = 1000) -> tuple[int, float]:
    """Run one episode; return (number of guesses, return)."""
    obs = env.reset()
    total = 0.0
    for step in range(1, max_steps + 1):
        obs, reward, done, _ = env.step(policy(obs))
        total += reward
        if done:
            return step, total
    return max_steps, total
