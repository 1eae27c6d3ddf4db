"""Completions nested past any parser's depth (``<tool_call>`` text, tool arguments) are one
row's result, never an exception that costs the batch: TRL's rewards, verl's compute_score,
the multi-turn env and TRL's tool env."""

from __future__ import annotations

import asyncio
from typing import Any

from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.integrations._common import completion_text, tool_call_code
from agentenv.integrations.trl import acode_reward, code_reward, to_records
from agentenv.integrations.verl import DATA_SOURCE, compute_score_batch, to_verl_records
from agentenv.tasks.schema import Task

ADD = Task(
    name="add", prompt="Write `add(a, b)` returning the sum.", entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0"),
)
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
DEPTH = 1000

# The forms a 1 KB completion nests past json's recursion limit in.
DEEP_TEXT_CALL = "<tool_call>" + "[" * DEPTH + "]" * DEPTH + "</tool_call>"
DEEP_TEXT_ARGS = ('<tool_call>{"name": "submit", "arguments": ' + '{"a": ' * DEPTH + "1"
                  + "}" * DEPTH + "}</tool_call>")
DEEP_WIRE_ARGS = [{"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "submit",
                                      "arguments": '{"a": ' * DEPTH + "1" + "}" * DEPTH}}]}]
DEEP = [DEEP_TEXT_CALL, DEEP_TEXT_ARGS, DEEP_WIRE_ARGS]


def _trl_columns(n: int) -> dict[str, Any]:
    row = to_records([ADD])[0]
    return {k: [row[k]] * n for k in row if k != "prompt"}


def test_completion_text_reads_deep_nesting_as_no_tool_call() -> None:
    assert completion_text(DEEP_TEXT_CALL) == DEEP_TEXT_CALL
    assert completion_text(DEEP_TEXT_ARGS) == DEEP_TEXT_ARGS
    assert completion_text(DEEP_WIRE_ARGS) == ""
    assert tool_call_code(DEEP_WIRE_ARGS[0]) == []


def test_code_reward_scores_deep_rows_0_and_keeps_the_others() -> None:
    completions: list[Any] = [RIGHT, *DEEP, RIGHT]
    rewards = code_reward(completions=completions, **_trl_columns(len(completions)))
    assert rewards[0] == rewards[-1] == 1.0
    assert rewards[1:-1] == [0.0, 0.0, 0.0]


def test_acode_reward_scores_deep_rows_0_and_keeps_the_others() -> None:
    completions: list[Any] = [*DEEP, RIGHT]
    rewards = asyncio.run(acode_reward(completions=completions, **_trl_columns(len(completions))))
    assert rewards == [0.0, 0.0, 0.0, 1.0]


def test_verl_compute_score_batch_scores_deep_rows_0() -> None:
    row = to_verl_records([ADD])[0]
    solutions = [DEEP_TEXT_CALL, DEEP_TEXT_ARGS, RIGHT]
    out = compute_score_batch([DATA_SOURCE] * 3, solutions, [row["reward_model"]["ground_truth"]] * 3,
                              [row["extra_info"]] * 3)
    assert [o["score"] for o in out] == [0.0, 0.0, 1.0]


def test_the_env_grades_deep_text_as_a_turn() -> None:
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=2)
    env.reset(task_index=0)
    _, reward, done, info = env.step(DEEP_TEXT_ARGS)
    assert reward == 0.0 and not done and info["turn"] == 1
    _, reward, done, _ = env.step(RIGHT)
    assert reward == 1.0 and done


def test_the_tool_envs_prefetch_ignores_deep_arguments() -> None:
    from agentenv.integrations.trl_env import environment_factory

    env = environment_factory([ADD], max_turns=2)()
    env.reset(**{k: v for k, v in to_records([ADD])[0].items() if k != "prompt"})
    env._prefetch_calls(DEEP_WIRE_ARGS[0])  # the mixin calls it on every assistant message
    env.submit(RIGHT)
    assert env.get_reward() == 1.0


class _Hostile(list):  # type: ignore[type-arg]
    """A completion whose reading raises whatever reads it (not a parser's limit)."""

    def __reversed__(self) -> Any:
        raise TypeError("unreadable")


def test_any_unreadable_completion_is_a_row_without_code() -> None:
    completions: list[Any] = [_Hostile([{"role": "assistant", "content": RIGHT}]), RIGHT]
    assert code_reward(completions=completions, **_trl_columns(2)) == [0.0, 1.0]
