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
This module orders the episodes and words their facts; the markup is ``episodes.html.j2``
(its style and script ``episodes.css``, ``episodes.js``), rendered with autoescape by
:mod:`agentenv.report.templating`: every string from the run is text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from urllib.parse import quote

from agentenv.records import Trajectory, TurnRecord
from agentenv.report.runs import task_order
from agentenv.report.templating import render
from agentenv.untrusted import printable

__all__ = ["BROWSER_FILE", "browser_page", "episode_anchors", "filter_link", "final_outcome",
           "ordered_episodes"]

BROWSER_FILE = "episodes.html"


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
    # As the page shows the value (printable), so that the page's filter finds it.
    parts = [f"{key}={quote(printable(value), safe='')}"
             for key, value in (("outcome", outcome), ("task", task))
             if value]
    return BROWSER_FILE + ("#" + "&".join(parts) if parts else "")


def final_outcome(trajectory: Trajectory) -> str:
    """The outcome of the episode's last turn ("no_turns" for an episode without any)."""
    return trajectory.turns[-1].outcome if trajectory.turns else "no_turns"


def _token_note(record: TurnRecord) -> str:
    note = (f"tokens: answer {record.action_tokens}, feedback {record.observation_tokens}, "
            f"conversation so far {record.cumulative_tokens}")
    if record.usage:
        note += ", server usage " + ", ".join(f"{k}={v}" for k, v in sorted(record.usage.items()))
    return note


def _facts(t: Trajectory) -> str:
    solved = f"solved on turn {t.solved_turn}" if t.solved_turn is not None else "not solved"
    facts = [solved, f"stop reason {t.stop_reason or '–'}",
             f"final reward {t.final_reward:.3f}", f"{len(t.turns)} of {t.max_turns} turn(s)",
             f"difficulty {t.difficulty or '–'}", f"policy {t.policy or '–'}"]
    if t.model:
        facts.append(f"model {t.model}")
    if t.metadata.get("tokenizer"):
        facts.append(f"tokens counted with {t.metadata['tokenizer']}")
    if t.episode_id:
        facts.append(f"episode id {t.episode_id}")
    return "; ".join(facts)


def browser_page(trajectories: Sequence[Trajectory], title: str) -> str:
    """The rollout browser as one self-contained HTML document (see the module docstring)."""
    episodes = ordered_episodes(trajectories)
    anchors = episode_anchors(episodes)
    outcomes = Counter(final_outcome(t) for t in episodes)
    tasks = Counter(t.task_name for t in episodes)
    return render(
        "episodes.html.j2",
        title=title,
        outcomes=sorted(outcomes), outcome_counts=outcomes,
        tasks=sorted(tasks, key=task_order), task_counts=tasks,
        episodes=[{"t": t, "anchor": anchor, "outcome": final_outcome(t), "facts": _facts(t),
                   "rewards": " → ".join(f"{r:.2f}" for r in t.rewards) or "–"}
                  for t, anchor in zip(episodes, anchors, strict=True)],
        token_note=_token_note,
    )
