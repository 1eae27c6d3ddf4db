"""verifiers: agentenv's tasks as the ``agentenv_coding`` taskset and multi-turn env.

    python examples/recipes/verifiers_eval.py

verifiers (0.4, ``verifiers.v1``) resolves ``--env.taskset.id agentenv_coding`` to
``CodingTaskset`` (rubric: ``tests_passed``, the sandbox's dense reward) and its env
``CodingVerifiersEnv`` (feedback on failure, up to ``max_turns``), e.g. with verifiers' CLI::

    vf eval agentenv_coding --env.taskset.max-turns 3 --model ...

This script builds the env as verifiers does (``load_environment``), lists a few tasks and
scores a reference solution with the task's rubric. Needs ``pip install -e ".[verifiers]"`` in a clone (published: ``pip install "agentenv-coding[verifiers]"``).
The part of ``main`` between the ``README`` markers is the README's snippet (tests/test_recipes.py
checks it).
"""

from __future__ import annotations


def main() -> None:
    # README >>>
    import asyncio

    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import load_environment

    from agentenv.integrations.verifiers import CodingTasksetConfig, CodingVerifiersEnvConfig
    from agentenv.policies.scripted import fence

    env = load_environment(CodingVerifiersEnvConfig(    # as `vf eval agentenv_coding` builds it
        taskset=CodingTasksetConfig(id="agentenv_coding", max_turns=3)))
    tasks = list(env.taskset.take(3))
    print(type(env).__name__, "over", [t.data.name for t in tasks])
    task = tasks[0]
    reference = task.agentenv_task().reference_solution
    trace = vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data),
                     agent=vf.AgentInfo(config=vf.AgentConfig()),
                     root_reply=fence(reference))      # a reply holding the reference
    asyncio.run(task.score(trace))                      # the rubric: hidden tests in the sandbox
    print(f"{task.data.name}: tests_passed {trace.rewards['tests_passed'].score:.2f}")
    # <<< README


if __name__ == "__main__":
    main()
