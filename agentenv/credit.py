"""Per-turn credit assignment: returns under named schemes, and group-normalised advantages.

What it owns (the records themselves, ``TurnRecord`` and ``Trajectory``, live in
:mod:`agentenv.records` and are re-exported here):

- ``turn_rewards(trajectory, scheme, gamma)``: the reward each turn gets under a scheme;
- ``turn_returns(trajectory, scheme, gamma)``: the return from each turn, ``G_t = Σ_k γ^(k-t) r_k``;
- ``group_advantages(trajectories, ...)``: GRPO-style advantages, each episode's return minus
  the mean of its group (episodes of the same task), divided by the group's standard deviation;
  with ``scale_rewards="group"|"batch"|"none"`` exactly TRL's ``GRPOTrainer`` formula
  (Bessel-corrected std, ``+ 1e-4``), and with ``baseline="loo"`` leave-one-out (RLOO)
  baselines;
- ``turn_advantages(trajectories, ...)``: the per-turn (process-supervision) variant;
- ``credit_rows(trajectories, ...)``: one JSON-ready row per turn with every scheme's return and
  advantage, what trainers read next to ``trajectories.jsonl``.

The schemes (``T`` turns, ``R_t`` the dense reward of turn ``t``, ``R_0 = 0``):

- ``"final_only"``: only the last turn is rewarded, with the episode's final reward; every
  earlier turn gets 0, so ``G_t = γ^(T-t) R_T`` (outcome supervision).
- ``"per_turn"``: each turn is its own bandit; its return is its own dense reward, ``G_t = R_t``.
- ``"improvement"``: potential-based shaping with the dense score as potential (Ng et al. 1999):
  ``r_t = γ R_t − R_{t−1}``. With ``γ = 1`` these are the records' ``delta`` and they telescope:
  ``Σ_t r_t = R_T``, the final reward; ``G_t = γ^(T−t+1) R_T − R_{t−1}``, how much the
  episode improved from where turn ``t`` started.
- ``"discounted"``: every turn's dense reward counts, discounted: ``G_t = Σ_{k≥t} γ^(k−t) R_k``.

The environments' ``step_reward`` options have the same definitions under their own names
(accepted here as aliases, with ``γ = 1`` the env's summed return): ``"delta"`` (the default,
= ``"improvement"``), ``"final"`` (= ``"final_only"``) and ``"absolute"`` (= ``"discounted"``).
An episode's return (:func:`episode_return`) is the return from its first turn under every
scheme, ``Σ_t γ^(t−1) r_t``: the final score for ``delta``/``final`` (γ = 1), the sum of every
turn's score for ``absolute``/``per_turn``, which pays an agent for stalling (three turns at 0.5
earn 1.5, one solving turn 1.0): never the default.

Not here: value functions or GAE (they need a critic), and any training loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentenv.choices import Baseline, CreditScheme, ScaleRewards, StepReward, values
from agentenv.errors import ConfigError
from agentenv.records import Trajectory, TurnRecord

__all__ = [
    "ALIASES",
    "BASELINES",
    "SCALE_REWARDS",
    "SCHEMES",
    "TRL_EPSILON",
    "Trajectory",
    "TurnRecord",
    "credit_rows",
    "episode_return",
    "group_advantages",
    "group_by_task",
    "returns_table",
    "turn_advantages",
    "turn_returns",
    "turn_rewards",
]

SCHEMES: tuple[str, ...] = values(CreditScheme)
# The environments' step_reward names for the same definitions.
ALIASES: Mapping[str, str] = {StepReward.DELTA.value: CreditScheme.IMPROVEMENT.value,
                              StepReward.FINAL.value: CreditScheme.FINAL_ONLY.value,
                              StepReward.ABSOLUTE.value: CreditScheme.DISCOUNTED.value}
SCALE_REWARDS: tuple[str, ...] = values(ScaleRewards)
BASELINES: tuple[str, ...] = values(Baseline)
TRL_EPSILON = 1e-4  # what TRL's GRPOTrainer adds to the std before dividing


def _check(scheme: str, gamma: float) -> str:
    """The canonical scheme name (aliases resolved); ConfigError for a bad scheme or gamma."""
    scheme = ALIASES.get(scheme, scheme)
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown credit scheme {scheme!r}; use one of "
                          f"{', '.join((*SCHEMES, *ALIASES))}")
    if not (isinstance(gamma, (int, float)) and 0.0 <= gamma <= 1.0):
        raise ConfigError(f"gamma must be a number in [0, 1], got {gamma!r}")
    return scheme


def turn_rewards(trajectory: Trajectory, scheme: str = "final_only", gamma: float = 1.0) -> list[float]:
    """The reward each turn receives under ``scheme`` (see the module docstring)."""
    scheme = _check(scheme, gamma)
    dense = [t.reward for t in trajectory.turns]
    if not dense:
        return []
    if scheme == "final_only":
        return [0.0] * (len(dense) - 1) + [dense[-1]]
    if scheme == "improvement":
        previous = [0.0, *dense[:-1]]
        return [gamma * r - p for r, p in zip(dense, previous, strict=True)]
    return list(dense)  # per_turn and discounted reward every turn with its dense score


def turn_returns(trajectory: Trajectory, scheme: str = "final_only", gamma: float = 1.0) -> list[float]:
    """The return from each turn under ``scheme``: discounted reward-to-go, or the turn's own reward."""
    rewards = turn_rewards(trajectory, scheme, gamma)
    if ALIASES.get(scheme, scheme) == "per_turn":
        return rewards
    returns = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def episode_return(trajectory: Trajectory, scheme: str = "final_only", gamma: float = 1.0) -> float:
    """The return from the first turn, ``Σ_t γ^(t−1) r_t`` (0.0 for an episode with no turns).

    With ``γ = 1`` it is what the environment's summed step rewards are under the same
    definition: the final score for ``final_only``/``improvement`` (``final``/``delta``), the sum
    of the turn scores for ``per_turn``/``discounted`` (``absolute``).
    """
    rewards = turn_rewards(trajectory, scheme, gamma)
    total = 0.0
    for r in reversed(rewards):
        total = r + gamma * total
    return total


def _group_key(trajectory: Trajectory) -> str:
    return trajectory.task_name


def group_by_task(trajectories: Sequence[Trajectory],
                  key: Callable[[Trajectory], Any] = _group_key) -> dict[Any, list[int]]:
    """Positions of the trajectories in each group (by task name unless ``key`` says otherwise)."""
    groups: dict[Any, list[int]] = {}
    for i, trajectory in enumerate(trajectories):
        groups.setdefault(key(trajectory), []).append(i)
    return groups


def _normalise(values: Sequence[float], scale: str, eps: float) -> list[float]:
    """Centre on the mean; divide by the population std (``scale="std"``) or not (``"none"``)."""
    n = len(values)
    mean = sum(values) / n
    centred = [v - mean for v in values]
    if scale == "none":
        return centred
    std = math.sqrt(sum(c * c for c in centred) / n)
    if std < eps:  # a group where every sample scored the same carries no signal
        return [0.0] * n
    return [c / (std + eps) for c in centred]


def _check_scale(scale: str) -> None:
    if scale not in ("std", "none"):
        raise ConfigError(f"scale must be 'std' (GRPO) or 'none' (mean-centred only), got {scale!r}")


def _trl_normalise(values: Sequence[float], groups: Sequence[Sequence[int]], scale_rewards: str,
                   baseline: str, eps: float) -> list[float]:
    """TRL's GRPO advantages over ``values`` (``groups``: positions of each group).

    ``A_i = (r_i − b_i) / (σ + eps)``: ``b_i`` the group mean (or, ``baseline="loo"``, the mean
    of the *other* members), ``σ`` the Bessel-corrected std of the group (``"group"``) or of every
    value (``"batch"``), no division for ``"none"``. A std over one value is taken as 0 (TRL
    does the same for groups of one); a group of one has no leave-one-out baseline: advantage 0.
    """
    def stdev(xs: Sequence[float]) -> float:
        if len(xs) < 2:
            return 0.0
        m = math.fsum(xs) / len(xs)
        return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))

    out = [0.0] * len(values)
    batch_std = stdev(values)
    for positions in groups:
        group = [values[p] for p in positions]
        n, total = len(group), math.fsum(group)
        std = stdev(group) if scale_rewards == ScaleRewards.GROUP else batch_std
        for p, r in zip(positions, group, strict=True):
            if baseline == "loo":
                advantage = r - (total - r) / (n - 1) if n > 1 else 0.0
            else:
                advantage = r - total / n
            out[p] = advantage if scale_rewards == ScaleRewards.NONE else advantage / (std + eps)
    return out


def _check_trl(scale_rewards: str | None, baseline: str) -> None:
    if scale_rewards is not None and scale_rewards not in SCALE_REWARDS:
        raise ConfigError(f"scale_rewards must be one of {', '.join(SCALE_REWARDS)} (TRL's), "
                          f"got {scale_rewards!r}")
    if baseline not in BASELINES:
        raise ConfigError(f"baseline must be 'mean' (GRPO) or 'loo' (leave-one-out, RLOO), got {baseline!r}")
    if baseline == Baseline.LOO and scale_rewards is None:
        raise ConfigError("baseline='loo' goes with scale_rewards='group', 'batch' or 'none'")


def group_advantages(trajectories: Sequence[Trajectory], *, scheme: str = "final_only",
                     gamma: float = 1.0, scale: str = "std", eps: float | None = None,
                     key: Callable[[Trajectory], Any] = _group_key, scale_rewards: str | None = None,
                     baseline: str = "mean") -> list[float]:
    """One advantage per trajectory, in input order, normalised within its group.

    By default ``A_i = (G_i − mean_group G) / (std_group G + eps)`` with the population std and
    ``eps = 1e-6``, ``G_i`` the episode's return under ``scheme``; a group of one, or a group
    whose returns are all equal, gets zeros. With ``scale_rewards`` ("group", "batch" or
    "none") the advantages are exactly TRL's ``GRPOTrainer``'s (Bessel-corrected std, ``eps``
    1e-4 unless given), and ``baseline="loo"`` swaps the group mean for each episode's
    leave-one-out mean (RLOO).
    """
    _check(scheme, gamma)
    _check_scale(scale)
    _check_trl(scale_rewards, baseline)
    returns = [episode_return(t, scheme, gamma) for t in trajectories]
    groups = list(group_by_task(trajectories, key).values())
    if scale_rewards is not None:
        return _trl_normalise(returns, groups, scale_rewards, baseline,
                              TRL_EPSILON if eps is None else eps)
    advantages = [0.0] * len(trajectories)
    for positions in groups:
        for pos, value in zip(positions, _normalise([returns[p] for p in positions], scale,
                                                    1e-6 if eps is None else eps), strict=True):
            advantages[pos] = value
    return advantages


def turn_advantages(trajectories: Sequence[Trajectory], *, scheme: str = "improvement",
                    gamma: float = 1.0, scale: str = "std", eps: float = 1e-6,
                    key: Callable[[Trajectory], Any] = _group_key) -> list[list[float]]:
    """Per-turn advantages (process supervision): normalise every turn's scheme reward across the
    whole group, then give each turn the discounted sum of normalised rewards from it onwards.
    """
    _check(scheme, gamma)
    _check_scale(scale)
    rewards = [turn_rewards(t, scheme, gamma) for t in trajectories]
    out: list[list[float]] = [[0.0] * len(r) for r in rewards]
    for positions in group_by_task(trajectories, key).values():
        flat = [(p, t) for p in positions for t in range(len(rewards[p]))]
        if not flat:
            continue
        normalised = _normalise([rewards[p][t] for p, t in flat], scale, eps)
        normed: dict[tuple[int, int], float] = dict(zip(flat, normalised, strict=True))
        for p in positions:
            running = 0.0
            for t in range(len(rewards[p]) - 1, -1, -1):
                running = normed[(p, t)] + gamma * running
                out[p][t] = running
    return out


def credit_rows(trajectories: Sequence[Trajectory], *, schemes: Sequence[str] = SCHEMES,
                gamma: float = 1.0, scale: str = "std") -> list[dict[str, Any]]:
    """One JSON-ready row per turn: ids, reward, delta, and each scheme's return and advantages.

    ``adv_<scheme>`` is the episode-level group advantage (the same for every turn of an
    episode); ``turn_adv_<scheme>`` the per-turn one.
    """
    for scheme in schemes:
        _check(scheme, gamma)
    per_scheme: dict[str, tuple[list[list[float]], list[float], list[list[float]]]] = {}
    for scheme in schemes:
        per_scheme[scheme] = (
            [turn_returns(t, scheme, gamma) for t in trajectories],
            group_advantages(trajectories, scheme=scheme, gamma=gamma, scale=scale),
            turn_advantages(trajectories, scheme=scheme, gamma=gamma, scale=scale),
        )
    rows: list[dict[str, Any]] = []
    for i, trajectory in enumerate(trajectories):
        for t, record in enumerate(trajectory.turns):
            row: dict[str, Any] = {
                "episode_id": trajectory.episode_id,
                "task_name": trajectory.task_name,
                "sample": trajectory.sample,
                "turn": record.turn,
                "reward": record.reward,
                "delta": record.delta,
                "outcome": record.outcome,
                "gamma": gamma,
            }
            for scheme, (returns, advantages, turn_advs) in per_scheme.items():
                row[f"return_{scheme}"] = returns[i][t]
                row[f"adv_{scheme}"] = advantages[i]
                row[f"turn_adv_{scheme}"] = turn_advs[i][t]
            rows.append(row)
    return rows


def returns_table(trajectory: Trajectory, gamma: float = 1.0) -> Mapping[str, list[float]]:
    """Every scheme's per-turn returns for one trajectory (handy for printing and plots)."""
    return {scheme: turn_returns(trajectory, scheme, gamma) for scheme in SCHEMES}
