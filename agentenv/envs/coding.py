"""CodingEnv: the single-step coding environment (a contextual bandit), as the walk-through has it.

``reset()`` samples a task (seeded) and returns its prompt; ``step(action)`` extracts code from
the policy's raw text, runs it against the task's hidden checks in the sandbox and returns
``(obs, reward, done=True, info)``. The reward is the format gate then the dense fraction, or
any reward function passed as ``reward_fn``. Each episode also leaves a one-turn
:class:`~agentenv.records.Trajectory` in ``env.trajectory``. Not here: conversation state
(see ``MultiTurnCodingEnv``) and the sandbox itself.

Besides the walk-through's keys (prompt, entry_point, task_name), the observation carries
``messages``: the opening conversation (system + task) rendered from the same Jinja templates
as the multi-turn env, so a chat policy conditions on identical prompts in both shapes, and
token counts of the two shapes are comparable.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv.envs.scoring import Grader, SandboxGrader, Scored
from agentenv.errors import ConfigError, EnvStateError
from agentenv.extract import extract_code
from agentenv.prompts import Prompts
from agentenv.records import Trajectory, TurnRecord
from agentenv.rewards import RewardFn, checked_reward, dense_reward
from agentenv.tasks.builtin import builtin_tasks
from agentenv.tasks.schema import Task
from agentenv.tokens import TokenCounter, Tokenizer

__all__ = ["TASKS", "CodingEnv"]

TASKS: list[Task] = builtin_tasks()


class CodingEnv:
    """Single-step coding environment: reset() poses a task, step(code) runs the hidden unit
    tests and returns a reward in [0, 1]. There is no state transition: a contextual bandit,
    the shape most RL-from-verifiable-rewards training (e.g. GRPO) uses."""

    def __init__(self, tasks: Sequence[Task] = TASKS, timeout: float = 5.0, seed: int | None = None,
                 *, reward_fn: RewardFn = dense_reward, isolation: str | None = None,
                 prompts_dir: str | Path | None = None, tokenizer: Tokenizer | str | None = None,
                 grader: Grader | None = None) -> None:
        self.tasks = list(tasks)
        if not self.tasks:
            raise ConfigError("CodingEnv needs at least one task; pass tasks=load_tasks(...)")
        if not timeout > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.timeout = timeout
        self.seed = seed
        self.reward_fn = reward_fn
        self.isolation = isolation
        self.grader: Grader = grader if grader is not None else SandboxGrader(isolation)
        self.prompts = Prompts(prompts_dir)
        self.counter = TokenCounter(tokenizer)
        self._rng = random.Random(seed)
        self.current_task: Task | None = None
        self._opening_tokens = 0
        self.trajectory: Trajectory | None = None
        self._stepped = False

    # -- reset -------------------------------------------------------------------------------
    def reset(self, task_index: int | None = None) -> dict[str, Any]:
        """Pose a task: a seeded random one, or ``tasks[task_index]``. Returns the observation."""
        if task_index is None:
            self.current_task = self._rng.choice(self.tasks)
        else:
            if isinstance(task_index, bool) or not isinstance(task_index, int) or \
                    not -len(self.tasks) <= task_index < len(self.tasks):
                raise ConfigError(f"task_index must be an int in [0, {len(self.tasks)}), got {task_index!r}")
            self.current_task = self.tasks[task_index]
        task = self.current_task
        messages = self.prompts.messages(task, max_turns=1)
        self._opening_tokens = sum(self.counter.count_message(m["content"]) for m in messages)
        self.trajectory = Trajectory(task_name=task.name, seed=self.seed, max_turns=1,
                                     difficulty=task.difficulty, mode="single_step",
                                     template_ids={k: v for k, v in self.prompts.template_ids.items()
                                                   if k in ("system", "task")},
                                     metadata={"tokenizer": self.counter.name})
        self._stepped = False
        return {"prompt": task.prompt, "entry_point": task.entry_point, "task_name": task.name,
                "messages": messages}

    # -- step --------------------------------------------------------------------------------
    def _begin_step(self, action: object) -> tuple[Task, str]:
        if self.current_task is None:
            raise EnvStateError("Cannot call CodingEnv.step() before reset(); call env.reset() first.")
        if self._stepped:
            raise EnvStateError("This single-step episode is over (done=True); call env.reset() "
                                "to pose the next task.")
        text = action if isinstance(action, str) else ""
        return self.current_task, extract_code(text, self.current_task.entry_point)

    def _finish_step(self, task: Task, action: object, code: str, scored: Scored
                     ) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        result = scored.hidden
        reward = checked_reward(self.reward_fn, result, code)
        text = str(action) if isinstance(action, str) else ""
        action_tokens = self.counter.count_message(text)
        record = TurnRecord.from_result(
            turn=1, response_text=text, code=code, result=result, reward=reward,
            visible=scored.visible, action_tokens=action_tokens,
            cumulative_tokens=self._opening_tokens + action_tokens,
            usage=getattr(action, "usage", None), finish_reason=getattr(action, "finish_reason", None),
        )
        assert self.trajectory is not None
        self.trajectory.turns.append(record)
        self.trajectory.stop_reason = "single_step"
        self._stepped = True
        info = {
            "task_name": task.name,
            "passed": result.passed,
            "total": result.total,
            "fraction": result.fraction,
            "timed_out": result.timed_out,
            "outcome": record.outcome,
            "failures": [f.to_dict() for f in result.failures],
            "isolation": result.isolation,
            "exec_seconds": result.exec_seconds,
            "terminated": True,
            "truncated": False,
            "stop_reason": "single_step",
        }
        return {}, reward, True, info   # done is always True: single-step

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        """Score a submission: extract code, run the hidden checks, return the reward."""
        task, code = self._begin_step(action)
        scored = self.grader.score(task, code, timeout=self.timeout)
        return self._finish_step(task, action, code, scored)

    async def astep(self, action: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        """Async twin of :meth:`step` (the sandbox run is awaited, not blocking the loop)."""
        task, code = self._begin_step(action)
        scored = await self.grader.ascore(task, code, timeout=self.timeout)
        return self._finish_step(task, action, code, scored)
