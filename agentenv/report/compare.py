"""Comparing two runs on the same tasks: the prompt-template experiment.

For every task both runs attempted, the difference ``B - A`` in pass@1, solve rate and mean
final reward. Overall, the mean of the per-task differences with a paired bootstrap interval
(tasks resampled, so task difficulty cancels out); per task, a bootstrap interval that resamples
each run's episodes of that task independently (None when a side has fewer than two episodes:
a single draw says nothing about its own spread). The cost side is compared the same way:
turns and tokens per episode (``COST_METRICS``: generated, and processed = prompt + generated
over calls; the token metrics only when every episode of both runs recorded tokens). Runs that
differ in template ids are the point of the experiment; the ids of both are reported, along
with any other setting that differs and would confound the comparison, a run that mixes
template versions, and a comparison in which nothing differs at all (a policy that ignores
the feedback, such as the scripted one or the stand-in server, cannot show a template effect).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv.errors import ConfigError
from agentenv.records import Trajectory
from agentenv.report.budget import episode_cost
from agentenv.report.records import Comparison, MetricDifference
from agentenv.report.runs import by_task, load_run, mixed_templates_warning, run_settings
from agentenv.report.stats import bootstrap_difference, mean, paired_bootstrap

__all__ = ["COMPARED_METRICS", "COST_METRICS", "RunLike", "compare_runs", "resolve_run"]

COMPARED_METRICS = ("pass@1", "solve_rate", "mean_reward")
COST_METRICS = ("turns", "tokens_generated", "tokens_processed")

RunLike = str | Path | Sequence[Trajectory]


def resolve_run(run: RunLike) -> tuple[str | None, list[Trajectory]]:
    """A run directory (or trajectories file) loaded, or episodes passed as they are."""
    if isinstance(run, (str, Path)):
        return str(run), load_run(run)
    episodes = list(run)
    if not episodes:
        raise ConfigError("a run needs at least one episode")
    return None, episodes


def _observation(trajectory: Trajectory, with_tokens: bool) -> tuple[float, ...]:
    """One episode's value of each compared metric, outcome first, then cost."""
    outcome = (float(trajectory.first_turn_solved), float(trajectory.solved_turn is not None),
               trajectory.final_reward, float(len(trajectory.turns)))
    if not with_tokens:
        return outcome
    cost = episode_cost(trajectory)
    return (*outcome, float(cost.generated or 0), float(cost.processed or 0))


def _has_tokens(episodes: Sequence[Trajectory]) -> bool:
    return all(episode_cost(t).generated is not None for t in episodes)


def _template_differences(a: list[dict[str, str]], b: list[dict[str, str]]) -> dict[str, Any]:
    names = sorted({name for ids in (*a, *b) for name in ids})
    out = {}
    for name in names:
        ids_a = sorted({ids.get(name, "-") for ids in a})
        ids_b = sorted({ids.get(name, "-") for ids in b})
        if ids_a != ids_b:
            out[name] = {"a": ids_a, "b": ids_b}
    return out


def compare_runs(run_a: RunLike, run_b: RunLike, n_boot: int = 10_000, seed: int = 0, *,
                 n_boot_task: int = 1_000, confidence: float = 0.95) -> Comparison:
    """Per-task and overall differences ``B - A`` with bootstrap intervals (see module doc)."""
    path_a, episodes_a = resolve_run(run_a)
    path_b, episodes_b = resolve_run(run_b)
    groups_a, groups_b = by_task(episodes_a), by_task(episodes_b)
    common = [name for name in groups_a if name in groups_b]
    if not common:
        raise ConfigError("the two runs share no task; compare runs made on the same task set")
    settings_a, settings_b = run_settings(episodes_a), run_settings(episodes_b)
    compared = [g for name in common for g in (groups_a[name], groups_b[name])]
    with_tokens = _has_tokens([t for group in compared for t in group])
    metrics = (*COMPARED_METRICS, *(COST_METRICS if with_tokens else COST_METRICS[:1]))

    by_task_rows: dict[str, Any] = {}
    differences: dict[str, list[float]] = {m: [] for m in metrics}
    means: dict[str, dict[str, list[float]]] = {m: {"a": [], "b": []} for m in metrics}
    for name in common:
        obs_a = [_observation(t, with_tokens) for t in groups_a[name]]
        obs_b = [_observation(t, with_tokens) for t in groups_b[name]]
        intervals = None
        if len(obs_a) >= 2 and len(obs_b) >= 2:
            intervals = bootstrap_difference(obs_a, obs_b, n_boot=n_boot_task,
                                             seed=f"{seed}:{name}", confidence=confidence)
        row: dict[str, Any] = {"episodes_a": len(obs_a), "episodes_b": len(obs_b)}
        for j, metric in enumerate(metrics):
            value_a = sum(o[j] for o in obs_a) / len(obs_a)
            value_b = sum(o[j] for o in obs_b) / len(obs_b)
            means[metric]["a"].append(value_a)
            means[metric]["b"].append(value_b)
            differences[metric].append(value_b - value_a)
            row[metric] = {
                "a": value_a, "b": value_b, "difference": value_b - value_a,
                "low": intervals[j].low if intervals else None,
                "high": intervals[j].high if intervals else None,
                "excludes_zero": intervals[j].excludes_zero if intervals else False,
            }
        by_task_rows[name] = row

    overall: dict[str, MetricDifference] = {}
    for metric in metrics:
        interval = paired_bootstrap(differences[metric], n_boot=n_boot, seed=f"{seed}:{metric}",
                                    confidence=confidence)
        overall[metric] = {"a": mean(means[metric]["a"]), "b": mean(means[metric]["b"]),
                           "difference": interval.to_dict()}

    warnings = []
    for label, settings in (("run A", settings_a), ("run B", settings_b)):
        mixed = mixed_templates_warning(settings["mixed_templates"], label)
        if mixed:
            warnings.append(mixed)
    for key in ("mode", "max_turns", "policy", "model", "token_budget", "feedback_from", "tokenizer"):
        if settings_a[key] != settings_b[key]:
            warnings.append(f"the runs differ in {key}: A {settings_a[key]}, B {settings_b[key]}")
    only_a = [name for name in groups_a if name not in groups_b]
    only_b = [name for name in groups_b if name not in groups_a]
    if only_a or only_b:
        warnings.append(f"{len(only_a)} task(s) only in A and {len(only_b)} only in B are left out")
    template_diff = _template_differences(settings_a["template_ids"], settings_b["template_ids"])
    if all(d == 0 for m in COMPARED_METRICS for d in differences[m]):
        policies = sorted({*settings_a["policy"], *settings_b["policy"]})
        warnings.append(
            f"B - A is exactly 0 for every task and outcome metric (policy {', '.join(policies) or '-'})"
            ": a policy that ignores the feedback (the scripted policy, the stand-in server) "
            "answers the same whatever the templates say; for an offline template experiment use "
            "--policy reader, whose revisions depend on the feedback, or a model")
    if not with_tokens:
        warnings.append("tokens per episode are not compared: some episodes recorded no token counts")
    return {
        "a": {"path": path_a, "episodes": len(episodes_a), "tasks": len(groups_a),
              "settings": settings_a, "template_ids": settings_a["template_ids"]},
        "b": {"path": path_b, "episodes": len(episodes_b), "tasks": len(groups_b),
              "settings": settings_b, "template_ids": settings_b["template_ids"]},
        "same_templates": not template_diff,
        "template_differences": template_diff,
        "direction": "B - A",
        "common_tasks": len(common),
        "only_in_a": only_a,
        "only_in_b": only_b,
        "overall": overall,
        "by_task": by_task_rows,
        "warnings": warnings,
        "n_boot": n_boot,
        "n_boot_task": n_boot_task,
        "seed": seed,
        "confidence": confidence,
    }

