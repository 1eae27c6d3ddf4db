"""Policies: the mock, scripted and reference policies, the registry, and calling any policy async."""

from __future__ import annotations

import asyncio
import pickle
import threading
from typing import Any

import pytest

from agentenv import CodingEnv, MultiTurnCodingEnv
from agentenv.errors import PolicyError
from agentenv.extract import extract_code
from agentenv.policies import (
    POLICY_NAMES,
    AsyncPolicy,
    OpenAIPolicy,
    Policy,
    ReferencePolicy,
    ScriptedPolicy,
    acall_policy,
    make_policy,
    mock_policy,
    policy_model,
    policy_name,
    turn_of,
)
from agentenv.tasks import Task
from agentenv.tasks.builtin import builtin_tasks

ADD = Task(
    name="add",
    prompt="Write a Python function `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0"),
    reference_solution="def add(a, b):\n    return a + b\n",
    metadata={"attempts": ["def add(a, b):\n    return a - b\n",
                           "def add(a, b):\n    return abs(a) + abs(b)\n"]},
)
NO_REFERENCE = Task(name="mystery", prompt="Write `f()`.", entry_point="f", checks=("assert f() == 1",))


def obs_for(task: Task, **extra: Any) -> dict[str, Any]:
    return {"prompt": task.prompt, "entry_point": task.entry_point, "task_name": task.name, **extra}


def test_mock_policy_solves_add_and_fails_every_other_builtin_task() -> None:
    """The walk-through's mock earns 1.0 on add and 0.0 on the next tasks of the builtin set."""
    tasks = builtin_tasks()[:4]
    env = CodingEnv(tasks=tasks)
    rewards = {}
    for i, task in enumerate(tasks):
        obs = env.reset(task_index=i)
        _, reward, done, _ = env.step(mock_policy(obs))
        assert done
        rewards[task.name] = reward
    assert rewards["add"] == 1.0
    assert all(r == 0.0 for name, r in rewards.items() if name != "add")


def test_mock_policy_answers_other_tasks_with_a_stub_that_defines_the_entry_point() -> None:
    """The failing answer still has code for the entry point, so it fails on the checks, not the format."""
    code = extract_code(mock_policy({"entry_point": "parse_roman"}), "parse_roman")
    assert "def parse_roman" in code and "NotImplementedError" in code


def test_turn_is_read_from_the_conversation_then_the_turn_key_then_defaults_to_one() -> None:
    """turn_of counts assistant messages, falls back to obs['turn'], and single-step obs are turn 1."""
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
               {"role": "assistant", "content": "a1"}, {"role": "user", "content": "f1"},
               {"role": "assistant", "content": "a2"}, {"role": "user", "content": "f2"}]
    assert turn_of({"messages": history}) == 3
    assert turn_of({"messages": history, "turn": 99}) == 3
    assert turn_of({"turn": 2}) == 2
    assert turn_of({"prompt": "p"}) == 1


def test_scripted_policy_replays_attempts_in_order_then_the_reference() -> None:
    """Turn 1 and 2 get the buggy attempts, every later turn the reference solution."""
    policy = ScriptedPolicy([ADD])
    codes = [extract_code(policy(obs_for(ADD, turn=t)), "add") for t in (1, 2, 3, 4)]
    assert codes[0].strip() == ADD.metadata["attempts"][0].strip()
    assert codes[1].strip() == ADD.metadata["attempts"][1].strip()
    assert codes[2].strip() == codes[3].strip() == ADD.reference_solution.strip()  # type: ignore[union-attr]


def test_scripts_passed_in_replace_a_tasks_own_attempts() -> None:
    """A per-task script overrides metadata['attempts'] for that task."""
    policy = ScriptedPolicy([ADD], scripts={"add": ["def add(a, b):\n    return 0\n"]})
    assert "return 0" in policy(obs_for(ADD, turn=1))
    assert "return a + b" in policy(obs_for(ADD, turn=2))
    assert policy.script_length("add") == 1


def test_scripted_policy_revises_through_a_multi_turn_episode() -> None:
    """On MultiTurnCodingEnv the script fails twice, reads feedback, then solves on turn 3."""
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=3, seed=0)
    policy = ScriptedPolicy([ADD])
    obs = env.reset(task_index=0)
    rewards, done = [], False
    while not done:
        obs, reward, done, info = env.step(policy(obs))
        rewards.append(reward)
    assert rewards[0] < 1.0 and sum(rewards) == pytest.approx(1.0)  # deltas sum to the final score
    assert len(rewards) == 3 and info["stop_reason"] == "solved"


def test_scripted_policy_without_attempts_or_reference_answers_without_code() -> None:
    """A task with nothing left to replay gets an answer with no code (it scores 0, no crash)."""
    policy = ScriptedPolicy([NO_REFERENCE])
    assert extract_code(policy(obs_for(NO_REFERENCE)), "f") == ""


def test_scripted_policy_rejects_a_task_it_was_not_given() -> None:
    """Asking about an unknown task is a configuration error that says to pass tasks=."""
    with pytest.raises(PolicyError, match="tasks="):
        ScriptedPolicy([ADD])({"task_name": "nope", "entry_point": "f", "prompt": "p"})


def test_scripted_policy_rejects_a_script_that_is_not_a_list_of_strings() -> None:
    """A script given as one string (a common slip) is refused at construction."""
    with pytest.raises(PolicyError, match="list of code strings"):
        ScriptedPolicy([ADD], scripts={"add": "def add(a, b): return 0"})  # type: ignore[dict-item]


def test_reference_policy_answers_with_the_reference_and_refuses_tasks_without_one() -> None:
    """ReferencePolicy fences the reference; a task without one raises a PolicyError naming it."""
    policy = ReferencePolicy([ADD, NO_REFERENCE])
    assert extract_code(policy(obs_for(ADD)), "add").strip() == ADD.reference_solution.strip()  # type: ignore[union-attr]
    with pytest.raises(PolicyError, match="mystery"):
        policy(obs_for(NO_REFERENCE))


def test_offline_policies_are_picklable_for_ray_workers() -> None:
    """Scripted and reference policies survive pickling with the same answers."""
    for policy in (ScriptedPolicy([ADD]), ReferencePolicy([ADD])):
        clone = pickle.loads(pickle.dumps(policy))
        assert clone(obs_for(ADD, turn=2)) == policy(obs_for(ADD, turn=2))


def test_make_policy_builds_every_named_policy() -> None:
    """Each registry name gives the matching policy; openai gets its model and base URL."""
    assert make_policy("mock") is mock_policy
    assert isinstance(make_policy("scripted", tasks=[ADD]), ScriptedPolicy)
    assert isinstance(make_policy("reference", tasks=[ADD]), ReferencePolicy)
    openai = make_policy("openai", model="m", base_url="http://127.0.0.1:9/v1")
    assert isinstance(openai, OpenAIPolicy) and openai.model == "m"
    assert set(POLICY_NAMES) == {"mock", "reference", "scripted", "reader", "openai"}


def test_make_policy_suggests_a_close_name_for_a_typo() -> None:
    """An unknown name lists the known ones and suggests the closest."""
    with pytest.raises(PolicyError, match="Did you mean 'scripted'"):
        make_policy("scriptd")


def test_make_policy_refuses_options_a_policy_does_not_take() -> None:
    """Passing an option the policy ignores is an error, not silently dropped."""
    with pytest.raises(PolicyError, match="model"):
        make_policy("mock", model="gpt-4o")


def test_make_policy_imports_a_custom_policy_by_module_path() -> None:
    """'module:name' imports a callable as is, and instantiates a class with the run's tasks."""
    assert make_policy("agentenv.policies.mock:mock_policy") is mock_policy
    policy = make_policy("agentenv.policies.scripted:ScriptedPolicy", tasks=[ADD])
    assert isinstance(policy, ScriptedPolicy) and "add" in policy.tasks
    with pytest.raises(PolicyError, match="cannot import"):
        make_policy("agentenv.policies:does_not_exist")


def test_policy_protocols_recognise_sync_and_async_policies() -> None:
    """A function is a Policy; OpenAIPolicy is also an AsyncPolicy; a plain function is not."""
    assert isinstance(mock_policy, Policy)
    assert isinstance(OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1"), AsyncPolicy)
    assert not isinstance(mock_policy, AsyncPolicy)


def test_policies_report_their_name_and_model() -> None:
    """Names come from the name attribute or the function name; only model-backed ones have a model."""
    assert policy_name(mock_policy) == "mock_policy"
    assert policy_name(ScriptedPolicy([ADD])) == "scripted"
    assert policy_model(ScriptedPolicy([ADD])) is None
    assert policy_model(OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1")) == "m"


def test_acall_policy_awaits_async_policies_and_runs_blocking_ones_off_the_loop() -> None:
    """Async callables are awaited; blocking sync policies run in a worker thread, cheap ones inline."""
    loop_thread: list[int] = []

    async def async_policy(obs: Any) -> str:
        return "async"

    def blocking_policy(obs: Any) -> str:
        loop_thread.append(threading.get_ident())
        return "blocking"

    class Inline:
        blocking = False

        def __call__(self, obs: Any) -> str:
            loop_thread.append(threading.get_ident())
            return "inline"

    async def main() -> tuple[str, str, str, int]:
        return (await acall_policy(async_policy, {}), await acall_policy(blocking_policy, {}),
                await acall_policy(Inline(), {}), threading.get_ident())

    a, b, c, main_thread = asyncio.run(main())
    assert (a, b, c) == ("async", "blocking", "inline")
    assert loop_thread[0] != main_thread and loop_thread[1] == main_thread
