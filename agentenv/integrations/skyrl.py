"""SkyRL integration: ``MultiTurnCodingEnv`` as a SkyRL-gym ``BaseTextEnv``, registered as
``agentenv_coding``, and the dataset rows SkyRL trains on.

SkyRL's conventions (skyrl-gym 0.4): a dataset row is ``{"data_source", "prompt" (chat
messages), "env_class", "reward_spec": {"method", "ground_truth"}, "extra_info"}``; the
trainer's generator makes one environment per rollout with ``skyrl_gym.make(env_class,
env_config=<the environment config section>, extras=<the row>)``, calls ``init(prompt)``, then
``step(model_output)`` until ``done``, appending each step's ``observations`` (chat messages) to
the conversation; per-step rewards are the rollout's rewards, ``get_metrics()`` is logged.

- :class:`CodingTextEnv` runs one ``MultiTurnCodingEnv`` episode on the row's task (stored by
  :func:`to_skyrl_records`): each step grades the model's output in the sandbox; the rendered
  feedback comes back as a user message while the episode goes on. Options come from
  ``env_config`` (``max_turns``, ``token_budget``, ``feedback_from``, ``prompts_dir``,
  ``timeout``, ``isolation``), a row's ``extras["max_turns"]`` overriding ``max_turns``.
- A step the sandbox could not grade (a ``SandboxError``, an infrastructure fault) is no turn:
  the env takes it back, the model is told so and may submit again, and the step's metadata
  carries ``infra_error`` (SkyRL has no masked reward: the step pays 0, the episode goes on).
- Importing this module registers ``ENV_ID`` with ``skyrl_gym.register``.

Needs the ``skyrl`` extra.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentenv.credit import episode_return
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import ConfigError, MissingDependency, SandboxError
from agentenv.integrations._common import decode_task
from agentenv.integrations.trl_env import NOT_GRADED
from agentenv.integrations.verl import to_verl_records
from agentenv.tasks.schema import Task

try:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency.for_extra("skyrl_gym", "skyrl", "agentenv.integrations.skyrl") from exc

__all__ = ["ENV_ID", "CodingTextEnv", "to_skyrl_records"]

ENV_ID = "agentenv_coding"
ENV_OPTIONS = ("max_turns", "token_budget", "tokenizer", "feedback_from", "prompts_dir", "timeout",
               "isolation")


def to_skyrl_records(tasks: Iterable[Task] | str, *, max_turns: int = 3,
                     prompts_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """One SkyRL row per task: the prompt for ``max_turns`` submissions, ``env_class``, the task."""
    rows = []
    for row in to_verl_records(tasks, max_turns=max_turns, prompts_dir=prompts_dir):
        extra = {k: v for k, v in row["extra_info"].items() if k != "tools_kwargs"}
        rows.append({
            "data_source": row["data_source"],
            "prompt": row["prompt"],
            "env_class": ENV_ID,
            "reward_spec": {"method": "rule", "ground_truth": row["reward_model"]["ground_truth"]},
            "extra_info": extra,
            "max_turns": max_turns,
        })
    return rows


def _options(env_config: Any, extras: Mapping[str, Any]) -> dict[str, Any]:
    config: Mapping[str, Any] = {}
    if env_config is not None:
        getter = getattr(env_config, "items", None)
        config = dict(getter()) if callable(getter) else {}
    options = {k: config[k] for k in ENV_OPTIONS if config.get(k) is not None}
    if extras.get("max_turns") is not None:
        options["max_turns"] = int(extras["max_turns"])
    return options


class CodingTextEnv(BaseTextEnv):
    """SkyRL-gym text env: one ``MultiTurnCodingEnv`` episode; ``env`` is the wrapped env."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        extras = extras or {}
        info = extras.get("extra_info") or {}
        encoded = info.get("task") if isinstance(info, Mapping) else None
        if encoded is None:
            raise ConfigError(f"{ENV_ID} needs the task in extras['extra_info']['task']: build the "
                              "dataset with agentenv.integrations.skyrl.to_skyrl_records(tasks)")
        self.env = MultiTurnCodingEnv(tasks=[decode_task(encoded)], on_infra_error="raise",
                                      **_options(env_config, extras))
        self.max_turns = self.env.max_turns

    def init(self, prompt: Any) -> tuple[Any, dict[str, Any]]:
        obs = self.env.reset(task_index=0)
        return prompt, {"task_name": obs["task_name"], "max_turns": self.max_turns}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        try:
            obs, reward, done, info = self.env.step(action if isinstance(action, str) else "")
        except SandboxError as exc:  # the env took the turn back: not the model's failure
            return BaseTextEnvStepOutput(
                observations=[{"role": "user", "content": NOT_GRADED}], reward=0.0, done=False,
                metadata={"infra_error": f"{type(exc).__name__}: {exc}"[:300]},
                postprocessed_action=None)
        self.turns = info["turn"]
        observations = [] if done else [{"role": "user", "content": str(obs["feedback"])}]
        metadata = {k: info[k] for k in ("outcome", "passed", "total", "stop_reason", "terminated",
                                         "truncated")}
        return BaseTextEnvStepOutput(observations=observations, reward=float(reward), done=done,
                                     metadata=metadata, postprocessed_action=None)

    def get_metrics(self) -> dict[str, Any]:
        trajectory = self.env.trajectory
        turns = trajectory.turns if trajectory is not None else []
        return {
            "turns": len(turns),
            "solved": float(trajectory is not None and trajectory.stop_reason == "solved"),
            "final_reward": episode_return(trajectory, "final_only") if trajectory else 0.0,
        }


if ENV_ID not in skyrl_gym.envs.registration.registry:
    skyrl_gym.register(id=ENV_ID, entry_point="agentenv.integrations.skyrl:CodingTextEnv")
