"""The report's figures as PNG bytes: solve rate by turn, rewards, transitions, budget curves.

matplotlib (the ``plots`` extra) is imported only when a figure is drawn, and its absence is a
:class:`~agentenv.errors.MissingDependency` naming the extra (:func:`plots_available` asks
first: the report writer then leaves the figures out and writes everything else). Figures are built on
``matplotlib.figure.Figure`` with the Agg canvas, never through pyplot, so drawing touches no
global state and works without a display. Each function takes the dict its analysis returned.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from agentenv.errors import MissingDependency, install_hint
from agentenv.report.records import ReviseResult, RunMetrics

__all__ = [
    "PLOTS_MISSING",
    "budget_plot",
    "cumulative_solve_plot",
    "plots_available",
    "require_matplotlib",
    "reward_distribution_plot",
    "transition_heatmap",
]

PLOTS_MISSING = f"plots left out: matplotlib is not installed ({install_hint('plots')})"


def plots_available() -> bool:
    """Whether matplotlib can be imported (the figures can be drawn)."""
    try:
        require_matplotlib()
    except MissingDependency:
        return False
    return True


def require_matplotlib() -> Any:
    """The ``matplotlib.figure.Figure`` class, or a clear error naming the extra to install."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependency.for_extra("matplotlib", "plots", "Drawing report plots") from None
    return Figure


def _figure(width: float, height: float, columns: int = 1) -> tuple[Any, list[Any]]:
    figure = require_matplotlib()(figsize=(width, height), dpi=100, layout="constrained")
    axes = figure.subplots(1, columns, squeeze=False)[0]
    return figure, list(axes)


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _empty(axis: Any, message: str) -> None:
    axis.text(0.5, 0.5, message, ha="center", va="center", transform=axis.transAxes, color="0.4")
    axis.set_xticks([])
    axis.set_yticks([])


def cumulative_solve_plot(metrics: RunMetrics) -> bytes:
    """Solve rate by turn t (solved at or before t), overall and per difficulty."""
    figure, (axis,) = _figure(6.0, 3.8)
    series = [("all tasks", metrics["overall"]["cumulative_solve_rate"])]
    if len(metrics["by_difficulty"]) > 1:
        series += [(level, row["cumulative_solve_rate"])
                   for level, row in metrics["by_difficulty"].items()]
    for index, (label, values) in enumerate(series):
        turns = list(range(1, len(values) + 1))
        axis.plot(turns, values, marker="o", label=label,
                  linewidth=2.4 if index == 0 else 1.2, linestyle="-" if index == 0 else "--")
    axis.set_xlabel("turn")
    axis.set_ylabel("solved by this turn")
    axis.set_ylim(-0.02, 1.02)
    axis.set_xticks(list(range(1, len(series[0][1]) + 1)))
    axis.set_title("Cumulative solve rate by turn")
    axis.grid(alpha=0.3)
    axis.legend(loc="lower right", fontsize="small")
    return _png(figure)


def reward_distribution_plot(metrics: RunMetrics) -> bytes:
    """Histogram of final rewards (and first-turn rewards when episodes have several turns)."""
    dist = metrics["reward_distribution"]
    edges: Sequence[float] = dist["bin_edges"]
    width = edges[1] - edges[0]
    figure, (axis,) = _figure(6.0, 3.8)
    lefts = list(edges[:-1])
    several = metrics["run"]["turns"] > 1
    bar = width * (0.45 if several else 0.9)
    axis.bar([x + width * 0.05 for x in lefts], dist["final_counts"], width=bar, align="edge",
             label="final turn", color="tab:blue")
    if several:
        axis.bar([x + width * 0.5 for x in lefts], dist["first_turn_counts"], width=bar,
                 align="edge", label="first turn", color="tab:orange")
        axis.legend(fontsize="small")
    axis.yaxis.get_major_locator().set_params(integer=True)
    axis.set_xlabel("reward")
    axis.set_ylabel("episodes")
    axis.set_title("Reward distribution")
    axis.grid(alpha=0.3, axis="y")
    return _png(figure)


def transition_heatmap(metrics: RunMetrics) -> bytes:
    """Turn-to-turn outcome transitions: rows are turn t, columns turn t+1, cells row shares."""
    data = metrics["transitions"]
    figure, (axis,) = _figure(6.4, 5.0)
    if not data["pairs"]:
        _empty(axis, "no turn-to-turn transitions\n(every episode had one turn)")
        axis.set_title("Outcome transitions")
        return _png(figure)
    labels = list(data["states"])  # the outcome names the tables use, unabridged
    shares = [row if row is not None else [0.0] * len(labels) for row in data["row_fractions"]]
    image = axis.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    for i, row in enumerate(data["counts"]):
        for j, count in enumerate(row):
            if count:
                colour = "white" if shares[i][j] > 0.6 else "black"
                axis.text(j, i, f"{shares[i][j]:.2f}\n({count})", ha="center", va="center",
                          fontsize=8, color=colour)
    axis.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    axis.set_yticks(range(len(labels)), labels)
    axis.set_xlabel("outcome at turn t+1")
    axis.set_ylabel("outcome at turn t")
    axis.set_title(f"Outcome transitions ({data['pairs']} turn pairs)")
    figure.colorbar(image, ax=axis, label="share of row")
    return _png(figure)


def budget_plot(result: ReviseResult) -> bytes:
    """Solve rate against budget: revise vs resample, by calls and by tokens."""
    points = result["budget"]
    figure, (by_calls, by_tokens) = _figure(11.0, 4.0, columns=2)
    calls = [p["calls"] for p in points]
    lines = [("revise (multi-turn solve@j)", "revise", "tab:blue", "o"),
             ("resample, pick by visible tests (1@j)", "1@j", "tab:orange", "s"),
             ("resample oracle (pass@j)", "pass@j", "tab:green", "^")]
    for label, key, colour, marker in lines:
        by_calls.plot(calls, [p[key] for p in points], marker=marker, color=colour, label=label)
    by_calls.set_xlabel("budget: policy calls")
    by_calls.set_xticks(calls)
    revise_x = [p.get("revise_generated") for p in points]
    resample_x = [p.get("resample_generated") for p in points]
    styled = [by_calls]
    if None in revise_x or None in resample_x:
        resample_name = "first-turn" if result["single_step"].get("from_first_turns") else "single-step"
        missing = [name for name, xs in (("multi-turn", revise_x), (resample_name, resample_x))
                   if None in xs]
        _empty(by_tokens, f"token counts were not recorded in the {' and '.join(missing)} run")
    else:
        by_tokens.plot(revise_x, [p["revise"] for p in points], marker="o", color="tab:blue",
                       label=lines[0][0])
        for label, key, colour, marker in lines[1:]:
            by_tokens.plot(resample_x, [p[key] for p in points], marker=marker, color=colour,
                           label=label)
        for xs, key, colour in ((revise_x, "revise_band", "tab:blue"), (resample_x, "1@j_band", "tab:orange")):
            if all(key in p for p in points):  # bootstrap bands over tasks
                by_tokens.fill_between(xs, [p[key][0] for p in points], [p[key][1] for p in points],
                                       color=colour, alpha=0.15, linewidth=0)
        by_tokens.set_xlabel("budget: tokens generated per task (bands: 95% bootstrap over tasks)")
        styled.append(by_tokens)
    for axis in styled:
        axis.set_ylabel("solve rate")
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
    by_calls.legend(loc="lower right", fontsize="small")
    figure.suptitle(f"Revise vs resample (k = {result['k']}, {result['overall']['tasks']} tasks)")
    return _png(figure)
