"""CodingEnv: the single-step face of the episode core (a contextual bandit), as the walk-through has it.

``reset()`` samples a task (seeded) and returns its prompt; ``step(action)`` extracts code from
the policy's raw text, runs it against the task's hidden checks in the sandbox and returns
``({}, reward, done=True, info)``. It is :class:`agentenv.envs.multiturn.MultiTurnCodingEnv`'s
core with exactly one turn, so every option means the same in both shapes: ``prompts_dir``
(the templates, whose ids go into ``env.trajectory``), ``tokenizer`` and ``token_budget``,
``feedback_from`` and ``stop_when`` (``"visible"`` runs the visible checks apart and keeps
``info`` free of hidden results), ``reward_fn``, ``grader``/``isolation`` and the redaction of
secrets. Not here: anything of its own; the core lives in ``agentenv.envs.episode``.

Besides the walk-through's keys (prompt, entry_point, task_name), the observation carries
``messages`` (the opening conversation rendered from the same Jinja templates as the multi-turn
env, so a chat policy conditions on identical prompts in both shapes) and the core's counters.
The verdict is rendered with the feedback template and kept in the turn record.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv.choices import Mode
from agentenv.envs.episode import EpisodeCore, StepResult
from agentenv.grading.scoring import Grader
from agentenv.rewards import RewardFn, dense_reward
from agentenv.settings import DEFAULT_TIMEOUT
from agentenv.tasks.builtin import builtin_tasks
from agentenv.tasks.schema import Task
from agentenv.tokens import Tokenizer

__all__ = ["TASKS", "CodingEnv"]

TASKS: list[Task] = builtin_tasks()


class CodingEnv(EpisodeCore):
    """Single-step coding environment: reset() poses a task, step(code) runs the hidden unit
    tests and returns a reward in [0, 1]. There is no state transition: a contextual bandit,
    the shape most RL-from-verifiable-rewards training (e.g. GRPO) uses.

    ``info`` carries ``terminated=True`` and ``stop_reason="single_step"`` on every graded step.
    A submission the sandbox could not grade (a ``SandboxError``: an infrastructure fault, not
    the model's failure) ends the episode unscored: reward 0.0 with ``info["infra_error"]`` the
    fault, ``stop_reason="infra_error"``, ``terminated`` and ``truncated`` False, and
    ``env.trajectory.infra_error`` set (reports leave it out of every metric); ``step`` may be
    called again to retry. ``on_infra_error="raise"`` raises the ``SandboxError`` instead.
    """

    mode: Mode = Mode.SINGLE_STEP

    def __init__(self, tasks: Sequence[Task] = TASKS, timeout: float = DEFAULT_TIMEOUT, seed: int | None = None,
                 *, reward_fn: RewardFn = dense_reward, isolation: str | None = None,
                 prompts_dir: str | Path | None = None, tokenizer: Tokenizer | str | None = None,
                 grader: Grader | None = None, feedback_from: str = "all", stop_when: str = "hidden",
                 token_budget: int | None = None, step_reward: str = "delta",
                 on_infra_error: str = "flag") -> None:
        super().__init__(tasks=list(tasks), max_turns=1, seed=seed, timeout=timeout,
                         token_budget=token_budget, tokenizer=tokenizer, prompts_dir=prompts_dir,
                         feedback_from=feedback_from, reward_fn=reward_fn, grader=grader,
                         isolation=isolation, stop_when=stop_when, step_reward=step_reward,
                         on_infra_error=on_infra_error)

    def reset(self, task_index: int | None = None, *, seed: int | None = None) -> dict[str, Any]:
        """Pose a task: a seeded random one, or ``tasks[task_index]``. Returns the observation."""
        return super().reset(task_index, seed=seed)

    def step(self, action: str) -> StepResult:
        """Score a submission: extract code, run the hidden checks, return the reward."""
        _, reward, done, info = super().step(action)
        return {}, reward, done, info   # done is always True: single-step

    async def astep(self, action: str) -> StepResult:
        """Async twin of :meth:`step` (the sandbox run is awaited, not blocking the loop)."""
        _, reward, done, info = await super().astep(action)
        return {}, reward, done, info
