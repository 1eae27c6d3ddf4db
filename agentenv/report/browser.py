"""The rollout browser: one HTML page holding every episode of a run, turn by turn.

``episodes.html`` opens with an index (one row per episode: task, sample, outcome, turns,
rewards) whose rows link to the episode's own section further down. A section shows the
conversation as it happened: the opening messages (the system prompt, folded, and the task
as the policy read it), then for each turn the policy's answer, the code extracted from it,
the verdict (outcome, checks passed, reward and its change), the failing checks with their
messages, and the feedback the environment sent back. A run recorded before trajectories kept
their opening messages says so in their place.

Filtering: two menus (final outcome, task) hide the rows and sections that do not match. The
filter lives in the address, ``episodes.html#outcome=pass&task=add``, so a filtered view can be
linked to (the run report does) and bookmarked. The page is one self-contained file: styles
and the few lines of script inline, nothing fetched. Without scripts every episode is shown.
Every string from the run is escaped.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Sequence
from urllib.parse import quote

from agentenv.records import Trajectory, TurnRecord
from agentenv.report.runs import task_order

__all__ = ["BROWSER_FILE", "browser_page", "episode_anchors", "filter_link", "final_outcome",
           "ordered_episodes"]

BROWSER_FILE = "episodes.html"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin: 0 0 0.4em; }
.filters { position: sticky; top: 0; background: #fff; padding: 0.5em 0; border-bottom: 1px solid #ddd; }
.filters label { margin-right: 1.2em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
.episode { border: 1px solid #ddd; border-radius: 6px; padding: 0.8em 1em; margin: 1.2em 0; }
.turn { border-left: 4px solid #ccc; padding: 0.2em 0 0.2em 0.8em; margin: 0.8em 0; }
.turn.o-pass { border-left-color: #2a9d4b; }
.msg { margin: 0.4em 0; }
.role { font-size: 0.8em; font-weight: 600; text-transform: uppercase; color: #555; }
pre { background: #f6f8fa; padding: 0.5em 0.7em; white-space: pre-wrap; overflow-wrap: anywhere;
      margin: 0.2em 0; font-size: 0.85em; }
.verdict { font-weight: 600; }
.outcome { display: inline-block; padding: 0 0.4em; border-radius: 3px; background: #eee; }
.outcome.o-pass { background: #d4f4dd; } .outcome.o-wrong_answer { background: #fde8c8; }
.outcome.o-runtime_error, .outcome.o-syntax_error, .outcome.o-timeout,
.outcome.o-no_code { background: #f9d3d3; }
.note { color: #666; font-size: 0.9em; }
[hidden] { display: none !important; }
"""

# Applies the filter in the address to the menus, rows and sections; keeps the two in step.
_SCRIPT = """
(function () {
  var menus = {outcome: document.getElementById('f-outcome'), task: document.getElementById('f-task')};
  function wanted() {
    var out = {outcome: '', task: ''};
    var hash = location.hash.slice(1);
    if (hash.indexOf('=') < 0) return out;
    hash.split('&').forEach(function (part) {
      var kv = part.split('=');
      if (kv[0] in out) out[kv[0]] = decodeURIComponent(kv.slice(1).join('='));
    });
    return out;
  }
  function apply() {
    var w = wanted();
    if (location.hash.indexOf('=') < 0) {
      w.outcome = menus.outcome.value; w.task = menus.task.value;
    } else {
      menus.outcome.value = w.outcome; menus.task.value = w.task;
    }
    var shown = 0;
    document.querySelectorAll('[data-episode]').forEach(function (el) {
      var ok = (!w.outcome || el.dataset.outcome === w.outcome) && (!w.task || el.dataset.task === w.task);
      el.hidden = !ok;
      if (ok && el.tagName === 'TR') shown += 1;
    });
    document.getElementById('shown').textContent = shown;
  }
  function choose() {
    var parts = [];
    if (menus.outcome.value) parts.push('outcome=' + encodeURIComponent(menus.outcome.value));
    if (menus.task.value) parts.push('task=' + encodeURIComponent(menus.task.value));
    history.replaceState(null, '', parts.length ? '#' + parts.join('&') : location.pathname);
    apply();
  }
  menus.outcome.addEventListener('change', choose);
  menus.task.addEventListener('change', choose);
  window.addEventListener('hashchange', apply);
  apply();
})();
"""


def ordered_episodes(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """Episodes in the browser's order: by task (:func:`task_order`), then sample."""
    return sorted(trajectories, key=lambda t: (task_order(t.task_name), t.sample, t.episode_id or ""))


def episode_anchors(trajectories: Sequence[Trajectory]) -> list[str]:
    """An HTML id per episode (same order), made from its episode id and unique in the page."""
    seen: Counter[str] = Counter()
    anchors = []
    for t in trajectories:
        base = "ep-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", t.episode_id or f"{t.task_name}-{t.sample}")
                        .strip("-") or "episode")
        seen[base] += 1
        anchors.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return anchors


def filter_link(*, outcome: str | None = None, task: str | None = None) -> str:
    """The browser's address for a filtered view (relative to the report directory)."""
    parts = [f"{key}={quote(value, safe='', errors='backslashreplace')}"  # any task name
             for key, value in (("outcome", outcome), ("task", task))
             if value]
    return BROWSER_FILE + ("#" + "&".join(parts) if parts else "")


def final_outcome(trajectory: Trajectory) -> str:
    """The outcome of the episode's last turn ("no_turns" for an episode without any)."""
    return trajectory.turns[-1].outcome if trajectory.turns else "no_turns"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _index(trajectories: Sequence[Trajectory], anchors: Sequence[str]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("episode", "difficulty", "outcome", "turns",
                                                "rewards by turn", "final reward", "stop reason"))
    rows = []
    for t, anchor in zip(trajectories, anchors, strict=True):
        outcome = final_outcome(t)
        rewards = " → ".join(f"{r:.2f}" for r in t.rewards) or "–"
        rows.append(
            f'<tr data-episode data-task="{_e(t.task_name)}" data-outcome="{_e(outcome)}">'
            f'<td><a href="#{anchor}">{_e(t.task_name)} #{t.sample}</a></td>'
            f"<td>{_e(t.difficulty or '–')}</td>"
            f'<td><span class="outcome o-{_e(outcome)}">{_e(outcome)}</span></td>'
            f"<td>{len(t.turns)} of {t.max_turns}</td><td>{_e(rewards)}</td>"
            f"<td>{t.final_reward:.3f}</td><td>{_e(t.stop_reason or '–')}</td></tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _failures(record: TurnRecord) -> str:
    if not record.failures:
        return ""
    rows = "".join(f"<tr><td>{f.index}</td><td>{_e(f.kind)}</td><td><code>{_e(f.check)}</code></td>"
                   f"<td>{_e(f.message)}</td></tr>" for f in record.failures)
    return ('<div class="msg"><span class="role">failing checks</span><table><thead><tr><th>#</th>'
            f"<th>kind</th><th>check</th><th>message</th></tr></thead><tbody>{rows}</tbody></table></div>")


def _turn(record: TurnRecord) -> str:
    visible = ""
    if record.visible_total:
        visible = f", visible checks {record.visible_passed}/{record.visible_total}"
    verdict = (f'<span class="outcome o-{_e(record.outcome)}">{_e(record.outcome)}</span> '
               f"passed {record.passed}/{record.total}{visible}, reward {record.reward:.3f} "
               f"(change {record.delta:+.3f})")
    parts = [f'<div class="turn o-{_e(record.outcome)}"><div class="verdict">Turn {record.turn}: '
             f"{verdict}</div>",
             f'<div class="msg"><span class="role">assistant</span><pre>{_e(record.response_text)}</pre></div>']
    if record.code.strip() != record.response_text.strip():
        parts.append('<div class="msg"><span class="role">code extracted and run</span>'
                     f"<pre>{_e(record.code) if record.code.strip() else '(no code found)'}</pre></div>")
    parts.append(_failures(record))
    if record.feedback:
        parts.append(f'<div class="msg"><span class="role">user (feedback)</span>'
                     f"<pre>{_e(record.feedback)}</pre></div>")
    tokens = f"tokens: answer {record.action_tokens}, feedback {record.observation_tokens}, " \
             f"conversation so far {record.cumulative_tokens}"
    if record.usage:
        tokens += ", server usage " + ", ".join(f"{k}={v}" for k, v in sorted(record.usage.items()))
    parts.append(f'<div class="note">{_e(tokens)}</div></div>')
    return "".join(parts)


def _opening(t: Trajectory) -> str:
    """The messages the episode opened with: a system prompt folded (it is the same in every
    episode), the rest shown."""
    if not t.opening:
        return '<p class="note">the opening messages were not recorded in this run</p>'
    parts = []
    for message in t.opening:
        role, content = _e(message.get("role", "?")), _e(message.get("content", ""))
        if message.get("role") == "system":
            parts.append(f'<div class="msg"><details><summary class="role">{role}</summary>'
                         f"<pre>{content}</pre></details></div>")
        else:
            label = f"{role} (task)" if message.get("role") == "user" else role
            parts.append(f'<div class="msg opening"><span class="role">{label}</span><pre>{content}</pre></div>')
    return "".join(parts)


def _section(t: Trajectory, anchor: str) -> str:
    outcome = final_outcome(t)
    solved = f"solved on turn {t.solved_turn}" if t.solved_turn is not None else "not solved"
    facts = [f"{solved}", f"stop reason {t.stop_reason or '–'}",
             f"final reward {t.final_reward:.3f}", f"{len(t.turns)} of {t.max_turns} turn(s)",
             f"difficulty {t.difficulty or '–'}", f"policy {t.policy or '–'}"]
    if t.model:
        facts.append(f"model {t.model}")
    if t.metadata.get("tokenizer"):
        facts.append(f"tokens counted with {t.metadata['tokenizer']}")
    if t.episode_id:
        facts.append(f"episode id {t.episode_id}")
    turns = "".join(_turn(r) for r in t.turns) or '<p class="note">no turns recorded</p>'
    return (f'<section class="episode" id="{anchor}" data-episode data-task="{_e(t.task_name)}" '
            f'data-outcome="{_e(outcome)}"><h2>{_e(t.task_name)} #{t.sample} '
            f'<span class="outcome o-{_e(outcome)}">{_e(outcome)}</span></h2>'
            f'<div class="note">{_e("; ".join(facts))} · <a href="#top">back to the index</a></div>'
            f"{_opening(t)}{turns}</section>")


def _menu(element_id: str, label: str, values: Sequence[str], counts: Counter[str]) -> str:
    options = "".join(f'<option value="{_e(v)}">{_e(v)} ({counts[v]})</option>' for v in values)
    return (f'<label>{label} <select id="{element_id}"><option value="">all</option>{options}'
            "</select></label>")


def browser_page(trajectories: Sequence[Trajectory], title: str) -> str:
    """The rollout browser as one self-contained HTML document (see the module docstring)."""
    episodes = ordered_episodes(trajectories)
    anchors = episode_anchors(episodes)
    outcomes = Counter(final_outcome(t) for t in episodes)
    tasks = Counter(t.task_name for t in episodes)
    filters = ('<div class="filters">'
               + _menu("f-outcome", "outcome", sorted(outcomes), outcomes)
               + _menu("f-task", "task", sorted(tasks, key=task_order), tasks)
               + f'<span class="note"><span id="shown">{len(episodes)}</span> of {len(episodes)} '
               "episode(s) shown</span></div>")
    sections = "".join(_section(t, a) for t, a in zip(episodes, anchors, strict=True))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
            f'<h1 id="top">{_e(title)}</h1>'
            f'<p class="note">Every episode of the run, turn by turn: what the policy answered, '
            "the code that ran, the checks that failed and the feedback it got. Pick an outcome "
            f"or a task to filter. <a href=\"report.html\">Back to the report</a>.</p>"
            f"{filters}{_index(episodes, anchors)}{sections}"
            f"<script>{_SCRIPT}</script></body></html>\n")
