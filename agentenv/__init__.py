"""agentenv: reinforcement-learning environments for LLM coding agents.

The public API, imported lazily so that ``import agentenv`` stays cheap:

- ``NumberGuessEnv``: the teaching toy (reset/step on a number-guessing game);
- ``CodingEnv``: single-step coding environment (a contextual bandit);
- ``MultiTurnCodingEnv``: revise-on-failure conversation with feedback and credit records;
- ``run_tests`` / ``RunResult``: candidate code run in the sandbox and graded;
- ``extract_code``: the policy's raw text -> source code;
- ``TASKS``: the builtin task set; ``load_tasks`` loads others;
- ``mock_policy`` / ``openai_policy``: policies from the walk-through.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentenv._version import __version__

_EXPORTS: dict[str, str] = {
    "AgentEnvError": "agentenv.errors",
    "CodingEnv": "agentenv.envs.coding",
    "MultiTurnCodingEnv": "agentenv.envs.multiturn",
    "NumberGuessEnv": "agentenv.toy",
    "RunResult": "agentenv.grading",
    "Task": "agentenv.tasks",
    "Trajectory": "agentenv.records",
    "TurnRecord": "agentenv.records",
    "extract_code": "agentenv.extract",
    "load_tasks": "agentenv.tasks",
    "mock_policy": "agentenv.policies",
    "openai_policy": "agentenv.policies",
    "run_tests": "agentenv.grading",
}

__all__ = [
    "TASKS",
    "AgentEnvError",
    "CodingEnv",
    "MultiTurnCodingEnv",
    "NumberGuessEnv",
    "RunResult",
    "Task",
    "Trajectory",
    "TurnRecord",
    "__version__",
    "extract_code",
    "load_tasks",
    "mock_policy",
    "openai_policy",
    "run_tests",
]

if TYPE_CHECKING:  # pragma: no cover
    from agentenv.envs.coding import CodingEnv
    from agentenv.envs.multiturn import MultiTurnCodingEnv
    from agentenv.errors import AgentEnvError
    from agentenv.extract import extract_code
    from agentenv.grading import RunResult, run_tests
    from agentenv.policies import mock_policy, openai_policy
    from agentenv.records import Trajectory, TurnRecord
    from agentenv.tasks import Task, load_tasks
    from agentenv.toy import NumberGuessEnv

    TASKS: list[Task]


def __getattr__(name: str) -> Any:
    if name == "TASKS":
        from agentenv.tasks.builtin import builtin_tasks

        return builtin_tasks()
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentenv' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
