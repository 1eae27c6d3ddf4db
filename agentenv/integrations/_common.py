"""What every trainer adapter shares: task lists, tasks stored in a row, reading a completion.

A trainer hands back what the policy produced in one of three shapes: a string, one assistant
message, or a conversation (a list of messages, tool calls and tool results included).
:func:`completion_text` gives the submission in it: the code argument of the last tool call
that carries one, or the text of the last assistant message that holds code, whichever comes
last. Tool calls are read in every shape trainers and servers produce: parsed
(``{"type": "function", "function": {"name", "arguments": {...}}}``, TRL), on the wire
(``arguments`` a JSON string, OpenAI), flat (``{"name", "arguments"}``), Llama's
``"parameters"``, and, in text nobody parsed, Hermes/Qwen ``<tool_call>{...}</tool_call>`` blocks.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentenv.errors import ConfigError
from agentenv.extract import extract_code
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


# A tool call written as text (Hermes/Qwen chat templates), when nothing parsed it; an
# unclosed block (a completion cut at its length limit) runs to the end.
_TEXT_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)


def _arguments(function: Mapping[str, Any]) -> Mapping[str, Any] | None:
    arguments = function.get("arguments", function.get("parameters"))  # Llama 3.1: parameters
    if isinstance(arguments, str):  # OpenAI's wire form: a JSON object as a string
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):  # RecursionError: arguments nested ~1,000 deep
            return None
    return arguments if isinstance(arguments, Mapping) else None


def tool_call_code(message: Mapping[str, Any], name: str | None = None) -> list[str]:
    """The code each tool call of ``message`` carries (calls to ``name`` only, when given).

    A call's code is its ``code`` argument, else its only string argument; ``arguments`` may be
    a mapping (TRL's parsed form) or a JSON string (OpenAI's). Calls without code are skipped.
    """
    calls = message.get("tool_calls") or ()
    if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Iterable):
        return []
    return [code for call in calls if (code := _call_code(call, name)) is not None]


def _call_code(call: Any, name: str | None) -> str | None:
    """The code one tool call carries (``None`` when it carries none or names another tool)."""
    if not isinstance(call, Mapping):
        return None
    function = call.get("function", call)
    if not isinstance(function, Mapping) or (name is not None and function.get("name") != name):
        return None
    arguments = _arguments(function)
    if arguments is None:
        return None
    code = arguments.get("code")
    if not isinstance(code, str):
        strings = [v for v in arguments.values() if isinstance(v, str)]
        code = strings[0] if len(strings) == 1 else None
    return code if isinstance(code, str) else None


def _text_submission(text: str) -> str:
    """``text``, or the code of the last ``<tool_call>`` block written in it.

    A chat template's tool call left unparsed is JSON inside ``<tool_call>`` tags; its code
    argument is the submission unless code follows the last block in the text.
    """
    blocks = list(_TEXT_CALL.finditer(text))
    codes = []
    for block in blocks:
        try:
            call = json.loads(block.group(1))
        except (ValueError, RecursionError):  # not JSON, or nested deeper than json can read
            continue
        code = _call_code(call, None)
        if code is not None:
            codes.append(code)
    if not codes:
        return text
    tail = text[blocks[-1].end():]
    return tail if _holds_code(tail) else codes[-1]


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


def _holds_code(text: str) -> bool:
    """Whether ``text`` carries a program: a statement, not only prose or a bare expression
    (a closing "Done" parses as a name)."""
    code = extract_code(text)
    if not code.strip():
        return False
    try:
        body = ast.parse(code).body
    except Exception:  # extract_code keeps an unclosed fence's text even when it does not parse
        return True
    return any(not isinstance(node, ast.Expr) for node in body)


def completion_text(completion: Any) -> str:
    """The submission in one completion, in TRL's standard or conversational format.

    A string is itself, or the code of a ``<tool_call>`` block written in it. In a
    conversation (a list of message dicts, or one dict), the last assistant message that
    submits code decides: the code of its last tool call that carries code, else its text
    (content given as a list of ``{"type": "text"}`` parts is joined) when it holds code. A
    closing remark after the last submission ("Done, all tests pass.") does not hide it; with
    no code anywhere, the last assistant text is returned. Anything else gives "" (and so a
    reward of 0).
    """
    if isinstance(completion, str):
        return _text_submission(completion)
    if isinstance(completion, Mapping):
        completion = [completion]
    if not isinstance(completion, Sequence):
        return ""
    fallback = ""
    for message in reversed(completion):
        if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
            continue
        calls = tool_call_code(message)
        if calls:
            return calls[-1]
        text = _text_submission(_content_text(message.get("content")))
        if _holds_code(text):
            return text
        fallback = fallback or text
    return fallback


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
