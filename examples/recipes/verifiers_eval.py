"""verifiers: agentenv's tasks as the ``agentenv_coding`` taskset and multi-turn env.

    python examples/recipes/verifiers_eval.py

verifiers (0.4, ``verifiers.v1``) resolves ``--env.taskset.id agentenv_coding`` to
``CodingTaskset`` (rubric: ``tests_passed``, the sandbox's dense reward) and its env
``CodingVerifiersEnv`` (feedback on failure, up to ``max_turns``), e.g. with verifiers' CLI::

    vf eval agentenv_coding --env.taskset.max-turns 3 --model ...

This script builds the env as verifiers does (``load_environment``), lists a few tasks and
scores a reference solution with the task's rubric. Needs ``pip install "agentenv[verifiers]"``.
"""

from __future__ import annotations

import asyncio

from verifiers.v1.trace import AgentInfo, Trace, TraceTask
from verifiers.v1.utils.loaders import load_environment

from agentenv.integrations.verifiers import CodingTasksetConfig, CodingVerifiersEnvConfig


def main() -> None:
    import verifiers.v1 as vf

    env = load_environment(CodingVerifiersEnvConfig(
        taskset=CodingTasksetConfig(id="agentenv_coding", max_turns=3)))
    tasks = list(env.taskset.take(3))
    print(type(env).__name__, "over", [t.data.name for t in tasks])
    task = tasks[0]
    reference = task.agentenv_task().reference_solution
    trace = Trace(task=TraceTask(type=type(task).__name__, data=task.data),
                  agent=AgentInfo(config=vf.AgentConfig()),
                  root_reply=f"```python\n{reference}\n```")
    asyncio.run(task.score(trace))
    print(f"{task.data.name}: tests_passed {trace.rewards['tests_passed'].score:.2f}")


if __name__ == "__main__":
    main()
