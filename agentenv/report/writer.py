"""Writing reports to disk: a run's report, a comparison, and revise vs resample.

Each ``write_*`` function runs its analysis, writes its files (JSON numbers, a text table, PNG
figures, self-contained HTML pages) and returns the analysis dict with a ``files`` entry naming
what it wrote. The text and HTML are always written; the PNG figures only when matplotlib (the
``plots`` extra) is installed, and otherwise ``notes`` says they were left out and how to get
them. A run's report also writes the rollout browser (``episodes.html``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentenv.report.browser import BROWSER_FILE, browser_page
from agentenv.report.compare import RunLike, compare_runs
from agentenv.report.metrics import run_metrics
from agentenv.report.page import report_page, revise_page
from agentenv.report.plots import (
    PLOTS_MISSING,
    budget_plot,
    cumulative_solve_plot,
    plots_available,
    reward_distribution_plot,
    transition_heatmap,
)
from agentenv.report.records import Comparison, ReviseResult, RunMetrics
from agentenv.report.revise import revise_vs_resample
from agentenv.report.runs import load_run, load_summary, trajectories_path
from agentenv.report.text import format_comparison, format_report, format_revise

__all__ = ["REPORT_DIR", "write_comparison", "write_report", "write_revise_report"]

REPORT_DIR = "report"


def _write_json(path: Path, data: Any) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (task or candidate text): escape the file
        text = json.dumps(data, indent=2, ensure_ascii=True)
    path.write_text(text + "\n", encoding="utf-8", errors="backslashreplace")


def write_report(run_dir: str | Path, out_dir: str | Path | None = None, *, credit: bool = True,
                 gamma: float = 1.0) -> RunMetrics:
    """Compute a run's metrics and write them (into ``<run_dir>/report`` by default).

    Files: ``metrics.json``, ``report.txt`` (the terminal table), ``report.html``
    (self-contained), ``episodes.html`` (the rollout browser), with matplotlib
    ``cumulative_solve_rate.png``, ``reward_distribution.png`` and ``transition_matrix.png``,
    and, with ``credit`` (the default), ``credit.jsonl`` next to the trajectories.
    """
    source = trajectories_path(run_dir)
    trajectories = load_run(source)
    summary = load_summary(source)
    metrics = run_metrics(trajectories)
    metrics["run"]["path"] = str(run_dir)
    if summary is not None:
        metrics["runner_summary"] = summary
    out = Path(out_dir) if out_dir is not None else source.parent / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)

    images: dict[str, bytes] = {}
    notes: list[str] = []
    if plots_available():
        images = {
            "cumulative_solve_rate": cumulative_solve_plot(metrics),
            "reward_distribution": reward_distribution_plot(metrics),
            "transition_matrix": transition_heatmap(metrics),
        }
    else:
        notes.append(PLOTS_MISSING)
    files: dict[str, str] = {}
    for name, png in images.items():
        path = out / f"{name}.png"
        path.write_bytes(png)
        files[name] = str(path)
    text = format_report(metrics)
    (out / "report.txt").write_text(text + "\n", encoding="utf-8", errors="backslashreplace")
    files["text"] = str(out / "report.txt")
    page = report_page(metrics, images, title=f"agentenv report: {source.parent.name}",
                       episodes=trajectories)
    (out / "report.html").write_text(page, encoding="utf-8", errors="backslashreplace")
    files["html"] = str(out / "report.html")
    browser = browser_page(trajectories, title=f"agentenv episodes: {source.parent.name}")
    (out / BROWSER_FILE).write_text(browser, encoding="utf-8", errors="backslashreplace")
    files["episodes"] = str(out / BROWSER_FILE)
    if credit:
        from agentenv.report.credit_export import export_credit

        files["credit"] = str(export_credit(source, gamma=gamma))
    files["metrics"] = str(out / "metrics.json")
    metrics["files"] = files
    metrics["notes"] = notes
    _write_json(out / "metrics.json", metrics)
    return metrics


def write_comparison(run_a: RunLike, run_b: RunLike, out_dir: str | Path, *,
                     n_boot: int = 10_000, seed: int = 0) -> Comparison:
    """Compare two runs and write ``compare.json`` and ``compare.txt`` into ``out_dir``."""
    comparison = compare_runs(run_a, run_b, n_boot=n_boot, seed=seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.txt").write_text(format_comparison(comparison) + "\n", encoding="utf-8",
                                          errors="backslashreplace")
    comparison["files"] = {"text": str(out / "compare.txt"), "json": str(out / "compare.json")}
    _write_json(out / "compare.json", comparison)
    return comparison


def write_revise_report(single_step_run: str | Path, multi_turn_run: str | Path,
                        out_dir: str | Path | None = None, *, k: int | None = None,
                        n_boot: int = 10_000, seed: int = 0) -> ReviseResult:
    """Revise vs resample, written to ``out_dir`` (default ``<multi_turn_run>/revise_vs_resample``).

    Files: ``revise_vs_resample.json``, ``.txt`` (the table), ``.html`` (self-contained) and,
    with matplotlib, ``.png`` (solve rate against budget, in calls and in tokens).
    """
    single = load_run(single_step_run)
    multi = load_run(multi_turn_run)
    result = revise_vs_resample(single, multi, k=k, n_boot=n_boot, seed=seed)
    result["single_step"]["path"] = str(single_step_run)
    result["multi_turn"]["path"] = str(multi_turn_run)
    default = trajectories_path(multi_turn_run).parent / "revise_vs_resample"
    out = Path(out_dir) if out_dir is not None else default
    out.mkdir(parents=True, exist_ok=True)
    stem = out / "revise_vs_resample"
    figure = budget_plot(result) if plots_available() else None
    text = format_revise(result)
    kinds = ["txt", "html", "json"]
    if figure is not None:
        Path(f"{stem}.png").write_bytes(figure)
        kinds.insert(0, "png")
    Path(f"{stem}.txt").write_text(text + "\n", encoding="utf-8", errors="backslashreplace")
    Path(f"{stem}.html").write_text(revise_page(result, figure), encoding="utf-8",
                                      errors="backslashreplace")
    result["files"] = {kind: f"{stem}.{kind}" for kind in kinds}
    result["notes"] = [] if figure is not None else [PLOTS_MISSING]
    _write_json(Path(f"{stem}.json"), result)
    return result
