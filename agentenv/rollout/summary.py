"""The numbers a rollout run ends with (``summary.json``), computed from its trajectories.

For every group (the whole run, each difficulty, each task): ``pass@1`` (solved on the first
turn), ``solve_rate`` (solved by the last turn), ``repair_rate`` (solved later, among episodes
that failed turn 1), ``mean_reward`` (final reward), ``mean_turns``, token counts and the
cumulative solve rate by turn. Tokens come in two kinds: what the environment counted in the
conversation (``total``, of which ``generated`` by the policy), and what the model server
reported (``prompt_tokens``/``completion_tokens``, summed over calls; absent offline).
A repair-tree run (:mod:`agentenv.rollout.tree`) writes a failed root as one trajectory per
repair branch, all sharing the root's first turn; every number here weighs each branch by one
over its root's branch count, so each root counts once: ``pass@1`` is the first programs' pass
rate (what a plain run with the same seeds reports), ``solve_rate`` the chance that a root with
one repair (a random branch) is solved, ``repair_rate`` a branch's chance to repair its failed
root. ``episodes`` and the token totals still count every stored trajectory.
An episode whose last submission the sandbox could not grade (``Trajectory.infra_failed``) is
in none of these numbers either; ``infra_errors`` counts them.
Only finished episodes count: a partial one (stopped by the infrastructure after a graded turn,
to be continued by a resume) is in none of these numbers; the runner lists it under
``partial`` (:func:`partial_row`) and counts it in ``run.partial``/``run.partial_turns``.
Deeper analysis (plots, comparisons, revise-vs-resample) lives in :mod:`agentenv.report`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from agentenv.records import Trajectory, episode_weights, weighted_mean
from agentenv.rollout.plan import RolloutConfig

__all__ = ["DifficultyRow", "GroupSummary", "PartialRow", "RunRecord", "Summary", "TaskRow", "TokenCounts",
           "partial_row", "run_record", "summarize", "summarize_group"]


class TokenCounts(TypedDict):
    total: int
    generated: int
    mean_per_episode: float | None
    prompt_tokens: int | None  # as the model server reported them; None offline
    completion_tokens: int | None


# The headline numbers of a group of episodes ("pass@1" needs the functional syntax).
GroupSummary = TypedDict("GroupSummary", {
    "episodes": int,
    "pass@1": float | None,
    "solve_rate": float | None,
    "repair_rate": float | None,
    "mean_reward": float | None,
    "mean_turns": float | None,
    "solve_rate_by_turn": list[float],
    "tokens": TokenCounts,
    "stop_reasons": dict[str, int],
    "infra_errors": int,  # episodes the sandbox could not grade: in none of the numbers above
})


class DifficultyRow(GroupSummary):
    difficulty: str


class TaskRow(GroupSummary):
    task_name: str
    difficulty: str | None


class _RunRecordBase(TypedDict):
    policy: str
    model: str | None
    tasks: str
    mode: str  # a Mode, or "repair_tree" for a repair-tree run
    max_turns: int
    seed: int
    seconds: float


class RunRecord(_RunRecordBase, total=False):
    """``summary["run"]``: how the run went (a repair-tree run records the base keys only)."""

    samples: int
    backend: str
    concurrency: int
    planned: int
    resumed: int
    ran: int
    failed: int
    episodes_per_second: float | None
    stopped: str | None
    continued: int  # episodes continued from a partial record
    partial: int  # partial episodes left (in no metric), and their graded turns
    partial_turns: int


class PartialRow(TypedDict):
    """A partial episode in ``summary["partial"]``: stopped, its graded turns kept, in no metric."""

    episode_id: str | None
    task_name: str
    sample: int
    turns: int
    stop_reason: str | None
    error: str | None


class _SummaryBase(GroupSummary):
    tasks: int
    per_difficulty: list[DifficultyRow]
    per_task: list[TaskRow]


class Summary(_SummaryBase, total=False):
    """``summary.json``: the run's numbers; the runner adds ``run`` and ``errors``, a repair-tree
    run also ``tree``."""

    run: RunRecord
    errors: list[dict[str, Any]]
    partial: list[PartialRow]
    tree: dict[str, Any]

_UNKNOWN = "unknown"


def summarize_group(trajectories: Sequence[Trajectory]) -> GroupSummary:
    """The headline numbers of a group of episodes (None where a number is undefined).

    An episode the sandbox could not grade (``infra_failed``) is in no number but
    ``infra_errors``: it has no score, and a 0 would blame the model for the fault."""
    infra_errors = sum(1 for t in trajectories if t.infra_failed)
    trajectories = [t for t in trajectories if not t.infra_failed]
    n = len(trajectories)
    weights = episode_weights(trajectories)
    roots = sum(weights)
    solved_turns = [t.solved_turn for t in trajectories]
    failed_first = [(t, w) for t, w in zip(trajectories, weights, strict=True) if not t.first_turn_solved]
    max_turns = max((t.max_turns for t in trajectories), default=0)
    prompt_tokens = completion_tokens = 0
    calls_with_usage = 0
    for t in trajectories:
        for record in t.turns:
            if record.usage:
                calls_with_usage += 1
                prompt_tokens += int(record.usage.get("prompt_tokens", 0))
                completion_tokens += int(record.usage.get("completion_tokens", 0))
    total_tokens = sum(t.total_tokens for t in trajectories)
    return {
        "episodes": n,
        "pass@1": weighted_mean([1.0 if t.first_turn_solved else 0.0 for t in trajectories], weights),
        "solve_rate": weighted_mean([1.0 if s is not None else 0.0 for s in solved_turns], weights),
        "repair_rate": weighted_mean([1.0 if t.solved_turn is not None else 0.0 for t, _ in failed_first],
                             [w for _, w in failed_first]),
        "mean_reward": weighted_mean([t.final_reward for t in trajectories], weights),
        "mean_turns": weighted_mean([float(len(t.turns)) for t in trajectories], weights),
        "solve_rate_by_turn": [
            sum(w for s, w in zip(solved_turns, weights, strict=True) if s is not None and s <= k) / roots
            for k in range(1, max_turns + 1)
        ] if n else [],
        "tokens": {
            "total": total_tokens,
            "generated": sum(t.action_tokens for t in trajectories),
            "mean_per_episode": weighted_mean([float(t.total_tokens) for t in trajectories], weights),
            "prompt_tokens": prompt_tokens if calls_with_usage else None,
            "completion_tokens": completion_tokens if calls_with_usage else None,
        },
        "stop_reasons": dict(sorted(Counter(str(t.stop_reason) for t in trajectories).items())),
        "infra_errors": infra_errors,
    }


def summarize(trajectories: Iterable[Trajectory], *, difficulty_order: Sequence[str] = ("easy", "medium", "hard")
              ) -> Summary:
    """The run's summary: overall numbers, then one row per difficulty and per task."""
    items = list(trajectories)
    by_difficulty: dict[str, list[Trajectory]] = {}
    by_task: dict[str, list[Trajectory]] = {}
    for t in items:
        by_difficulty.setdefault(t.difficulty or _UNKNOWN, []).append(t)
        by_task.setdefault(t.task_name, []).append(t)
    order = {d: i for i, d in enumerate(difficulty_order)}
    difficulties = sorted(by_difficulty, key=lambda d: (order.get(d, len(order)), d))
    return {
        **summarize_group(items),
        "tasks": len(by_task),
        "per_difficulty": [{"difficulty": d, **summarize_group(by_difficulty[d])} for d in difficulties],
        "per_task": [
            {"task_name": name, "difficulty": group[0].difficulty, **summarize_group(group)}
            for name, group in by_task.items()
        ],
    }


def run_record(config: RolloutConfig, *, policy: str, model: str | None, planned: int, resumed: int,
               ran: int, failed: int, seconds: float, stopped: str | None) -> RunRecord:
    """``summary["run"]``: how the run went (what was planned, resumed, run and failed, how
    long it took and why it stopped early, if it did)."""
    return {
        "policy": policy, "model": model or config.model,
        "tasks": config.tasks, "mode": config.mode, "max_turns": config.max_turns,
        "samples": config.samples, "seed": config.seed, "backend": config.backend,
        "concurrency": config.concurrency, "planned": planned, "resumed": resumed,
        "ran": ran, "failed": failed, "seconds": round(seconds, 3),
        "episodes_per_second": round(ran / seconds, 3) if seconds > 0 else None,
        "stopped": stopped,
    }


def partial_row(trajectory: Trajectory) -> PartialRow:
    """What the summary says of a partial episode (see :mod:`agentenv.rollout.partial`)."""
    kept = trajectory.metadata.get("partial")
    error = kept.get("error") if isinstance(kept, dict) else None
    return {"episode_id": trajectory.episode_id, "task_name": trajectory.task_name,
            "sample": trajectory.sample, "turns": len(trajectory.turns),
            "stop_reason": trajectory.stop_reason, "error": str(error) if error is not None else None}
