"""``ReaderPolicy``: an offline policy whose revisions depend on what the feedback says.

The scripted policy and the stand-in server ignore the feedback, so a prompt-template
experiment run with them shows no effect whatever the templates say. The reader stands in for
a model that *reads* the feedback:

- turn 1 is a sample like the scripted policy's: one of the task's buggy attempts
  (``metadata["attempts"]``) or its reference solution, drawn with the episode's ``seed``;
- after a failing turn it reads the feedback message that answered it and counts the failures
  the feedback *shows*: the task's checks (hidden or visible) whose text the feedback quotes.
  Each shown failure is a chance to repair (``per_failure``, 0.35 by default), and a feedback
  that shows none still leaves a small chance (``base``, 0.05: it knows it failed). The chance
  of answering with the reference solution is ``1 - (1 - base) * (1 - per_failure) ** shown``;
  otherwise it resubmits the next buggy attempt;
- the draws are seeded by task, episode seed and turn, so an episode is reproducible and two
  templates are compared on the same draws: a feedback template that shows more failures
  repairs more often, one that shows none almost never does.

It is stateless (everything is read from ``obs["messages"]``), so one instance serves
concurrent episodes and Ray workers. A single-step observation (no feedback) gets the turn-1
sample. Not a model of any real model's skill: a deterministic instrument for testing that a
template change can be measured.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from agentenv.errors import ConfigError
from agentenv.policies.base import Observation
from agentenv.policies.scripted import _attempts, _index, _lookup, fence, scripted_start
from agentenv.tasks.schema import Task

__all__ = ["ReaderPolicy", "shown_failures"]

# How much of a check's first line must be quoted for the check to count as shown (long checks
# are cut in the middle by the prompts, so their start survives).
_QUOTE_CHARS = 40


def _check_texts(task: Task) -> list[str]:
    """The quotable text of each of the task's checks (hidden and visible), distinct."""
    texts: list[str] = []
    for check in (*task.checks, *(task.visible_checks or ())):
        if isinstance(check, str):
            text = check.strip().splitlines()[0].strip() if check.strip() else ""
        elif isinstance(check, Mapping):
            text = str(check.get("stdin", "")).strip().splitlines()[0].strip() \
                if str(check.get("stdin", "")).strip() else ""
        else:
            text = str(check).strip()
        text = text[:_QUOTE_CHARS]
        if len(text) >= 4 and text not in texts:
            texts.append(text)
    return texts


def shown_failures(task: Task, feedback: str) -> int:
    """How many of ``task``'s checks the feedback text quotes (the failures it shows)."""
    return sum(1 for text in _check_texts(task) if text in feedback)


def _conversation(obs: Observation) -> list[tuple[str, str | None]]:
    """Each assistant message's text and the text of the user message that answered it."""
    messages = obs.get("messages")
    if not isinstance(messages, Sequence):
        return []
    pairs: list[tuple[str, str | None]] = []
    for i, message in enumerate(messages):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            reply = next((m for m in messages[i + 1:] if isinstance(m, Mapping)
                          and m.get("role") in ("user", "tool")), None)
            pairs.append((str(message.get("content") or ""),
                          None if reply is None else str(reply.get("content") or "")))
    return pairs


class ReaderPolicy:
    """Revise by reading the feedback: the more failures it shows, the likelier the repair
    (see the module docstring). ``tasks``: the tasks it may be asked about (default builtin)."""

    name = "reader"
    blocking = False

    def __init__(self, tasks: Sequence[Task] | None = None, *, per_failure: float = 0.35,
                 base: float = 0.05) -> None:
        for label, value in (("per_failure", per_failure), ("base", base)):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"ReaderPolicy {label} must be in [0, 1], got {value!r}")
        self.tasks = _index(tasks)
        self.per_failure = per_failure
        self.base = base

    def repair_chance(self, shown: int) -> float:
        """The chance to answer with the fix after a feedback that shows ``shown`` failures."""
        return 1.0 - (1.0 - self.base) * (1.0 - self.per_failure) ** shown

    def __call__(self, obs: Observation) -> str:
        task = _lookup(self.tasks, obs, "ReaderPolicy")
        seed: Any = obs.get("seed")
        attempts = _attempts(task, None)
        ladder = len(attempts)
        position = scripted_start(task, seed, None)  # == ladder: the reference
        history = _conversation(obs)
        for turn, (_, feedback) in enumerate(history, start=1):
            if position >= ladder or feedback is None:
                break
            draw = random.Random(f"reader\x00{task.name}\x00{seed}\x00{turn}").random()
            if draw < self.repair_chance(shown_failures(task, feedback)):
                position = ladder
            else:
                position = (position + 1) % ladder  # another buggy attempt, never the fix
        first = not history
        if position < ladder:
            opener = "Here is my solution:" if first else "Here is a revised version:"
            return f"{opener}\n\n{fence(attempts[position])}"
        if task.reference_solution is not None:
            opener = "Here is my solution:" if first else \
                "The feedback shows what went wrong. Here is the corrected function:"
            return f"{opener}\n\n{fence(task.reference_solution)}"
        return "I have no further idea how to solve this task."
