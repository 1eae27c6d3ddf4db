"""The TRL integration: rows TRL trains on, and a reward function called the way GRPOTrainer calls it."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentenv.grading
from agentenv.errors import ConfigError, MissingDependency
from agentenv.integrations.trl import (
    ROW_COLUMNS,
    acode_reward,
    code_reward,
    completion_text,
    decode_checks,
    make_code_reward,
    to_hf_dataset,
    to_records,
)
from agentenv.tasks.schema import StdioCase, Task

ADD = Task(
    name="add", prompt="Write `add(a, b)` returning the sum.", entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0",
            "assert add(10, 5) == 15"),
    difficulty="easy", tags=("arithmetic",),
)
SCALE = Task(
    name="scale", prompt="Write `scale(x)` returning x times factor().", entry_point="scale",
    checks=("assert scale(2) == 6", "assert scale(factor()) == 9"),
    setup_code="def factor():\n    return 3\n",  # a setup helper the candidate calls
)
# 0.1 * 3 is 0.30000000000000004: only a float tolerance lets these pass.
THIRDS = Task(
    name="thirds", prompt="Write `thirds(x)` returning 3 * x.", entry_point="thirds",
    checks=("assert thirds(2) == 6", "assert thirds(0.1) == 0.3", "assert thirds(0.7) == 2.1"),
    float_tolerance=1e-9,
)
ECHO = Task(
    name="shout", prompt="Read a line from stdin and print it upper-cased.", entry_point="main",
    checks=(StdioCase(stdin="hi\n", expected_stdout="HI\n"),
            StdioCase(stdin="ok go\n", expected_stdout="OK GO\n")),
    difficulty="medium",
)
TASKS = [ADD, SCALE, ECHO]

GOOD = {
    "add": "```python\ndef add(a, b):\n    return a + b\n```",
    "scale": "```python\ndef scale(x):\n    return x * factor()\n```",
    "shout": "```python\nprint(input().upper())\n```",
}
WRONG_ADD = "```python\ndef add(a, b):\n    return a - b\n```"  # passes only add(0, 0) == 0


def trl_call(fn: Any, rows: list[dict[str, Any]], completions: list[Any], **extra: Any) -> Any:
    """Call ``fn`` exactly as GRPOTrainer does: keyword lists, every column but prompt, plus TRL's extras."""
    keys = [k for k in rows[0] if k not in ("prompt", "completion", "completion_ids")]
    reward_kwargs = {k: [row[k] for row in rows] for k in keys}
    return fn(prompts=[row["prompt"] for row in rows], completions=completions,
              completion_ids=[[1, 2, 3] for _ in completions], **reward_kwargs, **extra)


def test_records_carry_a_conversational_prompt_and_every_column_the_reward_needs() -> None:
    """Each row has a message-list prompt ending in the task's user message, plus ROW_COLUMNS."""
    rows = to_records(TASKS)
    assert len(rows) == 3
    for row, task in zip(rows, TASKS, strict=True):
        assert set(row) == {"prompt", *ROW_COLUMNS}
        assert isinstance(row["prompt"], list) and row["prompt"][-1]["role"] == "user"
        assert task.prompt.strip() in row["prompt"][-1]["content"]
        assert all(set(m) == {"role", "content"} for m in row["prompt"])
        assert row["entry_point"] == task.entry_point
        assert decode_checks(row["checks"]) == task.checks
        assert row["setup_code"] == task.setup_code
    assert rows[1]["setup_code"] == "def factor():\n    return 3\n" and rows[1]["float_tolerance"] is None
    assert to_records([THIRDS])[0]["float_tolerance"] == 1e-9
    assert rows[2]["difficulty"] == "medium"


def test_record_prompts_are_the_messages_coding_env_shows_its_policy() -> None:
    """Training through TRL and rolling out CodingEnv condition the policy on the same chat."""
    from agentenv.envs.coding import CodingEnv

    env = CodingEnv(tasks=TASKS)
    for index, row in enumerate(to_records(TASKS)):
        assert row["prompt"] == env.reset(task_index=index)["messages"]


def test_records_never_show_hidden_checks_in_the_prompt() -> None:
    """The prompt column holds the task text only; hidden asserts stay in the checks column."""
    for row in to_records(TASKS):
        text = json.dumps(row["prompt"])
        assert "assert add(10, 5)" not in text and "ok go" not in text.lower()


def test_standard_records_put_the_same_text_in_one_string() -> None:
    """With conversational=False the prompt is one string (TRL's standard format) with the same text."""
    text = to_records([ADD], conversational=False)[0]["prompt"]
    messages = to_records([ADD])[0]["prompt"]
    assert isinstance(text, str)
    assert all(m["content"] in text for m in messages)


def test_system_prompt_can_be_replaced_or_dropped() -> None:
    """system_prompt replaces the system message; an empty string leaves only the user turn."""
    custom = to_records([ADD], system_prompt="Answer in Python.")[0]["prompt"]
    assert custom[0] == {"role": "system", "content": "Answer in Python."}
    bare = to_records([ADD], system_prompt="")[0]["prompt"]
    assert [m["role"] for m in bare] == ["user"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(
    st.builds(lambda text: f"assert f({text!r})", st.text(min_size=1)),  # a check compiles
    st.builds(StdioCase, stdin=st.text(), expected_stdout=st.text()),
), min_size=1, max_size=6))
def test_checks_round_trip_through_the_json_column(checks: list[Any]) -> None:
    """Any mix of assert strings and stdio cases survives to_records -> decode_checks."""
    task = Task(name="t", prompt="p", entry_point="f", checks=checks)
    assert decode_checks(to_records([task])[0]["checks"]) == tuple(checks)


def test_decode_checks_accepts_lists_and_plain_python() -> None:
    """A list column and a plain block of asserts both decode; an empty value means no checks."""
    assert decode_checks(["assert f() == 1", {"stdin": "a", "expected_stdout": "b"}]) == (
        "assert f() == 1", StdioCase("a", "b"))
    assert decode_checks("assert f() == 1\nassert f() != 2") == ("assert f() == 1\nassert f() != 2",)
    assert decode_checks("[x for x in range(3)] == [0, 1, 2]") == ("[x for x in range(3)] == [0, 1, 2]",)
    assert decode_checks(None) is None and decode_checks("") is None and decode_checks("[]") is None


def test_completion_text_reads_standard_and_conversational_completions() -> None:
    """A string is itself; a conversation gives its last assistant message with text."""
    assert completion_text("def f(): pass") == "def f(): pass"
    conversation = [
        {"role": "assistant", "content": "first"},
        {"role": "tool", "content": "tool output"},
        {"role": "assistant", "content": "final"},
        {"role": "assistant", "content": None},
    ]
    assert completion_text(conversation) == "final"
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert completion_text(parts) == "ab"
    assert completion_text([{"role": "user", "content": "not mine"}]) == ""
    assert completion_text(None) == ""


def test_code_reward_scores_standard_completions_the_way_trl_calls_it() -> None:
    """Right code earns 1.0, partly right earns its fraction, prose earns 0.0."""
    rows = to_records(TASKS, conversational=False)
    completions = [GOOD["add"], GOOD["scale"], GOOD["shout"]]
    assert trl_call(code_reward, rows, completions) == [1.0, 1.0, 1.0]
    wrong = trl_call(code_reward, rows, [WRONG_ADD, "I am not sure.", "print(input())"])
    assert wrong == [0.25, 0.0, 0.0]


def test_code_reward_scores_conversational_completions() -> None:
    """Conversational completions are scored on the last assistant message's content."""
    rows = to_records(TASKS)
    completions = [[{"role": "assistant", "content": GOOD[t.name]}] for t in TASKS]
    assert trl_call(code_reward, rows, completions) == [1.0, 1.0, 1.0]


def test_a_grpo_group_repeats_rows_and_scores_each_completion() -> None:
    """TRL repeats each row num_generations times; every completion gets its own reward."""
    row = to_records([ADD])[0]
    group = [GOOD["add"], WRONG_ADD, "", GOOD["add"], WRONG_ADD, "```python\ndef add(a, b):\n    while True: pass\n```"]
    rewards = trl_call(make_code_reward(timeout=1.0), [row] * len(group), group)
    assert rewards[:5] == [1.0, 0.25, 0.0, 1.0, 0.25]
    assert rewards[5] == 0.0


def test_identical_submissions_in_a_batch_run_once_and_rows_run_concurrently(monkeypatch: pytest.MonkeyPatch) -> None:
    """Duplicates share one sandbox run; distinct ones overlap on the worker threads."""
    real = agentenv.grading.run_tests
    lock = threading.Lock()
    calls: list[str] = []
    live = [0, 0]  # in flight now, most at once

    def spy(code: str, checks: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            calls.append(code)
            live[0] += 1
            live[1] = max(live[1], live[0])
        try:
            return real(code, checks, *args, **kwargs)
        finally:
            with lock:
                live[0] -= 1

    monkeypatch.setattr(agentenv.grading, "run_tests", spy)
    sleepy = [f"```python\nimport time\ndef add(a, b):\n    time.sleep(0.3)\n    return a + b + {i} * 0\n```"
              for i in range(4)]
    group = [*sleepy, GOOD["add"], GOOD["add"], GOOD["add"]]
    rewards = trl_call(make_code_reward(max_workers=4), to_records([ADD]) * len(group), group)
    assert rewards == [1.0] * len(group)
    assert len(calls) == 5
    assert live[1] >= 2


def test_setup_code_column_is_honoured() -> None:
    """The checks see names that setup_code defines; without it they fail."""
    row = to_records([SCALE])[0]
    assert trl_call(code_reward, [row], [GOOD["scale"]]) == [1.0]
    assert trl_call(code_reward, [dict(row, setup_code="")], [GOOD["scale"]]) == [0.0]


def test_float_tolerance_column_is_honoured() -> None:
    """Floats match within the row's float_tolerance, and only exactly without one."""
    row = to_records([THIRDS])[0]
    answer = "```python\ndef thirds(x):\n    return 3 * x\n```"
    assert trl_call(code_reward, [row], [answer]) == [1.0]
    assert trl_call(code_reward, [dict(row, float_tolerance=None)], [answer]) == [pytest.approx(1 / 3)]


def test_equality_column_is_honoured() -> None:
    """A row's equality decides how values compare: 5.0 passes for 5 under python, not strict."""
    row = to_records([ADD])[0]
    assert row["equality"] == "python" and row["prelude"] == ""
    as_float = "```python\ndef add(a, b):\n    return float(a + b)\n```"
    assert trl_call(code_reward, [row], [as_float]) == [1.0]
    assert trl_call(code_reward, [dict(row, equality="strict")], [as_float]) == [0.0]


def test_prelude_column_reaches_the_candidate() -> None:
    """A row's prelude (a benchmark's implicit imports) runs before the completion's code."""
    row = dict(to_records([ADD])[0], prelude="from operator import add as plus\n")
    answer = "```python\ndef add(a, b):\n    return plus(a, b)\n```"
    assert trl_call(code_reward, [row], [answer]) == [1.0]
    assert trl_call(code_reward, [dict(row, prelude="")], [answer]) == [0.0]


def test_rows_without_checks_get_none_so_trl_leaves_them_out() -> None:
    """A row whose checks are empty is not this reward's business: None, as TRL allows."""
    rows = [to_records([ADD])[0], dict(to_records([ADD])[0], checks=None)]
    assert trl_call(code_reward, rows, [GOOD["add"], GOOD["add"]]) == [1.0, None]


def test_a_dataset_without_checks_gets_an_error_that_says_how_to_build_one() -> None:
    """Forgetting the checks column raises ConfigError pointing at to_hf_dataset."""
    with pytest.raises(ConfigError, match="to_hf_dataset"):
        code_reward(prompts=["p"], completions=["def f(): pass"], entry_point=["f"])
    with pytest.raises(ConfigError, match="one entry per completion"):
        code_reward(prompts=["p"], completions=["a", "b"], checks=[ADD.checks])


def test_log_hooks_receive_outcome_rates_and_a_column_per_completion() -> None:
    """TRL's log_metric gets outcome rates and log_extra one outcome per completion."""
    metrics: dict[str, float] = {}
    extra: dict[str, list[str]] = {}
    rows = to_records([ADD]) * 4
    rewards = trl_call(code_reward, rows, [GOOD["add"], WRONG_ADD, "no code here", GOOD["add"]],
                       trainer_state=object(), log_metric=metrics.__setitem__,
                       log_extra=extra.__setitem__)
    assert rewards == [1.0, 0.25, 0.0, 1.0]
    assert metrics["code_reward/pass"] == 0.5 and metrics["code_reward/no_code"] == 0.25
    assert extra["code_reward/outcome"] == ["pass", "wrong_answer", "no_code", "pass"]


def test_sparse_variant_pays_only_full_passes_and_is_named_for_trl_logs() -> None:
    """make_code_reward(reward='sparse') gives 0/1 and carries the name TRL logs it under."""
    fn = make_code_reward(reward="sparse", name="pass_all")
    assert fn.__name__ == "pass_all"
    rows = to_records([ADD]) * 2
    assert trl_call(fn, rows, [GOOD["add"], WRONG_ADD]) == [1.0, 0.0]
    with pytest.raises(ConfigError):
        make_code_reward(max_workers=0)
    with pytest.raises(ConfigError):
        make_code_reward(timeout=0)


def test_async_reward_is_a_coroutine_function_that_agrees_with_the_sync_one() -> None:
    """TRL awaits async reward functions; acode_reward gives the same rewards as code_reward."""
    assert asyncio.iscoroutinefunction(acode_reward)
    assert asyncio.iscoroutinefunction(make_code_reward(asynchronous=True))
    rows = to_records(TASKS)
    completions = [GOOD["add"], "nothing", GOOD["shout"]]
    assert asyncio.run(trl_call(acode_reward, rows, completions)) == trl_call(code_reward, rows, completions)


def test_hf_dataset_rows_feed_the_reward_unchanged() -> None:
    """to_hf_dataset builds a Dataset whose rows, passed as TRL passes them, score correctly."""
    pytest.importorskip("datasets")
    ds = to_hf_dataset(TASKS)
    assert set(ds.column_names) == {"prompt", *ROW_COLUMNS}
    rows = [ds[i] for i in range(len(ds))]
    assert rows[0]["prompt"][-1]["role"] == "user"
    assert trl_call(code_reward, rows, [GOOD["add"], GOOD["scale"], GOOD["shout"]]) == [1.0, 1.0, 1.0]


def test_to_hf_dataset_without_datasets_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the datasets package the error names `pip install "agentenv-coding[hf]"`."""
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(MissingDependency, match=r'pip install "agentenv-coding\[hf\]"'):
        to_hf_dataset(TASKS)
    assert to_records(TASKS)  # the records need no third-party package


def test_every_builtin_reference_solution_earns_full_reward_in_one_batch() -> None:
    """The builtin tasks' references, scored as one TRL batch, all earn 1.0."""
    from agentenv import TASKS

    rows = to_records(TASKS)
    completions = [[{"role": "assistant", "content": f"```python\n{t.reference_solution}\n```"}]
                   for t in TASKS]
    rewards = trl_call(code_reward, rows, completions)
    assert {t.name: r for t, r in zip(TASKS, rewards, strict=True) if r != 1.0} == {}


def test_a_rows_defines_keeps_a_completions_helpers_out_of_the_checks() -> None:
    """A check's names other than what the task asks for (the row's ``defines``) are never the
    completion's: a completion that defines ``isclose`` to pass every check earns nothing, one
    that imports it passes, as plain Python would; without the column names resolve as there."""
    task = Task(name="area", prompt="Area of a circle of radius r.", entry_point="area",
                checks=("assert isclose(area(1), 3.141592653589793)", "assert isclose(area(2), 12.566370614359172)"),
                reference_solution="import math\nfrom math import isclose\ndef area(r):\n    return math.pi * r * r\n")
    rows = to_records([task])
    assert json.loads(rows[0]["defines"]) == ["area"]
    honest = "```python\nimport math\nfrom math import isclose\ndef area(r):\n    return math.pi * r * r\n```"
    hack = "```python\ndef isclose(*a, **k):\n    return True\ndef area(r):\n    return 0.0\n```"
    assert trl_call(code_reward, rows * 2, [honest, hack]) == [1.0, 0.0]
    plain = [{k: v for k, v in rows[0].items() if k != "defines"}]
    assert trl_call(code_reward, plain * 2, [honest, hack]) == [1.0, 1.0]
