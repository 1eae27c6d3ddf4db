"""verl multi-turn: agentenv's ``submit`` tool for verl's tool agent loop (a verl ``BaseTool``).

verl's ``ToolAgentLoop`` (``agent_name: tool_agent``) parses the model's tool calls and, for
each, calls ``create(create_kwargs=row's tools_kwargs["submit"]["create_kwargs"])``,
``execute(instance_id, parameters, agent_data=...)`` and ``release(instance_id)``: an instance
lives for one call. The episode therefore lives with the rollout: :class:`SubmitTool` keeps one
``MultiTurnCodingEnv`` per ``agent_data.request_id``, started on the task the row's
``create_kwargs`` carry (see :func:`agentenv.integrations.verl.to_verl_records`). Each call is
one turn: graded in the sandbox, the rendered feedback returned as the tool response, the
turn's reward as the step reward. The episode's return and whether it was solved go to
``agent_data.extra_fields`` (``agentenv_return``, ``agentenv_solved``), which verl merges into
the ``extra_info`` that :func:`agentenv.integrations.verl.compute_score` reads.

Register it in verl's tool config (``actor_rollout_ref.rollout.multi_turn.tool_config_path``)::

    tools:
      - class_name: agentenv.integrations.verl_tool.SubmitTool
        config: {type: native, max_turns: 3, feedback_from: all, timeout: 5.0}

Every key of ``config`` other than ``type`` goes to ``MultiTurnCodingEnv`` (``max_turns``,
``token_budget``, ``feedback_from``, ``prompts_dir``, ``timeout``, ``isolation``) except
``credit`` and ``gamma``, the scheme the return is computed under. Needs the ``verl`` extra.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any
from uuid import uuid4

from agentenv.credit import SCHEMES, episode_return
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import ConfigError, MissingDependency, SandboxError
from agentenv.integrations._common import decode_task
from agentenv.integrations.trl_env import NOT_GRADED, CodingToolEnv
from agentenv.integrations.verl import INFRA_KEY, RETURN_KEY

try:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency.for_extra("verl", "verl", "agentenv.integrations.verl_tool") from exc

__all__ = ["SubmitTool", "tool_schema_dict"]


def tool_schema_dict() -> dict[str, Any]:
    """The ``submit`` tool as the model sees it: built, as TRL builds it, from the signature and
    docstring of :meth:`agentenv.integrations.trl_env.CodingToolEnv.submit` (one description)."""
    from transformers.utils import get_json_schema

    schema: dict[str, Any] = get_json_schema(CodingToolEnv.submit)
    return schema

MAX_LIVE_EPISODES = 4096  # rollouts that never finished are forgotten beyond this many


class SubmitTool(BaseTool):
    """verl tool: one ``MultiTurnCodingEnv`` turn per call, the episode kept per rollout."""

    def __init__(self, config: dict[str, Any], tool_schema: Any = None) -> None:
        options = {k: v for k, v in dict(config or {}).items() if k != "type"}
        self.credit = options.pop("credit", "final_only")
        self.gamma = float(options.pop("gamma", 1.0))
        if self.credit not in SCHEMES:
            raise ConfigError(f"unknown credit scheme {self.credit!r}; use one of {', '.join(SCHEMES)}")
        self.env_options = options
        schema = tool_schema or OpenAIFunctionToolSchema.model_validate(tool_schema_dict())
        super().__init__(config, schema)
        self._instances: dict[str, dict[str, Any]] = {}
        self._episodes: OrderedDict[str, MultiTurnCodingEnv] = OrderedDict()

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        instance_id = instance_id or str(uuid4())
        self._instances[instance_id] = dict(kwargs.get("create_kwargs") or {})
        return instance_id, ToolResponse()

    def _episode(self, key: str, create_kwargs: dict[str, Any]) -> MultiTurnCodingEnv:
        env = self._episodes.get(key)
        if env is None:
            if "task" not in create_kwargs:
                raise ConfigError("the submit tool got no task: build the dataset with "
                                  "agentenv.integrations.verl.to_verl_parquet(tasks, ..., multi_turn=True)")
            env = MultiTurnCodingEnv(tasks=[decode_task(create_kwargs["task"])], on_infra_error="raise",
                                      **self.env_options)
            env.reset(task_index=0)
            self._episodes[key] = env
            while len(self._episodes) > MAX_LIVE_EPISODES:
                self._episodes.popitem(last=False)
        return env

    async def execute(self, instance_id: str, parameters: dict[str, Any],
                      **kwargs: Any) -> tuple[Any, float, dict[str, Any]]:
        agent_data = kwargs.get("agent_data")
        key = str(getattr(agent_data, "request_id", None) or instance_id)
        env = self._episode(key, self._instances.get(instance_id, {}))
        trajectory = env.trajectory
        assert trajectory is not None
        if trajectory.stop_reason is not None:
            return ToolResponse(text=f"The episode is over ({trajectory.stop_reason}): this "
                                     "submission was not graded."), 0.0, {}
        code = parameters.get("code") if isinstance(parameters, dict) else None
        try:
            obs, reward, done, info = await env.astep(code if isinstance(code, str) else "")
        except SandboxError:  # the env took the turn back: not the model's failure
            if agent_data is not None and isinstance(getattr(agent_data, "extra_fields", None), dict):
                agent_data.extra_fields[INFRA_KEY] = True
            return ToolResponse(text=NOT_GRADED), 0.0, {}
        if agent_data is not None and isinstance(getattr(agent_data, "extra_fields", None), dict):
            agent_data.extra_fields[RETURN_KEY] = episode_return(trajectory, self.credit, self.gamma)
            agent_data.extra_fields["agentenv_solved"] = trajectory.stop_reason == "solved"
            agent_data.extra_fields["agentenv_turns"] = len(trajectory.turns)
        if done:
            self._episodes.pop(key, None)
        metrics = {"passed": info["passed"], "total": info["total"]}
        return ToolResponse(text=str(obs["feedback"])), float(reward), metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)
