"""Self-contained HTML pages: one file, styles inline, figures inlined as base64 PNG.

No scripts, no fonts, no external links, so a page opens offline, attaches to an email and
archives with the run. Every string from a run (task names, template ids, model names) is
escaped. Builds the page for a run's report (figures when they were drawn, and a link to every
episode in the rollout browser, :mod:`agentenv.report.browser`) and the one for revise vs
resample.
"""

from __future__ import annotations

import base64
import html
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from agentenv.records import Trajectory
from agentenv.report.browser import (
    BROWSER_FILE,
    episode_anchors,
    filter_link,
    final_outcome,
    ordered_episodes,
)
from agentenv.report.records import MetricRow, ReviseResult, RunMetrics
from agentenv.report.runs import mixed_templates_warning
from agentenv.report.text import (
    TOKEN_COLUMNS,
    count,
    difficulty_rows,
    metric_columns,
    metric_row,
    resample_arm,
    revise_header,
    revise_rows,
)

__all__ = ["image", "render_page", "report_page", "revise_page", "table"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f5f5f5; }
img { max-width: 100%; margin: 0.5em 0; }
.note { color: #666; font-size: 0.9em; }
code { background: #f5f5f5; padding: 0 0.2em; }
.episodes a { margin-right: 0.5em; white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
p { overflow-wrap: anywhere; }
"""


def _cell(value: Any) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3f}"
    return html.escape(str(value))


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An HTML table; cells escaped, floats to three decimals, None as a dash."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    # In a scrolling box: a wide table (revise vs resample has 12 columns) never runs off the page.
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            "</table></div>")


def image(png: bytes, alt: str) -> str:
    """A PNG inlined as a data URI."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def render_page(title: str, sections: Sequence[tuple[str, str]], intro: str = "") -> str:
    """A complete HTML document: a title, an optional intro paragraph, then titled sections."""
    parts = [f"<h2>{html.escape(heading)}</h2>\n{body}" for heading, body in sections]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>"
            + (f"<p class=\"note\">{intro}</p>" if intro else "")
            + "\n".join(parts) + "</body></html>\n")


def _settings(settings: Mapping[str, Any]) -> str:
    rows = []
    for key, values in settings.items():
        if key == "template_ids":
            shown = "; ".join(", ".join(f"{k}={v}" for k, v in sorted(ids.items())) or "(none)"
                              for ids in values)
        elif key == "mixed_templates":
            shown = mixed_templates_warning(values) or "no (every episode used the same templates)"
        else:
            shown = ", ".join(str(v) for v in values)
        rows.append([key, shown or None])
    return table(["setting", "value"], rows)


def _metric_rows(rows: Mapping[str, MetricRow]) -> list[list[Any]]:
    return [metric_row(name, row) for name, row in rows.items()]


def _figure(images: Mapping[str, bytes], name: str, alt: str) -> str:
    return image(images[name], alt) if name in images else ""


def _episode_links(episodes: Sequence[Trajectory]) -> str:
    """Per task, a link to each of its episodes in the browser; per outcome, a filtered view."""
    ordered = ordered_episodes(episodes)
    anchors = episode_anchors(ordered)
    by_task: dict[str, list[str]] = {}
    for t, anchor in zip(ordered, anchors, strict=True):
        mark = f"#{t.sample} {final_outcome(t)} {t.final_reward:.2f}"
        by_task.setdefault(t.task_name, []).append(
            f'<a href="{BROWSER_FILE}#{anchor}">{html.escape(mark)}</a>')
    outcomes: dict[str, int] = {}
    for t in ordered:
        outcomes[final_outcome(t)] = outcomes.get(final_outcome(t), 0) + 1
    views = " ".join(f'<a href="{html.escape(filter_link(outcome=o))}">{html.escape(o)} ({n})</a>'
                     for o, n in sorted(outcomes.items()))
    rows = "".join(f'<tr><td><a href="{html.escape(filter_link(task=name))}">{html.escape(name)}</a>'
                   f'</td><td class="episodes" style="text-align:left">{" ".join(links)}</td></tr>'
                   for name, links in by_task.items())
    return (f'<p>Every episode turn by turn, in the <a href="{BROWSER_FILE}">rollout browser</a> '
            f"({count(len(ordered), 'episode')}). By final outcome: {views}</p>"
            f"<table><thead><tr><th>task</th><th>episodes (sample, final outcome, reward)</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>")


def report_page(metrics: RunMetrics, images: Mapping[str, bytes], title: str,
                episodes: Sequence[Trajectory] | None = None) -> str:
    """The run report: settings, headline table, the figures that were drawn, per-difficulty
    and per-task rows, and (given the episodes) a link to each in the rollout browser."""
    run = metrics["run"]
    turns = run["turns"]
    header = ["", "tasks", "episodes", *metric_columns(turns), *TOKEN_COLUMNS]
    overall = metrics["overall"]
    intro = (f"{run['mode'].replace('_', '-')} run: {count(run['tasks'], 'task')}, "
             f"{count(run['episodes'], 'episode')}, up to {count(turns, 'turn')}. Rates average over tasks (± is their 95% interval over tasks, 1.96 standard errors); repair is "
             "the share of episodes that failed turn 1 and were solved later. Tokens per episode: "
             "gen, generated by the policy; proc, processed: prompt plus generated summed over calls (what a "
             "server bills); conv, the final conversation with every message once.")
    by_turn = [[t, metrics["episodes_reaching_turn"][t - 1], overall["cumulative_solve_rate"][t - 1],
                metrics["mean_reward_by_turn"][t - 1]] for t in range(1, turns + 1)]
    transitions = metrics["transitions"]
    transition_rows = [[state, *row] for state, row
                       in zip(transitions["states"], transitions["counts"], strict=True)]
    sections = [
        ("Settings", _settings(run["settings"])),
        ("Summary", (f'<p>Every episode\'s conversation, turn by turn: <a href="{BROWSER_FILE}">'
                     "the rollout browser</a> (links per episode under Episodes below).</p>"
                     if episodes else "")
         + table(header, _metric_rows({"overall": overall}))
         + table(["stop reason", "episodes"], list(metrics["stop_reasons"].items()))),
        ("Cumulative solve rate by turn",
         _figure(images, "cumulative_solve_rate", "solve rate by turn")
         + table(["turn", "episodes reaching it", "solved by it", "mean reward at it"], by_turn)),
        ("Reward distribution", _figure(images, "reward_distribution", "reward histogram")
         + _reward_table(metrics["reward_distribution"])),
        ("Outcome transitions", _figure(images, "transition_matrix", "transition matrix")
         + table(["turn t \\ turn t+1", *transitions["states"]], transition_rows)),
    ]
    levels = difficulty_rows(metrics["by_difficulty"])
    if levels:
        sections.append(("By difficulty", table(header, _metric_rows(levels))))
    sections.append(("By task", table(["task", *header[1:]], _metric_rows(metrics["by_task"]))))
    if episodes:
        sections.append(("Episodes", _episode_links(episodes)))
    return render_page(title, sections, intro=html.escape(intro))


def _reward_table(dist: Mapping[str, Any]) -> str:
    edges = dist["bin_edges"]
    centres = [(lo + hi) / 2 for lo, hi in itertools.pairwise(edges)]
    rows = [[f"{c:.2f}", final, first] for c, final, first
            in zip(centres, dist["final_counts"], dist["first_turn_counts"], strict=True)
            if final or first]
    return table(["reward (bin centre)", "episodes (final turn)", "episodes (first turn)"], rows)


def revise_page(result: ReviseResult, figure: bytes | None) -> str:
    """The revise-vs-resample page: the budget figure (when drawn), the table, the interval."""
    k = result["k"]
    diff = result["revise_minus_1@k"]
    arm, samples = resample_arm(result)
    intro = html.escape(
        f"At a budget of k = {k} policy calls per task: revise (one multi-turn episode of up to "
        f"{k} turns, solve@{k}) against resample ({samples}; 1@{k} picks the first "
        f"that passes its visible checks, pass@{k} is the oracle pick). revise - 1@{k} = "
        f"{diff['estimate']:+.3f}, {round(diff['confidence'] * 100)}% CI [{diff['low']:+.3f}, "
        f"{diff['high']:+.3f}] (paired bootstrap over {count(diff['n'], 'task')}).")
    sections = [
        ("Solve rate against budget", image(figure, "solve rate against budget") if figure else
         '<p class="note">(figure left out: matplotlib is not installed)</p>'),
        ("Table", table(revise_header(k), revise_rows(result))
         + '<p class="note">gen = generated tokens, proc = processed (prompt + generated over '
           f"calls); rev = one multi-turn episode of up to {k} turns, {k}x = {html.escape(samples)}</p>"),
        (f"Resample arm: {arm}", _settings(result["single_step"]["settings"])),
        ("Multi-turn run", _settings(result["multi_turn"]["settings"])),
    ]
    return render_page("Revise vs resample", sections, intro=intro)
