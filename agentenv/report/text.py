"""Plain-text tables for the terminal: a run's report, a comparison, revise vs resample.

Each ``format_*`` function takes the dict its analysis returned and gives back a string (the CLI
prints it; the library never does). ``-`` marks a value that is undefined, such as a repair
rate with no failed first turn or tokens a run did not record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["format_comparison", "format_report", "format_revise", "table", "tokens"]


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
    """A mean token count: whole numbers from 100 up, one decimal below."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


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


def _run_row(label: str, row: dict[str, Any]) -> list[Any]:
    return [label, row["tasks"], row["episodes"], row["pass@1"], row["solve_rate"],
            row["repair_rate"], row["mean_reward"], row["mean_turns"],
            tokens(row["tokens"]["generated"]), tokens(row["tokens"]["total"])]


def format_report(metrics: dict[str, Any]) -> str:
    """The run's metrics as terminal text: overall, by difficulty, by turn, by task."""
    run = metrics["run"]
    settings = run["settings"]
    turns = run["turns"]
    header = ["", "tasks", "episodes", "pass@1", f"solve@{turns}", "repair", "reward",
              "turns", "gen tok", "total tok"]
    lines = [
        f"run: {run['mode']}, {run['tasks']} tasks, {run['episodes']} episodes, T={turns}, "
        f"policy {', '.join(settings['policy']) or '-'}, model {', '.join(settings['model']) or '-'}",
    ]
    for ids in settings["template_ids"]:
        if ids:
            lines.append("templates: " + ", ".join(f"{k}={v}" for k, v in sorted(ids.items())))
    rows = [_run_row("overall", metrics["overall"])]
    rows += [_run_row(f"difficulty {level}", row) for level, row in metrics["by_difficulty"].items()]
    lines += ["", table(header, rows)]
    overall = metrics["overall"]
    lines += ["", "solve rate by turn: " + "  ".join(
        f"t{t}={_num(v)}" for t, v in enumerate(overall["cumulative_solve_rate"], start=1))]
    if overall["failed_first"]:
        lines.append(f"repaired {overall['repaired']} of {overall['failed_first']} episodes that "
                     "failed turn 1")
    lines.append("stop reasons: " + ", ".join(f"{k}={v}" for k, v in metrics["stop_reasons"].items()))
    task_rows = [_run_row(name, row) for name, row in metrics["by_task"].items()]
    lines += ["", table(["task", *header[1:]], task_rows)]
    return "\n".join(lines)


def format_comparison(comparison: dict[str, Any]) -> str:
    """Per-task and overall differences B - A with their intervals."""
    a, b = comparison["a"], comparison["b"]
    confidence = round(comparison["confidence"] * 100)
    lines = [f"A: {a['path'] or '(episodes)'}  ({a['tasks']} tasks, {a['episodes']} episodes)",
             f"B: {b['path'] or '(episodes)'}  ({b['tasks']} tasks, {b['episodes']} episodes)"]
    for label, side in (("A", a), ("B", b)):
        for ids in side["template_ids"]:
            lines.append(f"{label} templates: " + (", ".join(f"{k}={v}" for k, v in sorted(ids.items()))
                                                   or "(none recorded)"))
    if comparison["same_templates"]:
        lines.append("the two runs used the same templates")
    header = ["metric", "A", "B", "B - A", f"{confidence}% CI (paired over tasks)"]
    rows = []
    for metric, values in comparison["overall"].items():
        diff = values["difference"]
        rows.append([metric, values["a"], values["b"], _signed(diff["estimate"]),
                     _interval(diff["low"], diff["high"]) + (" *" if diff["excludes_zero"] else "")])
    lines += ["", f"overall over {comparison['common_tasks']} common tasks "
              f"({comparison['n_boot']} bootstrap resamples; * = interval excludes 0)",
              table(header, rows)]
    task_header = ["task", "n A", "n B", "solve A", "solve B", "solve B-A", "CI",
                   "reward B-A", "CI"]
    task_rows = []
    for name, row in comparison["by_task"].items():
        solve, reward = row["solve_rate"], row["mean_reward"]
        task_rows.append([name, row["episodes_a"], row["episodes_b"], solve["a"], solve["b"],
                          _signed(solve["difference"]), _interval(solve["low"], solve["high"]),
                          _signed(reward["difference"]), _interval(reward["low"], reward["high"])])
    lines += ["", table(task_header, task_rows)]
    lines += [f"warning: {w}" for w in comparison["warnings"]]
    return "\n".join(lines)


def format_revise(result: dict[str, Any]) -> str:
    """The revise-vs-resample table: per task and overall, then the paired interval."""
    k = result["k"]
    header = ["task", "n", "pass@1", "pass@1 t1", f"solve@{k}", f"1@{k}", f"pass@{k}", "repair",
              "gen tok rev", f"gen tok {k}x", "tot tok rev", f"tot tok {k}x"]

    def row(label: str, values: dict[str, Any], n: Any) -> list[Any]:
        cost = values["tokens"]
        return [label, n, values["pass@1"], values["pass@1_turn1"], values["solve@k"],
                values["1@k"], values["pass@k"], values["repair_rate"],
                *(tokens(cost[key]) for key in ("revise_generated", "resample_generated",
                                                 "revise_total", "resample_total"))]

    overall = result["overall"]
    rows = [row(name, values, values["samples"]) for name, values in result["by_task"].items()]
    rows.append(row("overall", overall, overall["tasks"]))
    diff = result["revise_minus_1@k"]
    oracle = result["revise_minus_pass@k"]
    confidence = round(diff["confidence"] * 100)
    lines = [
        f"revise vs resample at k = {k} calls: single-step {result['single_step']['path'] or '(episodes)'}"
        f" vs multi-turn {result['multi_turn']['path'] or '(episodes)'}",
        "",
        table(header, rows),
        "",
        f"revise - 1@{k}: {_signed(diff['estimate'])}, {confidence}% CI "
        f"{_interval(diff['low'], diff['high'])} (paired bootstrap over {diff['n']} tasks, "
        f"{diff['n_boot']} resamples)",
        f"revise - pass@{k}: {_signed(oracle['estimate'])}, {confidence}% CI "
        f"{_interval(oracle['low'], oracle['high'])}",
        f"1@{k} averaged over sample orders: {_num(overall['1@k_expected'])}; tasks with visible "
        f"checks: {overall['tasks_with_visible']} of {overall['tasks']}",
        f"mean calls per task: revise {_num(overall['calls']['revise'], 2)}, resample {k}, "
        f"1@{k} stopping at the first visible pass {_num(overall['calls']['one_at_k_early_stop'], 2)}",
    ]
    if overall["failed_first"]:
        lines.append(f"repaired {overall['repaired']} of {overall['failed_first']} multi-turn "
                     "episodes that failed turn 1")
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)
