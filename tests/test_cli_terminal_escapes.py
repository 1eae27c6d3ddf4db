"""Task files and candidate answers are data: ``tasks list``, ``tasks show``, ``tasks validate``
and ``check`` never send their control characters (terminal escapes) to the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv.cli import main
from agentenv.tasks.schema import Task

ESC = "\x1b]0;pwned\x07\x1b[2J"  # set the window title, clear the screen
HOSTILE = Task(
    name="add" + ESC, prompt="Write add." + ESC, entry_point="add",
    checks=("assert add(2, 3) == 5  # " + ESC, "assert add(1, 1) == 2"),
    visible_checks=("assert add(0, 0) == 0  # " + ESC,),
    setup_code="X = 1  # " + ESC + "\n", reference_solution="def add(a, b):  # " + ESC + "\n    return a - b\n",
    difficulty="easy", tags=("t" + ESC,), source="src" + ESC,
    metadata={"attempts": ["def add(a, b):  # " + ESC + "\n    return 0\n"]},
)


@pytest.fixture
def hostile_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(HOSTILE.to_dict()) + "\n")
    return path


def _clean(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    for stream in (out, err):
        assert "\x1b" not in stream and "\x07" not in stream
    return out


def test_tasks_list_escapes_task_text(hostile_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["tasks", "list", str(hostile_file)])
    assert "\\x1b" in _clean(capsys)


def test_tasks_show_escapes_task_text(hostile_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "show", "add" + ESC, "--tasks", str(hostile_file)]) == 0
    assert "\\x1b" in _clean(capsys)


def test_tasks_validate_escapes_task_and_failure_text(
        hostile_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["tasks", "validate", str(hostile_file), "--no-progress"])
    assert "\\x1b" in _clean(capsys)


def test_check_escapes_task_text_and_the_candidates_messages(
        hostile_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answer = tmp_path / "answer.py"
    answer.write_text(f"def add(a, b):\n    raise ValueError({ESC!r})\n")
    main(["check", str(answer), "--task", "add" + ESC, "--tasks", str(hostile_file)])
    assert "\\x1b" in _clean(capsys)


def test_errors_that_quote_task_text_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({**HOSTILE.to_dict(), "difficulty": "easy" + ESC}) + "\n")
    assert main(["tasks", "show", "add", "--tasks", str(path)]) != 0
    _clean(capsys)
