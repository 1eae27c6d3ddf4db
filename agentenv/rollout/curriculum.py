"""Curricula by pass rate, and DAPO's dynamic sampling: which tasks to roll out next, which groups to keep.

What it owns:

- ``PassRateWindow``: each task's running pass rate over its last ``window`` outcomes (older
  ones are forgotten, so a task the policy has since learned stops looking hard).
- ``PassRateCurriculum``: samples tasks by that window. A task's weight is ``4 p (1 - p)``
  (1 at a pass rate of one half, 0 at 0 or 1: a group of samples of a task always or never
  solved has no reward variance to learn from), never below ``floor`` (so no task is starved,
  and a task can come back), and ``unseen`` for a task with no outcome yet. Sampling is without
  replacement within a draw and seeded: the same outcomes give the same draws.
- ``informative(rewards)`` and ``split_groups(groups)``: DAPO's dynamic-sampling filter. A group
  (the samples of one prompt) whose rewards are all equal has GRPO advantage 0 for every sample
  and only dilutes the batch; it is dropped. Rewards that are None (an infrastructure fault,
  not the model's doing) are left out before comparing; fewer than two left is uninformative.
- ``run_curriculum`` / ``arun_curriculum``: rounds of rollouts. Each round draws
  ``tasks_per_round`` tasks from the curriculum, runs ``config.samples`` episodes of each with
  :func:`~agentenv.rollout.runner.arun_rollouts` into ``out_dir/round-NNN`` (so a stopped
  curriculum resumes: finished rounds are read back, and the same outcomes replay the same
  draws), feeds the outcomes back and keeps only the informative groups. Round ``r`` runs with
  seed ``config.seed + r``, so a task drawn twice gets new samples.

An episode's outcome is whether it was solved; its reward is the sum of its step rewards (its
final score, by the environments' contract).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv.errors import ConfigError
from agentenv.policies.base import PolicyLike
from agentenv.records import Trajectory
from agentenv.rollout.plan import RolloutConfig
from agentenv.rollout.runner import RolloutResult, arun_rollouts
from agentenv.tasks.schema import Task

__all__ = ["CurriculumResult", "CurriculumRound", "PassRateCurriculum", "PassRateWindow",
           "arun_curriculum", "episode_return", "informative", "run_curriculum", "split_groups"]


class PassRateWindow:
    """Each task's outcomes (passed or not) over its last ``window`` episodes."""

    def __init__(self, window: int = 8) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(f"window must be an integer >= 1, got {window!r}")
        self.window = window
        self._outcomes: dict[str, deque[bool]] = {}

    def record(self, task_name: str, passed: bool) -> None:
        self._outcomes.setdefault(task_name, deque(maxlen=self.window)).append(bool(passed))

    def rate(self, task_name: str) -> float | None:
        """The pass rate over the window, or None before the task's first outcome."""
        outcomes = self._outcomes.get(task_name)
        return sum(outcomes) / len(outcomes) if outcomes else None

    def seen(self, task_name: str) -> int:
        """How many outcomes the window holds for the task (at most ``window``)."""
        return len(self._outcomes.get(task_name, ()))

    def rates(self) -> dict[str, float]:
        return {name: sum(o) / len(o) for name, o in self._outcomes.items() if o}


class PassRateCurriculum:
    """Draws tasks with weight ``max(floor, 4 p (1 - p))`` of their windowed pass rate ``p``."""

    def __init__(self, tasks: Iterable[Task | str], *, window: int = 8, floor: float = 0.05,
                 unseen: float = 1.0, seed: int = 0) -> None:
        self.names = [t.name if isinstance(t, Task) else str(t) for t in tasks]
        if not self.names:
            raise ConfigError("a curriculum needs at least one task")
        if len(set(self.names)) != len(self.names):
            raise ConfigError("a curriculum's task names must be unique")
        if not 0 < floor <= 1 or not unseen > 0:
            raise ConfigError(f"floor must be in (0, 1] and unseen > 0, got {floor!r}, {unseen!r}")
        self.window = PassRateWindow(window)
        self.floor = floor
        self.unseen = unseen
        self._rng = random.Random(seed)

    def weight(self, task_name: str) -> float:
        p = self.window.rate(task_name)
        if p is None:
            return self.unseen
        return max(self.floor, 4.0 * p * (1.0 - p))

    def record(self, task_name: str, passed: bool) -> None:
        self.window.record(task_name, passed)

    def record_trajectories(self, trajectories: Iterable[Trajectory]) -> None:
        """Feed finished episodes back: solved or not, per task (partial episodes are skipped)."""
        for t in trajectories:
            if t.done:
                self.record(t.task_name, t.terminated)

    def sample(self, k: int) -> list[str]:
        """``k`` distinct task names (all of them if there are fewer), drawn by weight.

        Weighted sampling without replacement: each task gets the key ``u ** (1 / weight)`` for a
        uniform ``u``, and the ``k`` largest keys win (Efraimidis and Spirakis).
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"the number of tasks to draw must be >= 1, got {k!r}")
        keyed = sorted(((self._rng.random() ** (1.0 / self.weight(name)), name) for name in self.names),
                       reverse=True)
        return [name for _, name in keyed[:k]]


def episode_return(trajectory: Trajectory) -> float:
    """An episode's reward: the sum of its step rewards (its final score by default)."""
    return math.fsum(trajectory.rewards)


def informative(rewards: Sequence[float | None], *, tolerance: float = 1e-9) -> bool:
    """True when a group's rewards are not all equal (None, a fault, is left out first)."""
    values = [r for r in rewards if r is not None]
    if len(values) < 2:
        return False
    return max(values) - min(values) > tolerance


def split_groups(groups: Mapping[str, Sequence[float | None]], *, tolerance: float = 1e-9
                 ) -> tuple[list[str], list[str]]:
    """(kept, dropped) group keys, in their order: DAPO's dynamic-sampling filter."""
    kept: list[str] = []
    dropped: list[str] = []
    for key, rewards in groups.items():
        (kept if informative(rewards, tolerance=tolerance) else dropped).append(key)
    return kept, dropped


@dataclass
class CurriculumRound:
    """One round: the tasks drawn, the pass rates they were drawn with, the groups kept and dropped."""

    index: int
    drawn: list[str]
    weights: dict[str, float]
    kept: dict[str, list[Trajectory]]
    dropped: list[str]
    result: RolloutResult

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.index, "drawn": self.drawn, "weights": self.weights,
                "kept": sorted(self.kept), "dropped": self.dropped}


@dataclass
class CurriculumResult:
    rounds: list[CurriculumRound] = field(default_factory=list)
    pass_rates: dict[str, float] = field(default_factory=dict)

    @property
    def groups(self) -> list[list[Trajectory]]:
        """Every kept group (the informative ones), round by round."""
        return [group for r in self.rounds for group in r.kept.values()]


async def arun_curriculum(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig | None = None,
                          out_dir: str | Path | None = None, *, rounds: int, tasks_per_round: int,
                          curriculum: PassRateCurriculum | None = None) -> CurriculumResult:
    """``rounds`` rounds of rollouts whose tasks the curriculum draws; see the module docstring.

    ``config.samples`` is the group size (at least 2 for any group to be informative).
    """
    config = config or RolloutConfig()
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ConfigError(f"rounds must be an integer >= 1, got {rounds!r}")
    if config.samples < 2:
        raise ConfigError("a curriculum keeps groups whose rewards differ: set samples >= 2 "
                          "(the group size)")
    by_name = {t.name: t for t in tasks}
    curriculum = curriculum or PassRateCurriculum(list(tasks), seed=config.seed)
    unknown = [name for name in curriculum.names if name not in by_name]
    if unknown:
        raise ConfigError(f"the curriculum names tasks not in the task set: {unknown[:3]}")
    out = Path(out_dir) if out_dir is not None else None
    result = CurriculumResult()
    for index in range(rounds):
        weights = {name: curriculum.weight(name) for name in curriculum.names}
        drawn = curriculum.sample(tasks_per_round)
        round_config = dataclasses.replace(config, seed=config.seed + index)
        done = await arun_rollouts([by_name[n] for n in drawn], policy, round_config,
                                   out / f"round-{index:03d}" if out is not None else None)
        finished = [t for t in done.trajectories if t.done]
        curriculum.record_trajectories(finished)
        groups: dict[str, list[Trajectory]] = {}
        for trajectory in finished:
            groups.setdefault(trajectory.task_name, []).append(trajectory)
        kept, dropped = split_groups({name: [episode_return(t) for t in group]
                                      for name, group in groups.items()})
        result.rounds.append(CurriculumRound(index=index, drawn=drawn, weights=weights,
                                             kept={name: groups[name] for name in kept},
                                             dropped=dropped, result=done))
    result.pass_rates = curriculum.window.rates()
    return result


def run_curriculum(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig | None = None,
                   out_dir: str | Path | None = None, *, rounds: int, tasks_per_round: int,
                   curriculum: PassRateCurriculum | None = None) -> CurriculumResult:
    """Blocking twin of :func:`arun_curriculum` (runs its own event loop)."""

    async def main() -> CurriculumResult:
        try:
            return await arun_curriculum(tasks, policy, config, out_dir, rounds=rounds,
                                         tasks_per_round=tasks_per_round, curriculum=curriculum)
        finally:
            aclose = getattr(policy, "aclose", None)
            if aclose is not None:
                await aclose()

    return asyncio.run(main())
