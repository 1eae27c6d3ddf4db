"""What every trainer adapter shares: task lists, tasks stored in a row, reading a completion.

A trainer hands back what the policy produced in one of three shapes: a string, one assistant
message, or a conversation (a list of messages, tool calls and tool results included).
:func:`completion_text` gives the submission in it: the code argument of the last tool call
that carries one, or the text of the last assistant message, whichever comes last.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentenv.errors import ConfigError
from agentenv.tasks.schema import Task

__all__ = ["completion_text", "decode_task", "encode_task", "resolve_tasks", "tool_call_code"]


def resolve_tasks(tasks: Iterable[Task] | str) -> list[Task]:
    """A list of tasks; a string is a task-set name or path, loaded with ``load_tasks``."""
    if isinstance(tasks, str):
        from agentenv.tasks import load_tasks

        return load_tasks(tasks)
    out = list(tasks)
    for task in out:
        if not isinstance(task, Task):
            raise ConfigError(f"expected Task objects (or a task-set name), got {type(task).__name__}")
    return out


def _arguments(function: Mapping[str, Any]) -> Mapping[str, Any] | None:
    arguments = function.get("arguments")
    if isinstance(arguments, str):  # OpenAI's wire form: a JSON object as a string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    return arguments if isinstance(arguments, Mapping) else None


def tool_call_code(message: Mapping[str, Any], name: str | None = None) -> list[str]:
    """The code each tool call of ``message`` carries (calls to ``name`` only, when given).

    A call's code is its ``code`` argument, else its only string argument; ``arguments`` may be
    a mapping (TRL's parsed form) or a JSON string (OpenAI's). Calls without code are skipped.
    """
    out: list[str] = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function", call)
        if not isinstance(function, Mapping) or (name is not None and function.get("name") != name):
            continue
        arguments = _arguments(function)
        if arguments is None:
            continue
        code = arguments.get("code")
        if not isinstance(code, str):
            strings = [v for v in arguments.values() if isinstance(v, str)]
            code = strings[0] if len(strings) == 1 else None
        if isinstance(code, str):
            out.append(code)
    return out


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def completion_text(completion: Any) -> str:
    """The submission in one completion, in TRL's standard or conversational format.

    A string is itself. In a conversation (a list of message dicts, or one dict), the last
    assistant message that submits something decides: the code of its last tool call that
    carries code, else its text (content given as a list of ``{"type": "text"}`` parts is
    joined). Anything else gives "" (and so a reward of 0).
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if not isinstance(completion, Sequence):
        return ""
    for message in reversed(completion):
        if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
            continue
        calls = tool_call_code(message)
        if calls:
            return calls[-1]
        text = _content_text(message.get("content"))
        if text:
            return text
    return ""


def encode_task(task: Task) -> str:
    """One task as a JSON string: a single Arrow/parquet type whatever the task holds."""
    return json.dumps(task.to_dict(), ensure_ascii=False)


def decode_task(value: Any) -> Task:
    """The task :func:`encode_task` wrote (a JSON string, or the dict it decodes to)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"a row's task is not valid JSON ({exc}); write rows with agentenv's "
                              "exporters, which store the task with encode_task") from exc
    if not isinstance(value, Mapping):
        raise ConfigError(f"a row's task must be a JSON object, got {type(value).__name__}")
    return Task.from_dict(value)
