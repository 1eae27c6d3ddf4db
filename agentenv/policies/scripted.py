"""Offline policies that need no model: ``ScriptedPolicy`` and ``ReferencePolicy``.

``ScriptedPolicy`` plays a script per task, turn by turn: the task's realistic buggy attempts
(``task.metadata["attempts"]``, or a script passed in), then the reference solution. On a
multi-turn environment that is a real revision: fail, read the feedback, fix. It samples like a
model does: an observation that carries a ``seed`` (every rollout episode has its own) starts
the script at a point drawn uniformly, with that seed, among the attempts and the reference, so
fresh samples of one task differ and resampling is a real alternative to revising. Without a
seed (or with ``sample=False``) it starts at the first attempt. It is stateless: the turn is
read from the observation (one plus the number of assistant messages already in
``obs["messages"]``; else ``obs["turn"]``; else turn 1), so one instance can serve many
concurrent episodes and be shipped to Ray workers. It is the offline default of ``agentenv run``.

``ReferencePolicy`` always answers with the task's reference solution (an upper bound, and a
check that a task set is well-formed).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from agentenv.errors import PolicyError
from agentenv.policies.base import Observation
from agentenv.tasks.schema import Task

__all__ = ["ReferencePolicy", "ScriptedPolicy", "fence", "scripted_answer", "scripted_start", "turn_of"]


def fence(code: str) -> str:
    """Wrap source code in a ```` ```python ```` block, the way chat models answer."""
    return f"```python\n{code.strip(chr(10))}\n```"


def turn_of(obs: Observation) -> int:
    """The 1-based turn an observation asks for.

    Counted from the conversation when there is one (it cannot drift from what the model saw);
    otherwise ``obs["turn"]`` (the multi-turn env's count of the turn being asked for);
    otherwise 1 (a single-step observation).
    """
    messages = obs.get("messages")
    if isinstance(messages, Sequence) and messages:
        return 1 + sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
    turn = obs.get("turn")
    if isinstance(turn, int) and not isinstance(turn, bool) and turn >= 1:
        return turn
    return 1


def _attempts(task: Task, script: Sequence[str] | None) -> list[str]:
    attempts: Any = script if script is not None else task.metadata.get("attempts", ())
    if isinstance(attempts, str) or not isinstance(attempts, Sequence) or \
            not all(isinstance(a, str) for a in attempts):
        raise PolicyError(f"the scripted attempts of task {task.name!r} must be a list of code "
                          f"strings (metadata.attempts), got {type(attempts).__name__}")
    return list(attempts)


def _lookup(tasks: Mapping[str, Task], obs: Observation, policy: str) -> Task:
    """The task an observation poses, by its ``task_name``; a clear error for an unknown one."""
    name = obs.get("task_name")
    task = tasks.get(str(name))
    if task is None:
        raise PolicyError(f"{policy} does not know task {name!r}; build it with the tasks you "
                          f"run: {policy}(tasks=...)")
    return task


def scripted_answer(task: Task, turn: int, script: Sequence[str] | None = None, start: int = 0) -> str:
    """The scripted answer to ``task`` at 1-based ``turn``: script item ``start + turn`` (the
    attempts, then the reference).

    A task with neither attempts left nor a reference gets an answer without code (it scores 0).
    """
    attempts = _attempts(task, script)
    item = start + turn
    if item <= len(attempts):
        opener = "Here is my solution:" if turn == 1 else \
            "Thanks for the feedback. Here is a revised version:"
        return f"{opener}\n\n{fence(attempts[item - 1])}"
    if task.reference_solution is not None:
        opener = "Here is my solution:" if turn == 1 else \
            "I see what went wrong. Here is the corrected function:"
        return f"{opener}\n\n{fence(task.reference_solution)}"
    return "I have no further idea how to solve this task."


def scripted_start(task: Task, seed: object, script: Sequence[str] | None = None) -> int:
    """Where a seeded sample starts the script: uniform over the attempts and the reference
    (0, the first attempt, without an int seed). Stable across processes and Python versions."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        return 0
    options = len(_attempts(task, script)) + (task.reference_solution is not None)
    return random.Random(f"scripted\x00{task.name}\x00{seed}").randrange(options) if options else 0


def _index(tasks: Sequence[Task] | None) -> dict[str, Task]:
    if tasks is None:
        from agentenv.tasks.builtin import builtin_tasks

        tasks = builtin_tasks()
    return {t.name: t for t in tasks}


class ScriptedPolicy:
    """Replay each task's scripted attempts turn by turn, then its reference solution.

    ``tasks`` are the tasks it may be asked about (default: the builtin set); ``scripts`` maps a
    task name to its own list of attempts, replacing ``metadata["attempts"]`` for that task.
    ``sample`` (default True) starts an observation with a ``seed`` at a seeded random point of
    the script (see the module docstring); False always starts at the first attempt.
    """

    name = "scripted"
    blocking = False

    def __init__(self, tasks: Sequence[Task] | None = None,
                 scripts: Mapping[str, Sequence[str]] | None = None, *, sample: bool = True) -> None:
        self.tasks = _index(tasks)
        self.sample = sample
        self.scripts: dict[str, list[str]] = {}
        for name, script in (scripts or {}).items():
            if isinstance(script, str) or not isinstance(script, Sequence) or \
                    not all(isinstance(a, str) for a in script):
                raise PolicyError(f"scripts[{name!r}] must be a list of code strings")
            self.scripts[name] = list(script)

    def __call__(self, obs: Observation) -> str:
        task = _lookup(self.tasks, obs, "ScriptedPolicy")
        script = self.scripts.get(task.name)
        start = scripted_start(task, obs.get("seed"), script) if self.sample else 0
        return scripted_answer(task, turn_of(obs), script, start)

    def script_length(self, task_name: str) -> int:
        """How many buggy attempts come before the reference for this task."""
        task = self.tasks[task_name]
        return len(_attempts(task, self.scripts.get(task_name)))


class ReferencePolicy:
    """Answer every task with its reference solution."""

    name = "reference"
    blocking = False

    def __init__(self, tasks: Sequence[Task] | None = None) -> None:
        self.tasks = _index(tasks)

    def __call__(self, obs: Observation) -> str:
        task = _lookup(self.tasks, obs, "ReferencePolicy")
        if task.reference_solution is None:
            raise PolicyError(f"task {task.name!r} has no reference_solution, so ReferencePolicy "
                              "cannot answer it; use --policy scripted or add one to the task")
        return fence(task.reference_solution)
