"""Plain-text tables for the terminal: a run's report, a comparison, revise vs resample.

Each ``format_*`` function takes the dict its analysis returned and gives back a string (the CLI
prints it; the library never does). ``-`` marks a value that is undefined, such as a repair
rate with no failed first turn or tokens a run did not record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentenv.report.records import Comparison, MetricRow, ReviseResult, RunMetrics
from agentenv.report.runs import mixed_templates_warning

__all__ = ["TOKEN_COLUMNS", "count", "difficulty_rows", "format_comparison", "format_report", "format_revise",
           "metric_columns", "resample_arm", "revise_header", "revise_rows", "table", "tokens"]


def metric_columns(turns: int) -> list[str]:
    """The names of a run's metric columns, the same in every table of a run: the one `agentenv
    run` prints, the text report and the HTML report."""
    return ["pass@1", f"solve@{turns}", "repair", "mean reward", "mean turns"]


TOKEN_COLUMNS = ("gen tok", "proc tok", "conv tok")  # generated, processed, final conversation


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular for one: "1 task", "3 tasks"."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def difficulty_rows(by_difficulty: dict[str, Any]) -> dict[str, Any]:
    """The per-difficulty rows worth showing: none when there is a single level (its row would
    repeat the overall one, e.g. "unknown" for a task set without difficulty labels)."""
    return by_difficulty if len(by_difficulty) > 1 else {}


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def tokens(value: float | None) -> str:
    """A mean token count, as a whole number (one format down a column: "57" beside "197")."""
    if value is None:
        return "-"
    return f"{value:,.0f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def _interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    return f"[{low:+.3f}, {high:+.3f}]"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; the first column left-aligned, the rest right."""
    cells = [list(header)] + [[_num(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        parts = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(row) for row in cells[1:])])


def _estimate(row: MetricRow, key: str) -> Any:
    """A rate as shown: with ``± half-width`` (95% over tasks) when the row is a group's."""
    value, half = row[key], row.get("interval95", {}).get(key)  # type: ignore[literal-required, attr-defined]
    return value if value is None or half is None else f"{_num(value)} ± {half:.3f}"


def metric_row(label: str, row: MetricRow) -> list[Any]:
    """One line of a metrics table (the text and the HTML report's): a task's, a difficulty's or
    the run's; group rows give their rates with a 95% interval over tasks."""
    return [label, row["tasks"], row["episodes"], _estimate(row, "pass@1"), _estimate(row, "solve_rate"),
            row["repair_rate"], _estimate(row, "mean_reward"), row["mean_turns"],
            tokens(row["tokens"]["generated"]), tokens(row["tokens"]["processed"]),
            tokens(row["tokens"]["conversation"])]


def format_report(metrics: RunMetrics) -> str:
    """The run's metrics as terminal text: overall, by difficulty, by turn, by task."""
    run = metrics["run"]
    settings = run["settings"]
    turns = run["turns"]
    header = ["", "tasks", "episodes", *metric_columns(turns), *TOKEN_COLUMNS]
    lines = [
        f"run: {run['mode']}, {count(run['tasks'], 'task')}, {count(run['episodes'], 'episode')}, "
        f"T={turns}, policy {', '.join(settings['policy']) or '-'}, "
        f"model {', '.join(settings['model']) or '-'}",
    ]
    if run.get("infra_errors"):
        lines.append(f"infra errors: {count(run['infra_errors'], 'episode')} the sandbox could not "
                     "grade (an infrastructure fault: in no metric below)")
    if settings.get("tokenizer"):
        lines.append("tokens counted with: " + ", ".join(settings["tokenizer"]))
    for ids in settings["template_ids"]:
        if ids:
            lines.append("templates: " + ", ".join(f"{k}={v}" for k, v in sorted(ids.items())))
    mixed = mixed_templates_warning(settings.get("mixed_templates") or {})
    if mixed:
        lines.append(f"warning: {mixed}")
    rows = [metric_row("overall", metrics["overall"])]
    rows += [metric_row(f"difficulty {level}", row)
             for level, row in difficulty_rows(metrics["by_difficulty"]).items()]
    lines += ["", table(header, rows)]
    overall = metrics["overall"]
    lines += ["", "solve rate by turn: " + "  ".join(
        f"t{t}={_num(v)}" for t, v in enumerate(overall["cumulative_solve_rate"], start=1))]
    if overall["failed_first"]:
        lines.append(f"repaired {overall['repaired']} of {overall['failed_first']} episodes that "
                     "failed turn 1")
    lines.append("rates average over tasks; ± : 95% interval over tasks (1.96 standard errors)")
    lines.append("tokens per episode: gen = generated by the policy, proc = processed (prompt + "
                 "generated, summed over calls), conv = final conversation length")
    lines.append("stop reasons: " + ", ".join(f"{k}={v}" for k, v in metrics["stop_reasons"].items()))
    task_rows = [metric_row(name, row) for name, row in metrics["by_task"].items()]
    lines += ["", table(["task", *header[1:]], task_rows)]
    return "\n".join(lines)


def _marked_interval(value: Mapping[str, Any]) -> str:
    """An interval, with `` *`` when it excludes 0."""
    return _interval(value["low"], value["high"]) + (" *" if value.get("excludes_zero") else "")


def format_comparison(comparison: Comparison) -> str:
    """The warnings first, then the overall differences B - A (outcome, then cost per episode)
    and the per-task ones, each with its interval (``*``: it excludes 0)."""
    a, b = comparison["a"], comparison["b"]
    confidence = round(comparison["confidence"] * 100)
    lines = [f"{label}: {side['path'] or '(episodes)'}  ({count(side['tasks'], 'task')}, "
             f"{count(side['episodes'], 'episode')})" for label, side in (("A", a), ("B", b))]
    for label, side in (("A", a), ("B", b)):
        for ids in side["template_ids"]:
            lines.append(f"{label} templates: " + (", ".join(f"{k}={v}" for k, v in sorted(ids.items()))
                                                   or "(none recorded)"))
    if comparison["same_templates"]:
        lines.append("the two runs used the same templates")
    if comparison["warnings"]:
        lines += [""] + [f"warning: {w}" for w in comparison["warnings"]]
    header = ["metric", "A", "B", "B - A", f"{confidence}% CI (paired over tasks)"]
    rows: list[list[Any]] = []
    for metric, values in comparison["overall"].items():
        diff = values["difference"]
        if metric == "turns":
            rows.append(["cost per episode:", "", "", "", ""])
        rows.append([metric, values["a"], values["b"], _signed(diff["estimate"]),
                     _marked_interval(diff)])
    lines += ["", f"overall over {count(comparison['common_tasks'], 'common task')} "
              f"({comparison['n_boot']} bootstrap resamples; * = interval excludes 0)",
              table(header, rows)]
    task_header = ["task", "n A", "n B", "solve A", "solve B", "solve B-A", "CI",
                   "reward B-A", "CI", "turns B-A", "CI"]
    task_rows = []
    for name, row in comparison["by_task"].items():
        solve, reward, turns = row["solve_rate"], row["mean_reward"], row["turns"]
        task_rows.append([name, row["episodes_a"], row["episodes_b"], solve["a"], solve["b"],
                          _signed(solve["difference"]), _marked_interval(solve),
                          _signed(reward["difference"]), _marked_interval(reward),
                          _signed(turns["difference"]), _marked_interval(turns)])
    lines += ["", f"per task ({comparison['n_boot_task']} resamples of each run's episodes; "
              "* = interval excludes 0; - = fewer than two episodes on a side)",
              table(task_header, task_rows)]
    return "\n".join(lines)


def revise_header(k: int) -> list[str]:
    """The column names of the revise-vs-resample table (terminal and HTML)."""
    return ["task", "n", "pass@1", "pass@1 t1", f"solve@{k}", f"1@{k}", f"pass@{k}", "repair",
            "gen tok rev", f"gen tok {k}x", "proc tok rev", f"proc tok {k}x"]


def revise_rows(result: ReviseResult) -> list[list[Any]]:
    """The revise-vs-resample table's rows: one per task, then the overall row."""

    def row(label: str, values: dict[str, Any], n: Any) -> list[Any]:
        cost = values["tokens"]
        return [label, n, values["pass@1"], values["pass@1_turn1"], values["solve@k"],
                values["1@k"], values["pass@k"], values["repair_rate"],
                *(tokens(cost[key]) for key in ("revise_generated", "resample_generated",
                                                 "revise_processed", "resample_processed"))]

    overall = result["overall"]
    rows = [row(name, values, values["samples"]) for name, values in result["by_task"].items()]
    rows.append(row("overall", overall, overall["tasks"]))
    return rows


def resample_arm(result: ReviseResult) -> tuple[str, str]:
    """What the resample arm is, for labels: (the run, "k ... samples") -- a single-step run,
    or the first turns of a multi-turn run (never called single-step then)."""
    arm, k = result["single_step"], result["k"]
    where = arm["path"] or "(episodes)"
    if arm.get("from_first_turns"):
        return f"first turns of multi-turn {where}", f"{k} fresh samples (first turns)"
    return f"single-step {where}", f"{k} single-step samples"


def format_revise(result: ReviseResult) -> str:
    """The revise-vs-resample table: per task and overall, then the paired interval."""
    k = result["k"]
    header = revise_header(k)
    overall = result["overall"]
    rows = revise_rows(result)
    diff = result["revise_minus_1@k"]
    oracle = result["revise_minus_pass@k"]
    confidence = round(diff["confidence"] * 100)
    lines = [
        f"revise vs resample at k = {k} calls: resample {resample_arm(result)[0]}"
        f" vs revise multi-turn {result['multi_turn']['path'] or '(episodes)'}",
        "",
        table(header, rows),
        "",
        f"revise - 1@{k}: {_signed(diff['estimate'])}, {confidence}% CI "
        f"{_interval(diff['low'], diff['high'])} (paired bootstrap over {count(diff['n'], 'task')}, "
        f"{diff['n_boot']} resamples)",
        f"revise - pass@{k}: {_signed(oracle['estimate'])}, {confidence}% CI "
        f"{_interval(oracle['low'], oracle['high'])}",
        f"1@{k} is averaged over sample orders, as pass@{k} is; the first {k} stored samples alone "
        f"give {_num(overall['1@k_first'])}; tasks with visible "
        f"checks: {overall['tasks_with_visible']} of {overall['tasks']}",
        f"tokens per task: gen = generated, proc = processed (prompt + generated over calls); "
        f"rev = one multi-turn episode of up to {k} turns, {k}x = {resample_arm(result)[1]}",
        f"mean calls per task: revise {_num(overall['calls']['revise'], 2)}, resample {k}, "
        f"1@{k} stopping at the first visible pass {_num(overall['calls']['one_at_k_early_stop'], 2)}",
    ]
    if overall["failed_first"]:
        lines.append(f"repaired {overall['repaired']} of {overall['failed_first']} multi-turn "
                     "episodes that failed turn 1")
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)
