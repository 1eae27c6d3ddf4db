"""Reward shaping: a turn's score, and the step reward paid for it.

A turn's score is ``reward_fn`` on the hidden checks' result (checked to be a finite float in
[0, 1]); :class:`Shaping` pays it per step as ``step_reward`` says. ``"delta"`` (the default)
pays each turn's score minus the previous one (potential-based shaping, dense), so an episode's
summed step rewards equal its final score; ``"final"`` pays 0 until the last step, then the
final score; ``"absolute"`` pays every turn its own score (a learner that stalls at 0.5 for three
turns earns 1.5, more than one that solves at once: never the default).
"""

from __future__ import annotations

from agentenv.choices import StepReward, parse
from agentenv.grading.result import RunResult
from agentenv.rewards import RewardFn, checked_reward, dense_reward

__all__ = ["Shaping"]


class Shaping:
    """``reward_fn`` and ``step_reward``, checked."""

    def __init__(self, reward_fn: RewardFn = dense_reward, step_reward: str = "delta") -> None:
        self.reward_fn = reward_fn
        self.step_reward = parse(StepReward, step_reward, "step_reward").value

    @property
    def reward_name(self) -> str:
        return getattr(self.reward_fn, "__name__", type(self.reward_fn).__name__)

    def score(self, hidden: RunResult, code: str) -> float:
        """The turn's score: always from the hidden checks."""
        return checked_reward(self.reward_fn, hidden, code)

    def paid(self, score: float, previous: float | None, last: bool) -> float:
        """The step reward for a turn that scored ``score`` after a turn that scored
        ``previous`` (None on the first), ``last`` when the episode ends with it."""
        if self.step_reward == StepReward.ABSOLUTE:
            return score
        if self.step_reward == StepReward.FINAL:
            return score if last else 0.0
        return score - (previous if previous is not None else 0.0)
