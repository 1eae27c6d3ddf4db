"""The typed records the report passes between its parts: what :mod:`~agentenv.report.metrics`
computes and :mod:`~agentenv.report.text`, :mod:`~agentenv.report.page`,
:mod:`~agentenv.report.plots` and :mod:`~agentenv.report.writer` read.

They are ``TypedDict``: plain JSON-ready dicts at run time (``metrics.json`` is one), records
with known keys to a type checker. Keys with ``@`` (``pass@1``) use the functional syntax.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "ComparedRun",
    "Comparison",
    "MetricDifference",
    "MetricRow",
    "MultiTurnArm",
    "ReviseResult",
    "RewardDistribution",
    "RewardSummary",
    "RunInfo",
    "RunMetrics",
    "SingleStepArm",
    "TaskRow",
    "TokenMeans",
    "Transitions",
]


class ComparedRun(TypedDict):
    """One side (A or B) of a comparison."""

    path: str | None
    episodes: int
    tasks: int
    settings: dict[str, Any]
    template_ids: list[dict[str, str]]


class MetricDifference(TypedDict):
    """A compared metric overall: the means over tasks of A and B, and the paired ``B - A``
    difference with its bootstrap interval."""

    a: float | None
    b: float | None
    difference: dict[str, Any]


class _ComparisonBase(TypedDict):
    a: ComparedRun
    b: ComparedRun
    same_templates: bool
    template_differences: dict[str, Any]
    direction: str
    common_tasks: int
    only_in_a: list[str]
    only_in_b: list[str]
    overall: dict[str, MetricDifference]  # by compared metric (pass@1, solve_rate, mean_reward)
    by_task: dict[str, dict[str, Any]]  # per task: episodes_a/b and each metric's a, b, interval
    warnings: list[str]
    n_boot: int
    n_boot_task: int
    seed: int
    confidence: float


class Comparison(_ComparisonBase, total=False):
    """What :func:`~agentenv.report.compare_runs` returns (``compare.json``); the files written
    are added by :func:`~agentenv.report.write_comparison`."""

    files: dict[str, str]


class MultiTurnArm(TypedDict):
    """The revise arm of revise vs resample: the multi-turn run."""

    path: str | None
    episodes: int
    tasks: int
    settings: dict[str, Any]


class SingleStepArm(MultiTurnArm):
    """The resample arm: a single-step run, or a multi-turn run's first turns."""

    from_first_turns: bool


# Revise vs resample at a budget of k calls ("1@k" needs the functional syntax). The rows of
# ``overall``, ``by_task`` and ``budget`` are keyed by metric (see agentenv.report.revise).
_ReviseBase = TypedDict("_ReviseBase", {
    "k": int,
    "single_step": SingleStepArm,
    "multi_turn": MultiTurnArm,
    "overall": dict[str, Any],
    "by_task": dict[str, dict[str, Any]],
    "revise_minus_1@k": dict[str, Any],
    "revise_minus_pass@k": dict[str, Any],
    "budget": list[dict[str, Any]],
    "warnings": list[str],
    "only_in_single_step": list[str],
    "only_in_multi_turn": list[str],
    "n_boot": int,
    "seed": int,
})


class ReviseResult(_ReviseBase, total=False):
    """What :func:`~agentenv.report.revise_vs_resample` returns; the files written and notes
    are added by :func:`~agentenv.report.write_revise_report`."""

    files: dict[str, str]
    notes: list[str]


class TokenMeans(TypedDict):
    """Mean tokens per episode (see :mod:`agentenv.report.budget`); None when unknown."""

    generated: float | None
    processed: float | None
    conversation: float | None


# One row of metrics: a task's, a difficulty's or the whole run's.
MetricRow = TypedDict("MetricRow", {
    "episodes": int,
    "tasks": int,
    "pass@1": float | None,
    "solve_rate": float | None,
    "repaired": int,
    "failed_first": int,
    "repair_rate": float | None,
    "mean_reward": float | None,
    "mean_first_reward": float | None,
    "mean_turns": float | None,
    "cumulative_solve_rate": list[float | None],
    "tokens": TokenMeans,
})


class GroupRow(MetricRow):
    """The whole run's or a difficulty's row: over tasks, so its rates carry the half-width of
    their 95% interval over tasks (``interval95``: pass@1, solve_rate, mean_reward; None for
    fewer than two tasks)."""

    interval95: dict[str, float | None]


class TaskRow(MetricRow, total=False):
    """A task's row also says the task's difficulty."""

    difficulty: str | None


class RewardSummary(TypedDict):
    mean: float | None
    std: float | None
    min: float | None
    median: float | None
    max: float | None


class RewardDistribution(TypedDict):
    bin_edges: list[float]
    final_counts: list[int]
    first_turn_counts: list[int]
    final: RewardSummary
    first_turn: RewardSummary


class Transitions(TypedDict):
    """Outcome at turn t -> outcome at turn t+1, pooled over episodes and turns."""

    states: list[str]
    counts: list[list[int]]
    row_fractions: list[list[float] | None]
    pairs: int


class _RunInfoBase(TypedDict):
    mode: str
    episodes: int
    tasks: int
    samples_per_task: dict[str, int]
    turns: int
    settings: dict[str, Any]


class RunInfo(_RunInfoBase, total=False):
    path: str  # the run directory (added by write_report)
    infra_errors: int  # episodes the sandbox could not grade: in no metric


class _RunMetricsBase(TypedDict):

    run: RunInfo
    overall: GroupRow
    by_difficulty: dict[str, GroupRow]
    by_task: dict[str, TaskRow]
    stop_reasons: dict[str, int]
    episodes_reaching_turn: list[int]
    mean_reward_by_turn: list[float | None]
    outcomes_by_turn: list[dict[str, int]]
    reward_distribution: RewardDistribution
    transitions: Transitions


class RunMetrics(_RunMetricsBase, total=False):
    """Every metric of a run (``metrics.json``); :func:`~agentenv.report.write_report` adds the
    runner's own ``summary.json`` (``runner_summary``), the files it wrote and its notes."""

    runner_summary: dict[str, Any]
    files: dict[str, str]
    notes: list[str]
