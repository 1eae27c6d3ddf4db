"""TRL multi-turn adapter: environments made the way GRPOTrainer makes them, driven the way its
tool loop drives them (reset(**row), submit(...) per tool call, get_reward()), without TRL."""

from __future__ import annotations

import inspect
import threading
import time
from typing import Any

import pytest

from agentenv.credit import episode_return
from agentenv.errors import ConfigError
from agentenv.grading.scoring import SandboxGrader, Scored
from agentenv.integrations.trl import (
    CodingToolEnv,
    PrefetchGrading,
    code_reward,
    environment_factory,
    to_records,
)
from agentenv.tasks.schema import Task

ADD = Task(
    name="add", prompt="Write `add(a, b)` returning the sum.", entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0",
            "assert add(10, 5) == 15"),
    visible_checks=("assert add(2, 3) == 5",),
)
SUB = Task(name="sub", prompt="Write `sub(a, b)`.", entry_point="sub",
           checks=("assert sub(3, 1) == 2", "assert sub(0, 0) == 0"))
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"  # passes only add(0, 0) == 0


def tools_of(env: Any) -> list[str]:
    """The method names TRL exposes as tools: public functions other than reset and get_reward."""
    return [name for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def test_the_factory_makes_envs_whose_only_tool_is_submit_with_a_documented_code_argument() -> None:
    """TRL builds the tool schema from public methods; only submit(code: str) -> str is one."""
    env = environment_factory([ADD])()
    assert isinstance(env, CodingToolEnv)
    assert tools_of(env) == ["submit"]
    from transformers.utils import get_json_schema

    schema = get_json_schema(env.submit)
    assert schema["function"]["name"] == "submit"
    assert schema["function"]["parameters"]["required"] == ["code"]


def test_reset_takes_the_task_from_the_row_and_submit_returns_the_feedback() -> None:
    """A wrong then a right submission: feedback names the failures, then the episode is solved."""
    make = environment_factory([SUB, ADD], max_turns=3)
    env = make()
    row = to_records([ADD], max_turns=3)[0]
    assert env.reset(**row) is None  # the row's prompt already poses the task
    first = env.submit(WRONG)
    assert "1/4" in first or "1 of 4" in first or "passed" in first.lower()
    assert env.env.trajectory is not None and env.env.trajectory.task_name == "add"
    env.submit(RIGHT)
    assert env.env.trajectory.stop_reason == "solved"
    assert env.get_reward() == 1.0
    assert "over" in env.submit(RIGHT)  # no grading after the end
    assert len(env.env.trajectory.turns) == 2


def test_a_task_list_with_repeats_resets_onto_each_named_task() -> None:
    """Datasets repeat tasks; every row still finds its own task."""
    make = environment_factory([ADD, ADD, SUB, ADD])
    for task in (SUB, ADD):
        env = make()
        env.reset(**to_records([task])[0])
        assert env.env.trajectory is not None and env.env.trajectory.task_name == task.name


def test_env_options_reach_the_multi_turn_env() -> None:
    """max_turns, feedback_from and timeout are the wrapped env's own."""
    env = environment_factory([ADD], max_turns=2, feedback_from="visible", timeout=1.5)()
    assert env.env.max_turns == 2 and env.env.feedback_from == "visible" and env.env.timeout == 1.5
    env.reset(**to_records([ADD])[0])
    feedback = env.submit(WRONG)
    assert "add(10, 5)" not in feedback  # visible-only feedback never shows a hidden check
    env.submit(WRONG)
    assert env.env.trajectory is not None and env.env.trajectory.stop_reason == "max_turns"
    with pytest.raises(ConfigError):
        environment_factory([ADD], max_turns=0)
    with pytest.raises(ConfigError):
        environment_factory([ADD], feedback_from="nobody")


def test_token_budget_and_prompt_templates_reach_the_multi_turn_env(tmp_path: Any) -> None:
    """token_budget bounds the episode; a feedback.j2 in prompts_dir is what submit returns."""
    (tmp_path / "feedback.j2").write_text("CUSTOM {{ passed }}/{{ total }}")
    env = environment_factory([ADD], max_turns=3, token_budget=100_000, prompts_dir=tmp_path)()
    assert env.env.token_budget == 100_000
    env.reset(**to_records([ADD], prompts_dir=tmp_path, max_turns=3)[0])
    assert env.submit(WRONG) == "CUSTOM 1/4"
    probe = environment_factory([ADD], max_turns=3)()
    probe.reset(**to_records([ADD])[0])
    first = probe.env.trajectory.metadata["prompt_tokens"] if probe.env.trajectory else 0
    tight = environment_factory([ADD], max_turns=3, token_budget=first + 30)()
    tight.reset(**to_records([ADD])[0])
    tight.submit(WRONG)
    assert tight.env.trajectory is not None and tight.env.trajectory.stop_reason == "token_budget"


def test_get_reward_follows_the_credit_scheme() -> None:
    """get_reward is agentenv.credit.episode_return of the episode under the chosen scheme."""
    for scheme in ("final_only", "per_turn", "improvement", "discounted"):
        env = environment_factory([ADD], max_turns=3, credit=scheme, gamma=0.5)()
        env.reset(**to_records([ADD])[0])
        assert env.get_reward() == 0.0  # nothing submitted yet
        env.submit(WRONG)
        env.submit(RIGHT)
        assert env.env.trajectory is not None
        assert env.get_reward() == pytest.approx(episode_return(env.env.trajectory, scheme, 0.5))
    with pytest.raises(ConfigError, match="credit scheme"):
        environment_factory([ADD], credit="vibes")


def test_rows_without_a_known_task_get_errors_that_say_what_to_do() -> None:
    """A row without task_name points at to_hf_dataset and remove_unused_columns=False."""
    env = environment_factory([ADD])()
    with pytest.raises(ConfigError, match="remove_unused_columns=False"):
        env.reset(prompt=[{"role": "user", "content": "hi"}])
    with pytest.raises(ConfigError, match="not among the tasks"):
        env.reset(task_name="nope")
    with pytest.raises(ConfigError, match="leave it out"):
        environment_factory([ADD], seed=3)


def test_a_non_string_code_argument_is_graded_as_no_code() -> None:
    """A model that passes a number as code gets a finite no-code turn, not an exception."""
    env = environment_factory([ADD])()
    env.reset(**to_records([ADD])[0])
    env.submit(42)  # type: ignore[arg-type]
    assert env.env.trajectory is not None and env.env.trajectory.turns[0].outcome == "no_code"


def test_code_reward_scores_a_tool_call_completion_like_the_same_code_in_text() -> None:
    """The code argument of a submit call earns what the same code earns as a fenced block."""
    rows = to_records([ADD]) * 4
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}

    def call(code: str, arguments: Any) -> list[dict[str, Any]]:
        return [{"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function", "function": {"name": "submit", "arguments": arguments}}]},
                {"role": "tool", "name": "submit", "content": "feedback"}]

    import json

    as_text = [[{"role": "assistant", "content": f"```python\n{c}```"}] for c in (RIGHT, WRONG)]
    as_calls = [call(RIGHT, {"code": RIGHT}), call(WRONG, json.dumps({"code": WRONG}))]
    text_rewards = code_reward(prompts=[r["prompt"] for r in rows[:2]], completions=as_text,
                               **{k: v[:2] for k, v in columns.items()})
    call_rewards = code_reward(prompts=[r["prompt"] for r in rows[:2]], completions=as_calls,
                               **{k: v[:2] for k, v in columns.items()})
    assert text_rewards == call_rewards == [1.0, 0.25]
    # A later text turn after the call is the submission that counts.
    revised = [*call(WRONG, {"code": WRONG}), {"role": "assistant", "content": f"```python\n{RIGHT}```"}]
    assert code_reward(prompts=[rows[0]["prompt"]], completions=[revised],
                       **{k: v[:1] for k, v in columns.items()}) == [1.0]


def _hermes(code: str) -> str:
    import json

    return "<tool_call>\n" + json.dumps({"name": "submit", "arguments": {"code": code}}) + "\n</tool_call>"


def _assistant(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", **fields}


# The shapes a tool-call completion reaches a reward function in, each carrying `code`.
TOOL_CALL_SHAPES: dict[str, Any] = {
    # TRL 1.16 (parse_response): arguments already a dict, then TRL's tool message
    "trl_parsed": lambda code: [
        _assistant(tool_calls=[{"type": "function", "function": {"name": "submit", "arguments": {"code": code}}}]),
        {"role": "tool", "name": "submit", "content": "feedback"}],
    # OpenAI chat completions (and vLLM's server): an id, arguments as a JSON string
    "openai_wire": lambda code: [_assistant(content=None, tool_calls=[{
        "id": "call_0", "type": "function",
        "function": {"name": "submit", "arguments": __import__("json").dumps({"code": code})}}]),
        {"role": "tool", "tool_call_id": "call_0", "content": "feedback"}],
    # flat calls (some chat templates' and SDKs' form)
    "flat": lambda code: [_assistant(tool_calls=[{"name": "submit", "arguments": {"code": code}}])],
    # Llama 3.1's JSON tool calls name their arguments "parameters"
    "llama_parameters": lambda code: [_assistant(tool_calls=[{"name": "submit", "parameters": {"code": code}}])],
    # a Qwen/Hermes template's call left in the text (no response parser): standard format...
    "hermes_text": lambda code: "I will submit.\n" + _hermes(code),
    # ...and as an assistant message's content, given as text parts
    "hermes_in_content_parts": lambda code: [_assistant(content=[{"type": "text", "text": _hermes(code)}])],
    # a closing remark after the tool's feedback does not hide the submission
    "call_then_closing_remark": lambda code: [
        _assistant(tool_calls=[{"type": "function", "function": {"name": "submit", "arguments": {"code": code}}}]),
        {"role": "tool", "name": "submit", "content": "4/4 tests passed"},
        _assistant(content="Done")],
}


@pytest.mark.parametrize("shape", sorted(TOOL_CALL_SHAPES))
def test_every_tool_call_shape_scores_what_the_same_code_scores_as_text(shape: str) -> None:
    """Right, wrong and no-code submissions: each shape's rewards equal the fenced text's."""
    rows = to_records([ADD]) * 3
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    codes = [RIGHT, WRONG, "I am not sure how to do this."]
    as_text = [[{"role": "assistant", "content": f"```python\n{c}```"}] for c in codes]
    as_calls = [TOOL_CALL_SHAPES[shape](c) for c in codes]
    prompts = [r["prompt"] for r in rows]
    text_rewards = code_reward(prompts=prompts, completions=as_text, **columns)
    assert text_rewards == [1.0, 0.25, 0.0]
    assert code_reward(prompts=prompts, completions=as_calls, **columns) == text_rewards


def test_text_after_a_hermes_call_wins_only_when_it_holds_code() -> None:
    """Code written after the last <tool_call> block is the later submission; prose is not."""
    from agentenv.integrations.trl import completion_text

    assert completion_text(_hermes(WRONG) + "\nActually:\n```python\n" + RIGHT + "```") .endswith("```")
    assert completion_text(_hermes(WRONG) + "\nThat should do it.") == WRONG
    assert completion_text("<tool_call>\n{broken json\n</tool_call>") == "<tool_call>\n{broken json\n</tool_call>"
    unclosed = '<tool_call>\n{"name": "submit", "arguments": {"code": "x = 1"}}'
    assert completion_text(unclosed) == "x = 1"  # cut at the length limit after the JSON


class SlowGrader:
    """The sandbox, plus a fixed delay per grading, counting how many run at once."""

    def __init__(self, delay: float) -> None:
        self.inner = SandboxGrader()
        self.delay = delay
        self.lock = threading.Lock()
        self.live = 0
        self.most = 0

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        with self.lock:
            self.live += 1
            self.most = max(self.most, self.live)
        try:
            time.sleep(self.delay)
            return self.inner.score(task, code, timeout=timeout)
        finally:
            with self.lock:
                self.live -= 1

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self.score(task, code, timeout=timeout)


class FakeToolLoop:
    """TRL 1.16's tool loop in miniature: tools run one rollout at a time, each awaited before
    the next; a regenerated assistant message is appended to the rollout's completion."""

    def __init__(self, envs: list[CodingToolEnv], second_round: list[str]) -> None:
        self.environments = envs
        self.second_round = second_round

    def _tool_call_loop(self, prompts: Any, prompt_ids: Any, completion_ids: Any,
                        completions: list[Any]) -> list[Any]:
        for round_ in range(2):
            for env, messages in zip(self.environments, completions, strict=True):
                code = messages[-1]["tool_calls"][0]["function"]["arguments"]["code"]
                messages.append({"role": "tool", "name": "submit", "content": env.submit(code)})
            if round_ == 0:
                for messages, code in zip(completions, self.second_round, strict=True):
                    messages.append(tool_call(code))
        return completions


class Overlapped(PrefetchGrading, FakeToolLoop):
    pass


def tool_call(code: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "submit", "arguments": {"code": code}}}]}


@pytest.mark.parametrize("overlap", [False, True])
def test_prefetch_grading_overlaps_a_batch_and_changes_no_result(overlap: bool) -> None:
    """With the mixin the gradings of a round run together; rewards and turns are the same."""
    grader = SlowGrader(delay=0.2)
    make = environment_factory([ADD], max_turns=3, grader=grader)
    envs = [make() for _ in range(4)]
    row = to_records([ADD], max_turns=3)[0]
    for env in envs:
        env.reset(**row)
    first = [RIGHT, WRONG, WRONG, WRONG + "\n# other"]
    second = [RIGHT, RIGHT, WRONG, "x = 1\n"]
    loop = (Overlapped if overlap else FakeToolLoop)(envs, second)
    completions = loop._tool_call_loop(None, None, None, [[tool_call(c)] for c in first])
    assert all(type(messages) is list for messages in completions)  # plain lists handed back
    assert [env.get_reward() for env in envs] == [1.0, 1.0, 0.25, 0.0]
    assert [len(env.env.trajectory.turns) for env in envs if env.env.trajectory] == [1, 2, 2, 2]
    if overlap:
        assert grader.most >= 2
        assert make.grader.hits == 7  # every graded turn was ready (or in flight) when asked
        assert make.grader.prefetched == 6  # two rollouts sent the same code: graded once
    else:
        assert grader.most == 1 and make.grader.prefetched == 0


def test_prefetching_keeps_visible_only_feedback_visible_only() -> None:
    """feedback_from="visible" grades visible and hidden checks as two runs: each prefetched
    run serves only its own part, so no hidden check reaches the feedback."""
    grader = SlowGrader(delay=0.0)
    make = environment_factory([ADD], max_turns=3, feedback_from="visible", grader=grader)
    envs = [make() for _ in range(3)]
    row = to_records([ADD], max_turns=3)[0]
    for env in envs:
        env.reset(**row)
    first = [WRONG, WRONG + "\n# b", WRONG + "\n# c"]
    completions = Overlapped(envs, [RIGHT] * 3)._tool_call_loop(
        None, None, None, [[tool_call(c)] for c in first])
    feedback = [m["content"] for messages in completions for m in messages if m["role"] == "tool"]
    assert len(feedback) == 6 and not any("add(10, 5)" in f for f in feedback)
    assert make.grader.hits == 12  # (visible + hidden) x 6 turns, every one ready when asked
    assert make.grader.prefetched == 8  # the three rollouts sent one right answer: graded once
    assert [env.get_reward() for env in envs] == [1.0, 1.0, 1.0]


def test_every_submit_call_of_a_message_is_prefetched_up_to_the_turns_left() -> None:
    """A message with several submit calls is several turns; each is graded ahead, none past
    max_turns."""
    grader = SlowGrader(delay=0.0)
    make = environment_factory([ADD], max_turns=2, grader=grader)
    env = make()
    env.reset(**to_records([ADD], max_turns=2)[0])
    calls = [{"type": "function", "function": {"name": "submit", "arguments": {"code": c}}}
             for c in (WRONG, WRONG + "\n# again", WRONG + "\n# third")]
    message = {"role": "assistant", "content": "", "tool_calls": calls}

    class OneRound:  # TRL's loop for one message: every call of it, in order
        def __init__(self) -> None:
            self.environments = [env]

        def _tool_call_loop(self, prompts: Any, prompt_ids: Any, completion_ids: Any,
                            completions: list[Any]) -> None:
            assert make.grader.prefetched == 2  # the third call would come after the last turn
            for call in completions[0][-1]["tool_calls"]:
                env.submit(call["function"]["arguments"]["code"])

    class Overlapping(PrefetchGrading, OneRound):
        pass

    Overlapping()._tool_call_loop(None, None, None, [[message]])
    assert make.grader.hits == 2 and env.env.trajectory is not None
    assert len(env.env.trajectory.turns) == 2


def test_malformed_tool_calls_read_as_no_submission_never_an_exception() -> None:
    """Broken JSON, missing arguments, odd types: the completion falls back to its text or ""."""
    from agentenv.integrations.trl import completion_text

    odd: list[Any] = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "submit", "arguments": "{not json"}}]},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "submit"}}]},
        {"role": "assistant", "content": "", "tool_calls": ["nonsense", None, 3]},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": {"a": 1, "b": 2}}}]},
        {"role": "assistant", "content": "", "tool_calls": {"not": "a list"}},
    ]
    for message in odd:
        assert completion_text([message]) == ""
    two_strings = {"role": "assistant", "content": "text wins",
                   "tool_calls": [{"function": {"name": "run", "arguments": {"x": "a", "y": "b"}}}]}
    assert completion_text([two_strings]) == "text wins"  # no single code argument: the text
    one_string = {"role": "assistant", "content": None,
                  "tool_calls": [{"function": {"name": "python", "arguments": {"source": RIGHT}}}]}
    assert completion_text([one_string]) == RIGHT
