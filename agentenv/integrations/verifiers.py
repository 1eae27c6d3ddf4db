"""verifiers integration (verifiers 0.4, the ``verifiers.v1`` stack): agentenv's tasks as a
taskset whose rubric is the sandbox, and a multi-turn env that feeds the test results back.

verifiers' conventions: a *taskset* (``vf.Taskset``) yields *tasks* (``vf.Task`` over a
``vf.TaskData`` row); a task scores a finished trace with its ``@vf.reward`` (weighted, summed:
the rubric) and ``@vf.metric`` methods; an *env* (``vf.Env``) says how a task becomes an
episode, ``run(task, agents)``; verifiers finds a taskset and its env by id, importing the
module of that name and taking the ``Taskset`` and ``Env`` subclasses its ``__all__`` exports
(the ``agentenv_coding`` package re-exports this module for that).

- :class:`CodingTaskset` (config :class:`CodingTasksetConfig`: ``tasks`` a task-set name or
  path, ``max_turns``, ``feedback_from``, ``timeout``, ``token_budget``, ``prompts_dir``)
  yields one :class:`CodingTask` per agentenv task, prompted with agentenv's own templates.
- :class:`CodingTask`'s rubric: ``tests_passed`` (weight 1: agentenv's dense reward, the last
  reply graded in the sandbox, or the multi-turn episode's final score, ``final_only`` in
  :mod:`agentenv.credit`) and the metrics ``solved`` and ``turns``.
- :class:`CodingVerifiersEnv`'s ``run`` plays the user the way verifiers' TextArena env does:
  each assistant reply is one ``MultiTurnCodingEnv`` step; while the episode goes on the
  rendered feedback is the next user turn. The episode lands on the trace's ``info``.

Needs the ``verifiers`` extra.
"""

from __future__ import annotations

from typing import Any

from agentenv.credit import episode_return
from agentenv.envs.coding import CodingEnv
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import MissingDependency, SandboxError
from agentenv.integrations._common import decode_task, encode_task, resolve_tasks
from agentenv.prompts import Prompts

try:
    import verifiers.v1 as vf
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency.for_extra("verifiers", "verifiers",
                                      "agentenv.integrations.verifiers") from exc

__all__ = ["CodingData", "CodingTask", "CodingTaskset", "CodingTasksetConfig",
           "CodingVerifiersEnv", "CodingVerifiersEnvConfig"]

INFO_KEY = "agentenv"  # trace.info key holding the multi-turn episode


def _not_graded(exc: SandboxError) -> Exception:
    """agentenv's sandbox fault as verifiers' own sandbox error: recorded on the trace as a
    rollout failure (its rewards left unscored, ``None``), never a reward of 0."""
    return vf.SandboxError(f"agentenv's sandbox could not grade this reply: {exc}")


class CodingData(vf.TaskData):
    info: dict[str, Any]
    """``{"task": <the agentenv task as JSON>, "env": <MultiTurnCodingEnv options>}``."""


class CodingTask(vf.Task[CodingData, vf.State, vf.TaskConfig]):
    """One agentenv task; its rubric runs the hidden tests in agentenv's sandbox."""

    def agentenv_task(self) -> Any:
        return decode_task(self.data.info["task"])

    @vf.reward(weight=1.0)
    async def tests_passed(self, trace: vf.Trace) -> float:
        """agentenv's dense reward: the multi-turn episode's final score, else the last reply's."""
        episode = trace.info.get(INFO_KEY)
        if isinstance(episode, dict) and episode.get("turns"):
            return float(episode["return"])
        env = CodingEnv(tasks=[self.agentenv_task()], on_infra_error="raise",
                        timeout=float(self.data.info.get("env", {}).get("timeout", 5.0)))
        env.reset(task_index=0)
        try:
            _, reward, _, _ = await env.astep(trace.last_reply)
        except SandboxError as exc:
            raise _not_graded(exc) from exc
        return float(reward)

    @vf.metric
    async def solved(self, trace: vf.Trace) -> float:
        episode = trace.info.get(INFO_KEY)
        return float(isinstance(episode, dict) and episode.get("stop_reason") == "solved")

    @vf.metric
    async def turns(self, trace: vf.Trace) -> float:
        episode = trace.info.get(INFO_KEY)
        return float(episode["turns"]) if isinstance(episode, dict) else 1.0


class CodingTasksetConfig(vf.TasksetConfig):
    tasks: str = "builtin"
    """A task-set name (``builtin``, ``humaneval``, ``mbpp``, ...) or a JSONL/TOML path."""
    max_turns: int = 3
    feedback_from: str = "all"
    timeout: float = 5.0
    token_budget: int | None = None
    prompts_dir: str | None = None


class CodingTaskset(vf.Taskset[CodingTask, CodingTasksetConfig]):
    """agentenv's tasks, each prompted as ``MultiTurnCodingEnv`` poses it."""

    def load(self) -> list[CodingTask]:
        cfg = self.config
        prompts = Prompts(cfg.prompts_dir)
        options = {"max_turns": cfg.max_turns, "feedback_from": cfg.feedback_from,
                   "timeout": cfg.timeout, "token_budget": cfg.token_budget,
                   "prompts_dir": cfg.prompts_dir}
        out = []
        for task in resolve_tasks(cfg.tasks):
            out.append(CodingTask(CodingData(
                id=task.name, name=task.name,
                prompt=prompts.task(task, max_turns=cfg.max_turns),
                system_prompt=prompts.system(max_turns=cfg.max_turns) or None,
                info={"task": encode_task(task), "env": options},
            ), cfg.task))
        return out


class CodingVerifiersEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class CodingVerifiersEnv(vf.Env[CodingVerifiersEnvConfig]):
    """Revise on failure: every reply is graded, the feedback is the next user turn."""

    async def run(self, task: Any, agents: Any) -> None:
        options = dict(task.data.info.get("env") or {})
        env = MultiTurnCodingEnv(tasks=[decode_task(task.data.info["task"])], on_infra_error="raise",
                                 **options)
        env.reset(task_index=0)
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            while not segment.terminated:
                try:
                    obs, _, done, _ = await env.astep(segment.last_reply)
                except SandboxError as exc:
                    raise _not_graded(exc) from exc
                if done:
                    break
                segment = await interaction.turn(str(obs["feedback"]))
        trajectory = env.trajectory
        assert trajectory is not None
        interaction.trace.info[INFO_KEY] = {
            "task_name": trajectory.task_name,
            "turns": len(trajectory.turns),
            "return": episode_return(trajectory, "final_only"),  # the final turn's score
            "step_rewards": [t.reward for t in trajectory.turns],
            "outcomes": [t.outcome for t in trajectory.turns],
            "stop_reason": trajectory.stop_reason,
        }
