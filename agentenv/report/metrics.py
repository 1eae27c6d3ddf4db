"""The metrics of one run: pass@1, solve@T, repair rate, solve rate by turn, rewards, transitions.

Definitions (an episode is *solved* at the first turn whose outcome is ``"pass"``, i.e. all
hidden checks passed):

- ``pass@1``: solved on turn 1. ``solve_rate`` (solve@T): solved by the last turn.
- ``repair_rate``: of the episodes not solved on turn 1 (and allowed more turns), the fraction
  solved later; pooled over episodes (``repaired / failed_first``), None when no episode failed
  turn 1 (always None for a single-step run).
- ``cumulative_solve_rate[t-1]``: solved by turn ``t``, for ``t = 1..T`` (T the largest
  ``max_turns``); an episode that stopped early keeps its final status.
- ``mean_reward``: the final turn's reward. ``tokens``: see :mod:`agentenv.report.budget`.

A task row averages over that task's episodes, each weighted by
:func:`agentenv.records.episode_weights` (1, or for the branches of a repair tree's failed root
1/M each, so every root counts once; the pooled repair rate is unaffected: every failed root has
M branches). Overall and per-difficulty rows average the
task rows (each task weighs the same, as in pass@k); with the same number of samples per task
that equals the average over episodes. The reward distribution, the outcome counts and the
turn-to-turn outcome transition matrix pool every episode.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, cast

from agentenv.errors import RunFormatError
from agentenv.records import OUTCOMES, Trajectory, episode_weights, weighted_mean
from agentenv.report.budget import episode_cost
from agentenv.report.records import (
    GroupRow,
    MetricRow,
    RewardDistribution,
    RewardSummary,
    RunMetrics,
    TaskRow,
    TokenMeans,
    Transitions,
)
from agentenv.report.runs import by_task, run_mode, run_settings
from agentenv.report.stats import mean, mean_halfwidth, quantile

__all__ = ["REWARD_BINS", "aggregate", "horizon", "reward_distribution", "run_metrics", "task_row",
           "transitions"]

# Bins centred on 0.0, 0.1, ..., 1.0: a reward of 0.9 and a full pass (1.0) never share one.
REWARD_BINS = 11
# Difficulty rows run from easy to hard when the labels are the usual ones; others sort after.
_DIFFICULTY_ORDER = ("introductory", "easy", "interview", "medium", "competition", "hard")
TOKEN_KEYS = ("generated", "processed", "conversation")


def horizon(trajectories: Sequence[Trajectory]) -> int:
    """T: the most turns any episode was allowed (or took)."""
    return max(max(t.max_turns, len(t.turns)) for t in trajectories)


def _difficulty_key(level: str) -> tuple[int, str]:
    if level == "unknown":
        return (len(_DIFFICULTY_ORDER) + 1, level)
    lowered = level.lower()
    rank = _DIFFICULTY_ORDER.index(lowered) if lowered in _DIFFICULTY_ORDER else len(_DIFFICULTY_ORDER)
    return (rank, lowered)


def _solved_by(trajectory: Trajectory, turn: int) -> bool:
    solved = trajectory.solved_turn
    return solved is not None and solved <= turn


def _tokens(means: Mapping[str, float | None]) -> TokenMeans:
    return {"generated": means["generated"], "processed": means["processed"],
            "conversation": means["conversation"]}


def _mean_tokens(episodes: Sequence[Trajectory], weights: Sequence[float]) -> TokenMeans:
    costs = [episode_cost(t).to_dict() for t in episodes]
    return _tokens({key: weighted_mean([c[key] for c in costs], weights) for key in TOKEN_KEYS})


def task_row(episodes: Sequence[Trajectory], turns: int) -> TaskRow:
    """The metrics of one task's episodes (see the module docstring)."""
    n = len(episodes)
    weights = episode_weights(episodes)

    def weighted(values: Sequence[float]) -> float:
        result = weighted_mean(values, weights)
        assert result is not None  # a task row has at least one episode
        return result

    # Only an episode allowed a second turn can be repaired (none in a single-step run).
    failed_first = [t for t in episodes if not t.first_turn_solved and t.max_turns > 1]
    repaired = sum(1 for t in failed_first if t.solved_turn is not None)
    return {
        "episodes": n,
        "tasks": 1,
        "pass@1": weighted([float(t.first_turn_solved) for t in episodes]),
        "solve_rate": weighted([float(t.solved_turn is not None) for t in episodes]),
        "repaired": repaired,
        "failed_first": len(failed_first),
        "repair_rate": repaired / len(failed_first) if failed_first else None,
        "mean_reward": weighted([t.final_reward for t in episodes]),
        "mean_first_reward": weighted([t.turns[0].reward if t.turns else 0.0 for t in episodes]),
        "mean_turns": weighted([float(len(t.turns)) for t in episodes]),
        "cumulative_solve_rate": [weighted([float(_solved_by(t, k)) for t in episodes])
                                  for k in range(1, turns + 1)],
        "tokens": _mean_tokens(episodes, weights),
    }


def _macro(rows: Sequence[MetricRow], key: str) -> float | None:
    plain = cast(Sequence[Mapping[str, Any]], rows)
    return mean([row[key] for row in plain if row[key] is not None])


# The rates a group row gives with a 95% interval over its tasks (as the run table does).
INTERVAL_KEYS = ("pass@1", "solve_rate", "mean_reward")


def aggregate(rows: Sequence[MetricRow], turns: int) -> GroupRow:
    """Overall row from task rows: rates averaged over tasks, the repair rate pooled; the rates
    of :data:`INTERVAL_KEYS` with the half-width of their 95% interval over tasks."""
    repaired = sum(row["repaired"] for row in rows)
    token_rows = [cast(Mapping[str, float | None], row["tokens"]) for row in rows]
    failed_first = sum(row["failed_first"] for row in rows)
    return {
        "episodes": sum(row["episodes"] for row in rows),
        "tasks": len(rows),
        "pass@1": _macro(rows, "pass@1"),
        "solve_rate": _macro(rows, "solve_rate"),
        "repaired": repaired,
        "failed_first": failed_first,
        "repair_rate": repaired / failed_first if failed_first else None,
        "mean_reward": _macro(rows, "mean_reward"),
        "mean_first_reward": _macro(rows, "mean_first_reward"),
        "mean_turns": _macro(rows, "mean_turns"),
        "cumulative_solve_rate": [mean(cast(list[float], [row["cumulative_solve_rate"][k] for row in rows]))
                                  for k in range(turns)],
        "tokens": _tokens({key: mean([value for tokens in token_rows
                                      if (value := tokens[key]) is not None])
                           for key in TOKEN_KEYS}),
        "interval95": {key: mean_halfwidth([value for row in rows if (value := row[key]) is not None])  # type: ignore[literal-required]
                       for key in INTERVAL_KEYS},
    }


def _histogram(values: Sequence[float], low: float, high: float) -> list[int]:
    """Counts per bin; bin i is centred on ``low + i * step`` (nearest centre wins)."""
    counts = [0] * REWARD_BINS
    step = (high - low) / (REWARD_BINS - 1)
    for value in values:
        index = math.floor((value - low) / step + 0.5 + 1e-9)  # 1e-9: 0.9/0.1 is 8.999...
        counts[min(max(index, 0), REWARD_BINS - 1)] += 1
    return counts


def _describe(values: Sequence[float]) -> RewardSummary:
    if not values:
        return {"mean": None, "std": None, "min": None, "median": None, "max": None}
    ordered = sorted(values)
    centre = math.fsum(ordered) / len(ordered)
    variance = math.fsum((v - centre) ** 2 for v in ordered) / len(ordered)
    return {"mean": centre, "std": math.sqrt(variance), "min": ordered[0],
            "median": quantile(ordered, 0.5), "max": ordered[-1]}


def reward_distribution(trajectories: Sequence[Trajectory]) -> RewardDistribution:
    """Histograms (``REWARD_BINS`` equal bins centred on 0, 0.1, ..., 1 for rewards in [0, 1])
    and summaries of final and first-turn rewards."""
    final = [t.final_reward for t in trajectories]
    first = [t.turns[0].reward for t in trajectories if t.turns]
    low = min([0.0, *final, *first])
    high = max([1.0, *final, *first])
    return {
        "bin_edges": [low + (high - low) * (i - 0.5) / (REWARD_BINS - 1)
                      for i in range(REWARD_BINS + 1)],
        "final_counts": _histogram(final, low, high),
        "first_turn_counts": _histogram(first, low, high),
        "final": _describe(final),
        "first_turn": _describe(first),
    }


def transitions(trajectories: Sequence[Trajectory]) -> Transitions:
    """Counts of outcome at turn t -> outcome at turn t+1, pooled over episodes and turns."""
    index = {name: i for i, name in enumerate(OUTCOMES)}
    counts = [[0] * len(OUTCOMES) for _ in OUTCOMES]
    for trajectory in trajectories:
        for before, after in zip(trajectory.turns, trajectory.turns[1:], strict=False):
            counts[index[before.outcome]][index[after.outcome]] += 1
    fractions: list[list[float] | None] = []
    for row in counts:
        total = sum(row)
        fractions.append([c / total for c in row] if total else None)
    return {"states": list(OUTCOMES), "counts": counts, "row_fractions": fractions,
            "pairs": sum(map(sum, counts))}


def _by_turn(trajectories: Sequence[Trajectory], turns: int) -> dict[str, Any]:
    reached = [[t.turns[k] for t in trajectories if len(t.turns) > k] for k in range(turns)]
    return {
        "episodes_reaching_turn": [len(records) for records in reached],
        "mean_reward_by_turn": [mean([r.reward for r in records]) for records in reached],
        "outcomes_by_turn": [{name: sum(r.outcome == name for r in records) for name in OUTCOMES}
                             for records in reached],
    }


def run_metrics(trajectories: Sequence[Trajectory]) -> RunMetrics:
    """Every metric of a run, as a JSON-ready dict (overall, by difficulty, by task, ...).

    Episodes whose last submission the sandbox could not grade (``Trajectory.infra_failed``)
    have no score: they are in no metric (a 0 would blame the model for an infrastructure
    fault) and ``run["infra_errors"]`` counts them."""
    infra_errors = sum(1 for t in trajectories if t.infra_failed)
    if infra_errors:
        trajectories = [t for t in trajectories if not t.infra_failed]
        if not trajectories:
            raise RunFormatError(f"all {infra_errors} episodes hit an infrastructure fault (the "
                                 "sandbox could not grade them): there is no score to report; "
                                 "run them again")
    turns = horizon(trajectories)
    groups = by_task(trajectories)
    rows = {name: task_row(episodes, turns) for name, episodes in groups.items()}
    difficulty: dict[str, list[MetricRow]] = {}
    for name, episodes in groups.items():
        level = episodes[0].difficulty or "unknown"
        difficulty.setdefault(level, []).append(rows[name])
    for name, episodes in groups.items():
        rows[name]["difficulty"] = episodes[0].difficulty
    samples = [len(episodes) for episodes in groups.values()]
    by_turn = _by_turn(trajectories, turns)
    return {
        "run": {
            "mode": run_mode(trajectories),
            "episodes": len(trajectories),
            "tasks": len(groups),
            "samples_per_task": {"min": min(samples), "max": max(samples)},
            "turns": turns,
            "settings": run_settings(trajectories),
            "infra_errors": infra_errors,
        },
        "overall": aggregate(list(rows.values()), turns),
        "by_difficulty": {level: aggregate(level_rows, turns)
                          for level, level_rows in sorted(difficulty.items(),
                                                          key=lambda item: _difficulty_key(item[0]))},
        "by_task": rows,
        "stop_reasons": dict(sorted(Counter(str(t.stop_reason) for t in trajectories).items())),
        "episodes_reaching_turn": by_turn["episodes_reaching_turn"],
        "mean_reward_by_turn": by_turn["mean_reward_by_turn"],
        "outcomes_by_turn": by_turn["outcomes_by_turn"],
        "reward_distribution": reward_distribution(trajectories),
        "transitions": transitions(trajectories),
    }
