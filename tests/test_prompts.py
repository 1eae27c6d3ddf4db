"""Prompt templates: packaged defaults, per-template overrides, strict variables, ids and truncation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentenv.prompts as prompts_module
from agentenv.errors import ConfigError, TemplateError
from agentenv.grading.result import Failure
from agentenv.prompts import TEMPLATE_NAMES, Prompts, truncate_middle
from agentenv.tasks import StdioCase, Task
from agentenv.tasks.builtin import builtin_tasks

TASK = Task(
    name="add",
    prompt="Write a Python function `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(123, 456) == 579"),
    visible_checks=("assert add(2, 3) == 5",),
)


def failure(i: int, message: str = "assertion failed") -> Failure:
    return Failure(index=i, check=f"assert add({i}, 1) == {i + 1}", kind="assertion", message=message)


def test_template_ids_are_name_at_content_hash() -> None:
    """Each id is the template name, '@', and 8 hex digits of its content hash."""
    ids = Prompts().template_ids
    assert set(ids) == set(TEMPLATE_NAMES)
    for name, template_id in ids.items():
        assert re.fullmatch(rf"{name}@[0-9a-f]{{8}}", template_id)


def test_task_message_shows_visible_checks_and_never_hidden_ones() -> None:
    """The task message has the prompt, the entry point and visible checks as examples only."""
    text = Prompts().task(TASK)
    assert TASK.prompt in text and "`add`" in text
    assert "assert add(2, 3) == 5" in text
    assert "add(123, 456)" not in text


def test_builtin_task_messages_hold_no_hidden_only_check() -> None:
    """No builtin task's first messages contain a hidden check that is not also visible."""
    prompts = Prompts()
    for task in builtin_tasks():
        text = "\n".join(m["content"] for m in prompts.messages(task, max_turns=3))
        for check in set(task.checks) - set(task.visible_checks):
            assert str(check) not in text, (task.name, check)


def test_stdio_examples_render_as_input_and_expected_output() -> None:
    """A stdin/stdout visible case is shown as an input block and an output block."""
    task = Task(name="sum", prompt="Read two ints and print their sum.", entry_point="main",
                checks=(StdioCase("1 2\n", "3\n"), StdioCase("5 5\n", "10\n")),
                visible_checks=(StdioCase("1 2\n", "3\n"),))
    text = Prompts().task(task)
    assert "standard input" in text and "Input:\n```\n1 2\n```" in text
    assert "Expected output:\n```\n3\n```" in text and "5 5" not in text


def test_messages_are_system_then_user_in_chat_format() -> None:
    """messages() gives the opening conversation any chat model can take."""
    messages = Prompts().messages(TASK, max_turns=3)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "3 attempts" in messages[0]["content"]
    assert "attempts" not in Prompts().system(max_turns=1)


def test_feedback_lists_failures_and_attempts_left() -> None:
    """Feedback says how many passed, which failed with kind and message, and the attempts left."""
    text = Prompts().feedback(turn=1, turns_left=2, passed=3, total=5,
                              failures=[failure(1), failure(2, "expected 3, got 4")])
    assert "passed 3 of 5 tests" in text
    assert "`assert add(2, 1) == 3` (assertion):\n  | expected 3, got 4" in text
    assert "2 attempts left" in text


def test_feedback_caps_the_number_of_failures_listed() -> None:
    """Beyond max_failures, feedback says how many more failed instead of listing them."""
    text = Prompts(max_failures=2).feedback(turn=1, turns_left=1, passed=0, total=6,
                                             failures=[failure(i) for i in range(6)])
    assert text.count("- `assert") == 2 and "4 more failed tests not shown" in text


def test_long_messages_are_truncated_with_a_visible_marker() -> None:
    """A huge failure message is cut in the middle and says how much was cut."""
    text = Prompts(max_chars=100).feedback(turn=1, turns_left=1, passed=0, total=1,
                                           failures=[failure(0, "A" * 50 + "x" * 5000 + "Z" * 50)])
    assert "chars truncated" in text and len(text) < 1000
    assert "AAAA" in text and "ZZZZ" in text


def test_solved_feedback_says_all_tests_passed() -> None:
    """When every hidden check passes the feedback says so and asks for nothing."""
    text = Prompts().feedback(turn=2, turns_left=1, passed=2, total=2, failures=[], solved=True)
    assert text == "All tests passed."


def test_prompts_dir_overrides_one_template_and_keeps_the_others(tmp_path: Path) -> None:
    """A user feedback.j2 replaces only feedback; system and task stay packaged (same ids)."""
    (tmp_path / "feedback.j2").write_text("{{ passed }}/{{ total }} on turn {{ turn }}", encoding="utf-8")
    default, custom = Prompts(), Prompts(tmp_path)
    assert custom.feedback(turn=2, turns_left=1, passed=1, total=4, failures=[]) == "1/4 on turn 2"
    assert custom.template_ids["feedback"] != default.template_ids["feedback"]
    assert custom.template_ids["system"] == default.template_ids["system"]
    assert custom.template_ids["task"] == default.template_ids["task"]
    assert custom.task(TASK) == default.task(TASK)


def test_a_variable_typo_is_a_template_error_naming_template_and_variable(tmp_path: Path) -> None:
    """{{ pased }} fails when the templates load, naming feedback.j2, 'pased' and the fix."""
    (tmp_path / "feedback.j2").write_text("{{ pased }}/{{ total }}", encoding="utf-8")
    with pytest.raises(TemplateError) as excinfo:
        Prompts(tmp_path)
    message = str(excinfo.value)
    assert "feedback.j2" in message and "'pased'" in message and "did you mean 'passed'" in message


def test_an_attribute_typo_is_a_template_error_at_render(tmp_path: Path) -> None:
    """{{ f.mesage }} on a failure fails at render time, naming the template and the attribute."""
    (tmp_path / "feedback.j2").write_text(
        "{% for f in failures %}{{ f.mesage }}{% endfor %}", encoding="utf-8")
    prompts = Prompts(tmp_path)
    with pytest.raises(TemplateError, match=r"feedback\.j2.*'mesage'"):
        prompts.feedback(turn=1, turns_left=1, passed=0, total=1, failures=[failure(0)])


def test_a_syntax_error_names_the_template_and_line(tmp_path: Path) -> None:
    """A broken tag is a TemplateError with the file and line number."""
    (tmp_path / "task.j2").write_text("{{ prompt }}\n{% if %}", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"task\.j2 .*line 2"):
        Prompts(tmp_path)


def test_a_missing_prompts_dir_is_a_config_error(tmp_path: Path) -> None:
    """prompts_dir must exist; the error says which files to put there."""
    with pytest.raises(ConfigError, match=r"feedback\.j2"):
        Prompts(tmp_path / "nope")


def test_template_ids_change_when_the_content_changes(tmp_path: Path) -> None:
    """Two different user templates get different ids; the same content gets the same id."""
    (tmp_path / "system.j2").write_text("Be terse.", encoding="utf-8")
    first = Prompts(tmp_path).template_ids["system"]
    assert Prompts(tmp_path).template_ids["system"] == first
    (tmp_path / "system.j2").write_text("Be verbose.", encoding="utf-8")
    assert Prompts(tmp_path).template_ids["system"] != first


def test_a_template_rewritten_at_once_with_the_same_length_is_picked_up(tmp_path: Path) -> None:
    """An edit within the file clock's resolution (same size, maybe same mtime) is never missed."""
    path = tmp_path / "system.j2"
    ids = []
    for text in ("Be terse.", "Be tense.", "Be terse."):
        path.write_text(text, encoding="utf-8")
        ids.append(Prompts(tmp_path).template_ids["system"])
        assert Prompts(tmp_path).system() == text
    assert ids[0] != ids[1] and ids[0] == ids[2]


def test_settled_templates_are_read_once_and_reloaded_when_a_file_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unchanged template files are not re-read per Prompts(); an edit or a new override is seen."""
    monkeypatch.setattr(prompts_module, "_SETTLED_NS", -10**18)  # every file counts as settled
    loads: list[str] = []
    original = Prompts._load

    def counting(self: Prompts, name: str) -> Any:
        loads.append(name)
        return original(self, name)

    monkeypatch.setattr(Prompts, "_load", counting)
    (tmp_path / "system.j2").write_text("One.", encoding="utf-8")
    assert [Prompts(tmp_path).system() for _ in range(3)] == ["One."] * 3
    assert len(loads) == len(TEMPLATE_NAMES)
    (tmp_path / "system.j2").write_text("Two, longer.", encoding="utf-8")
    assert Prompts(tmp_path).system() == "Two, longer."
    (tmp_path / "task.j2").write_text("Task {{ task_name }}", encoding="utf-8")
    assert Prompts(tmp_path).task(TASK) == "Task add"
    assert len(loads) == 3 * len(TEMPLATE_NAMES)


@given(st.text(max_size=3000), st.integers(min_value=40, max_value=1000))
def test_truncate_middle_bounds_length_and_keeps_both_ends(text: str, limit: int) -> None:
    """Short text is unchanged; long text keeps its head and tail around a marker."""
    out = truncate_middle(text, limit)
    if len(text) <= limit:
        assert out == text
    else:
        assert "chars truncated" in out and len(out) <= limit + 40
        assert out.startswith(text[: (limit * 2) // 3])
        assert out.endswith(text[len(text) - (limit - (limit * 2) // 3):])
