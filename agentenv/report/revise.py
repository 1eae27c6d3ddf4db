"""Revise or resample? Multi-turn revision against fresh samples at the same budget of k calls.

Inputs: a single-step run with ``n >= k`` samples per task and a multi-turn run with
``max_turns >= k`` (``k`` defaults to the multi-turn run's ``max_turns``). The resample arm may
also be a multi-turn run (the same one, or another with ``n >= k`` samples): its episodes'
first turns are the fresh samples, so both arms are posed exactly the same prompts (a
single-step run's prompts announce one attempt, a multi-turn run's ``max_turns``: warned).
Per task, then overall (the mean over tasks):

- ``pass@1``: the single-step solve rate ``c/n``; ``pass@1 (turn 1)``: the multi-turn run's
  first-turn solve rate (the same quantity under the multi-turn prompts).
- ``solve@k`` (revise): the multi-turn episodes solved within ``k`` turns.
- ``1@k`` (resample, pick by visible tests): among ``k`` samples, the first whose visible
  checks all pass, else the first sample; scored on its hidden checks. Like ``pass@k`` it is
  averaged over every ordering of all ``n`` samples (closed form), so it does not depend on
  which samples happen to be stored first: ``1@1`` is ``pass@1`` and ``1@k <= pass@k``.
  ``1@k_first`` is the literal pick among the first ``k`` stored samples (by sample index).
  The early-stopping cost of ``1@k`` (calls and tokens until the first visible pass) is
  averaged over orderings the same way.
- ``pass@k``: the unbiased ``1 - C(n-c, k)/C(n, k)``, the oracle that needs hidden tests to pick.
- ``repair_rate``: multi-turn episodes solved by turn ``k`` among those that failed turn 1
  (pooled over episodes).
- tokens per episode, generated and total (``processed``: prompt plus generated; see :mod:`agentenv.report.budget`): a multi-turn
  episode within ``k`` turns against ``k`` fresh samples.

The difference revise − 1@k (and revise − pass@k) gets a paired bootstrap interval over
tasks, and ``budget`` holds the solve-rate-against-budget curves for ``j = 1..k`` calls: both
arms' solve rates with bootstrap bands over tasks, against calls and against *generated* tokens
(the policy's own output: equal budgets compare what each arm had the model write). Both arms
are posed the same prompts when the runs share templates (warned otherwise).

``warnings`` says when the study cannot mean what it seems to: single-step samples that are
all the same code for most tasks (the policy does not sample: resampling cannot help, and 1@k is
pass@1), per-task differences with zero variance (a degenerate interval), an arm at the same
level on every task (a floor or ceiling: the interval is the other arm's alone), arms built from
different templates or policies, and tasks without visible checks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from agentenv.choices import Mode, StopReason
from agentenv.errors import ConfigError
from agentenv.records import Trajectory
from agentenv.report.budget import episode_cost
from agentenv.report.compare import RunLike, resolve_run
from agentenv.report.records import ReviseResult
from agentenv.report.runs import by_task, run_mode, run_settings
from agentenv.report.stats import mean, paired_bootstrap, pass_at_k

__all__ = ["examined_probabilities", "first_turns", "one_at_k", "one_at_k_expected", "revise_vs_resample",
           "visible_pass"]


def visible_pass(trajectory: Trajectory) -> bool:
    """The first turn passed every visible check (and the task had some)."""
    if not trajectory.turns:
        return False
    record = trajectory.turns[0]
    return bool(record.visible_total) and record.visible_passed == record.visible_total


def _solved(trajectory: Trajectory) -> bool:
    return trajectory.solved_turn is not None


def _pick(samples: Sequence[Trajectory], k: int) -> int:
    """Index of the candidate 1@k picks among the first k samples."""
    for index, sample in enumerate(samples[:k]):
        if visible_pass(sample):
            return index
    return 0


def one_at_k(samples: Sequence[Trajectory], k: int) -> bool:
    """Whether the candidate picked by visible tests among the first ``k`` samples is solved."""
    if len(samples) < k:
        raise ConfigError(f"1@{k} needs {k} samples, got {len(samples)}")
    return _solved(samples[_pick(samples, k)])


def one_at_k_expected(samples: Sequence[Trajectory], k: int) -> float:
    """Expected 1@k over uniformly random orderings of the samples (closed form).

    With ``v`` of ``n`` samples passing their visible checks, no visible pass falls among the
    first ``k`` with probability ``q = C(n-v, k)/C(n, k)``; then the pick is uniform over the
    others, otherwise uniform over the visible passes.
    """
    n = len(samples)
    if not 1 <= k <= n:
        raise ConfigError(f"1@{k} needs {k} samples, got {n}")
    visible = [s for s in samples if visible_pass(s)]
    rest = [s for s in samples if not visible_pass(s)]
    q = math.comb(len(rest), k) / math.comb(n, k)
    hit = sum(map(_solved, visible)) / len(visible) if visible else 0.0
    miss = sum(map(_solved, rest)) / len(rest) if rest else 0.0
    return (1.0 - q) * hit + q * miss


def examined_probabilities(samples: Sequence[Trajectory], k: int) -> list[float]:
    """For each sample, the probability (over uniformly random orderings) that 1@k looks at it:
    it lies among the first ``k`` and no visible pass comes before it.

    With ``m`` visible passes among the other ``n - 1`` samples, the sample is at position
    ``j + 1`` with probability ``1/n`` and the ``j`` before it miss every visible pass with
    probability ``C(n-1-m, j)/C(n-1, j)``. The sum is the expected number of calls.
    """
    n = len(samples)
    if not 1 <= k <= n:
        raise ConfigError(f"1@{k} needs {k} samples, got {n}")
    visible = [visible_pass(s) for s in samples]
    total = sum(visible)
    out = []
    for passes in visible:
        others = total - passes
        out.append(sum(math.comb(n - 1 - others, j) / math.comb(n - 1, j) for j in range(k)) / n)
    return out


def _mean_of(values: Sequence[float | int | None]) -> float | None:
    return mean([float(v) for v in values if v is not None])


def _resample_row(samples: Sequence[Trajectory], k: int) -> dict[str, Any]:
    n = len(samples)
    c = sum(map(_solved, samples))
    costs = [episode_cost(s) for s in samples]
    looked_at = examined_probabilities(samples, k)
    processed = [x.processed for x in costs]
    return {
        "samples": n,
        "correct": c,
        "pass@1": c / n,
        "pass@k": pass_at_k(n, c, k),
        "1@k": one_at_k_expected(samples, k),
        "1@k_first": float(one_at_k(samples, k)),
        "has_visible": any(s.turns and s.turns[0].visible_total for s in samples),
        "curve_pass": [pass_at_k(n, c, j) for j in range(1, k + 1)],
        "curve_one": [one_at_k_expected(samples, j) for j in range(1, k + 1)],
        "tokens_per_sample": {"generated": _mean_of([x.generated for x in costs]),
                              "processed": _mean_of([x.processed for x in costs])},
        "one_at_k_calls": math.fsum(looked_at),
        "one_at_k_tokens": (math.fsum(p * t for p, t in zip(looked_at, processed, strict=True) if t is not None)
                            if None not in processed else None),
    }


def _revise_row(episodes: Sequence[Trajectory], k: int) -> dict[str, Any]:
    m = len(episodes)

    def solved_by(t: Trajectory, turn: int) -> bool:
        return t.solved_turn is not None and t.solved_turn <= turn

    failed_first = [t for t in episodes if not t.first_turn_solved] if k > 1 else []
    repaired = sum(solved_by(t, k) for t in failed_first)
    curve_tokens, curve_generated = [], []
    for j in range(1, k + 1):
        curve_tokens.append(_mean_of([episode_cost(t, upto=j).processed for t in episodes]))
        curve_generated.append(_mean_of([episode_cost(t, upto=j).generated for t in episodes]))
    costs = [episode_cost(t, upto=k) for t in episodes]
    return {
        "episodes": m,
        "pass@1_turn1": sum(t.first_turn_solved for t in episodes) / m,
        "solve@k": sum(solved_by(t, k) for t in episodes) / m,
        "failed_first": len(failed_first),
        "repaired": repaired,
        "repair_rate": repaired / len(failed_first) if failed_first else None,
        "curve_solve": [sum(solved_by(t, j) for t in episodes) / m for j in range(1, k + 1)],
        "curve_calls": [sum(min(len(t.turns), j) for t in episodes) / m for j in range(1, k + 1)],
        "curve_tokens": curve_tokens,
        "curve_generated": curve_generated,
        "tokens_per_episode": {"generated": _mean_of([x.generated for x in costs]),
                               "processed": _mean_of([x.processed for x in costs])},
        "mean_calls": sum(x.calls for x in costs) / m,
    }


def _task_row(samples: Sequence[Trajectory], episodes: Sequence[Trajectory], k: int
              ) -> dict[str, Any]:
    resample = _resample_row(samples, k)
    revise = _revise_row(episodes, k)
    per_sample = resample["tokens_per_sample"]
    return {
        "difficulty": samples[0].difficulty,
        "samples": resample["samples"],
        "episodes": revise["episodes"],
        "has_visible": resample["has_visible"],
        "pass@1": resample["pass@1"],
        "pass@1_turn1": revise["pass@1_turn1"],
        "solve@k": revise["solve@k"],
        "1@k": resample["1@k"],
        "1@k_first": resample["1@k_first"],
        "pass@k": resample["pass@k"],
        "repaired": revise["repaired"],
        "failed_first": revise["failed_first"],
        "repair_rate": revise["repair_rate"],
        "tokens": {
            "revise_generated": revise["tokens_per_episode"]["generated"],
            "revise_processed": revise["tokens_per_episode"]["processed"],
            "sample_generated": per_sample["generated"],
            "sample_processed": per_sample["processed"],
            "resample_generated": None if per_sample["generated"] is None else k * per_sample["generated"],
            "resample_processed": (None if per_sample["processed"] is None
                                   else k * per_sample["processed"]),
            "one_at_k_early_stop_processed": resample["one_at_k_tokens"],
        },
        "calls": {"revise": revise["mean_calls"], "resample": k,
                  "one_at_k_early_stop": resample["one_at_k_calls"]},
        "curves": {
            "revise": revise["curve_solve"], "revise_calls": revise["curve_calls"],
            "revise_tokens": revise["curve_tokens"], "revise_generated": revise["curve_generated"],
            "pass": resample["curve_pass"],
            "one": resample["curve_one"],
        },
    }


def first_turns(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """Multi-turn episodes cut to their first turn, as the fresh samples of the resample arm
    (a first turn does not depend on anything after it)."""
    return [dataclasses.replace(t, turns=t.turns[:1], mode=Mode.SINGLE_STEP, max_turns=1,
                                stop_reason=StopReason.SINGLE_STEP) for t in trajectories]


def _check_inputs(single: Sequence[Trajectory], multi: Sequence[Trajectory], k: int | None) -> int:
    mode_single, mode_multi = run_mode(single), run_mode(multi)
    if mode_single == "multi_turn" and mode_multi == "single_step":
        raise ConfigError("the runs are swapped: pass the single-step run first, then the "
                          "multi-turn run")
    if mode_single != "single_step":
        raise ConfigError(f"the first run must be single-step (agentenv run --single-step "
                          f"--samples K), got mode {mode_single!r}")
    if mode_multi != "multi_turn":
        raise ConfigError(f"the second run must be multi-turn (agentenv run --max-turns K), "
                          f"got mode {mode_multi!r}")
    max_turns = {t.max_turns for t in multi}
    if k is None:
        if len(max_turns) != 1:
            raise ConfigError(f"the multi-turn run mixes max_turns {sorted(max_turns)}; pass k")
        k = max_turns.pop()
    elif k < 1 or k > min(max_turns):
        raise ConfigError(f"k must be between 1 and the multi-turn run's max_turns "
                          f"({min(max_turns)}), got {k}")
    return k


def _overall(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def macro(key: str) -> float | None:
        return _mean_of([row[key] for row in rows])

    repaired = sum(row["repaired"] for row in rows)
    failed_first = sum(row["failed_first"] for row in rows)
    token_keys = rows[0]["tokens"].keys()
    return {
        "tasks": len(rows),
        "samples": sum(row["samples"] for row in rows),
        "episodes": sum(row["episodes"] for row in rows),
        "tasks_with_visible": sum(bool(row["has_visible"]) for row in rows),
        **{key: macro(key) for key in ("pass@1", "pass@1_turn1", "solve@k", "1@k",
                                       "1@k_first", "pass@k")},
        "repaired": repaired,
        "failed_first": failed_first,
        "repair_rate": repaired / failed_first if failed_first else None,
        "tokens": {key: _mean_of([row["tokens"][key] for row in rows]) for key in token_keys},
        "calls": {key: _mean_of([row["calls"][key] for row in rows])
                  for key in ("revise", "resample", "one_at_k_early_stop")},
    }


def _budget(rows: Sequence[dict[str, Any]], k: int, *, n_boot: int = 1000, seed: int = 0,
            confidence: float = 0.95) -> list[dict[str, Any]]:
    """Per budget of j calls: both arms' solve rates with bootstrap bands over tasks, and what the
    arms cost in tokens (generated, the policy's own output; processed, prompt plus generated)."""
    curves = []
    for j in range(k):
        def at(key: str, index: int = j) -> float | None:
            return _mean_of([row["curves"][key][index] for row in rows])

        def band(key: str, index: int = j) -> list[float]:
            values = [float(row["curves"][key][index]) for row in rows]
            interval = paired_bootstrap(values, n_boot=n_boot, seed=f"{seed}:{key}:{index}",
                                        confidence=confidence)
            return [interval.low, interval.high]

        per_sample = _mean_of([row["tokens"]["sample_processed"] for row in rows])
        per_sample_generated = _mean_of([row["tokens"]["sample_generated"] for row in rows])
        generated = [row["curves"]["revise_generated"][j] for row in rows]
        curves.append({
            "calls": j + 1,
            "revise": at("revise"),
            "revise_band": band("revise"),
            "revise_calls": at("revise_calls"),
            "revise_tokens": at("revise_tokens"),
            "revise_generated": None if None in generated else _mean_of(generated),
            "pass@j": at("pass"),
            "1@j": at("one"),
            "1@j_band": band("one"),
            "resample_tokens": None if per_sample is None else (j + 1) * per_sample,
            "resample_generated": None if per_sample_generated is None else (j + 1) * per_sample_generated,
        })
    return curves


def revise_vs_resample(single_step_run: RunLike, multi_turn_run: RunLike, k: int | None = None,
                       *, n_boot: int = 10_000, seed: int = 0, confidence: float = 0.95
                       ) -> ReviseResult:
    """The revise-vs-resample table at a budget of ``k`` calls (see the module docstring)."""
    path_single, single = resolve_run(single_step_run)
    path_multi, multi = resolve_run(multi_turn_run)
    # Episodes the sandbox could not grade have no score: pass@k and solve@k leave them out.
    infra_errors = sum(1 for t in (*single, *multi) if t.infra_failed)
    single = [t for t in single if not t.infra_failed]
    multi = [t for t in multi if not t.infra_failed]
    resample_from_turns = run_mode(single) == "multi_turn" and run_mode(multi) == "multi_turn"
    prompt_turns = {t.max_turns for t in single}
    if resample_from_turns:
        single = first_turns(single)
    k = _check_inputs(single, multi, k)
    samples, episodes = by_task(single), by_task(multi)
    common = [name for name in samples if name in episodes]
    if not common:
        raise ConfigError("the two runs share no task; run both on the same task set")
    short = [name for name in common if len(samples[name]) < k]
    if short:
        raise ConfigError(f"{len(short)} task(s) have fewer than k={k} single-step samples "
                          f"(e.g. {short[0]!r}, {len(samples[short[0]])}); re-run the "
                          f"single-step run with --samples {k} or more")
    rows = {name: _task_row(samples[name], episodes[name], k) for name in common}
    row_list = list(rows.values())

    def differences(key: str) -> list[float]:
        return [row["solve@k"] - row[key] for row in row_list]

    warnings = []
    duplicated = [name for name in common if len(samples[name]) > 1
                  and len({s.turns[0].code_hash for s in samples[name] if s.turns}) == 1]
    if duplicated and 2 * len(duplicated) > len(common):  # a few by chance; most: no sampling
        warnings.append(f"{len(duplicated)} of {len(common)} task(s) have identical single-step "
                        f"samples (e.g. {duplicated[0]!r}): the policy does not sample, so resampling "
                        "cannot help there; give each sample its own seed or a temperature above 0")
    diffs = differences("1@k")
    if len(diffs) > 1 and max(diffs) - min(diffs) == 0.0:
        warnings.append(f"revise - 1@k is {diffs[0]:+.3f} on every task (zero variance): the "
                        "bootstrap interval is degenerate and says nothing about uncertainty")
    for key, arm in (("solve@k", "the multi-turn arm's solve@k"), ("1@k", "the resample arm's 1@k")):
        levels = {row[key] for row in row_list}
        if len(row_list) > 1 and len(levels) == 1:
            warnings.append(f"{arm} is {levels.pop():.3f} on every task (a floor or ceiling): the "
                            "interval reflects the other arm alone; a smaller --k or harder tasks "
                            "would let both arms vary")
    without_visible = [name for name, row in rows.items() if not row["has_visible"]]
    if without_visible:
        warnings.append(f"{len(without_visible)} of {len(rows)} task(s) have no visible checks, "
                        "so 1@k there is the first sample (no selection signal)")
    settings_single, settings_multi = run_settings(single), run_settings(multi)
    for key in ("policy", "model"):
        if settings_single[key] != settings_multi[key]:
            warnings.append(f"the runs differ in {key}: single-step {settings_single[key]}, "
                            f"multi-turn {settings_multi[key]}")
    if not resample_from_turns and prompt_turns != {t.max_turns for t in multi}:
        warnings.append("the single-step prompts announce one attempt, the multi-turn prompts "
                        f"{sorted({t.max_turns for t in multi})}: for identical prompts in both arms "
                        "pass a multi-turn run as the resample arm (its first turns are the samples)")
    for name in ("system", "task"):  # the arms must pose the same prompts
        ids_single = {t.template_ids.get(name) for t in single}
        ids_multi = {t.template_ids.get(name) for t in multi}
        if ids_single != ids_multi:
            warnings.append(f"the runs use different {name} templates ({sorted(map(str, ids_single))} "
                            f"vs {sorted(map(str, ids_multi))}): the arms were not posed the same prompts")
    only_single = [name for name in samples if name not in episodes]
    only_multi = [name for name in episodes if name not in samples]
    if only_single or only_multi:
        warnings.append(f"{len(only_single)} task(s) only in the single-step run and "
                        f"{len(only_multi)} only in the multi-turn run are left out")
    if infra_errors:
        warnings.append(f"{infra_errors} episode(s) the sandbox could not grade (an infrastructure "
                        "fault) are left out of every number here")
    return {
        "k": k,
        "single_step": {"path": path_single, "episodes": len(single), "tasks": len(samples),
                        "settings": settings_single, "from_first_turns": resample_from_turns},
        "multi_turn": {"path": path_multi, "episodes": len(multi), "tasks": len(episodes),
                       "settings": settings_multi},
        "overall": _overall(row_list),
        "by_task": rows,
        "revise_minus_1@k": paired_bootstrap(differences("1@k"), n_boot=n_boot,
                                             seed=f"{seed}:1@k", confidence=confidence).to_dict(),
        "revise_minus_pass@k": paired_bootstrap(differences("pass@k"), n_boot=n_boot,
                                                seed=f"{seed}:pass@k",
                                                confidence=confidence).to_dict(),
        "budget": _budget(row_list, k, n_boot=min(n_boot, 2000), seed=seed, confidence=confidence),
        "warnings": warnings,
        "only_in_single_step": only_single,
        "only_in_multi_turn": only_multi,
        "n_boot": n_boot,
        "seed": seed,
    }
