"""Checks are compiled when a task is made: a check that cannot run is an error at load naming
the task, the check and the line (not a failure charged to every policy), and the error lists
every problem of the task; `tasks validate` reports every problem of every task file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv.cli import main
from agentenv.errors import TaskFormatError
from agentenv.tasks import Task, load_tasks

GOOD = {"name": "add", "prompt": "Write `add(a, b)`.", "entry_point": "add",
        "checks": ["assert add(1, 2) == 3"], "reference_solution": "def add(a, b):\n    return a + b\n"}


def toml_task(name: str, checks: list[str], extra: str = "") -> str:
    listed = ",\n".join(f"  {json.dumps(c)}" for c in checks)
    return (f'name = "{name}"\nprompt = "Write `{name}(x)`."\nentry_point = "{name}"\n{extra}'
            f'reference_solution = "def {name}(x):\\n    return x\\n"\nchecks = [\n{listed},\n]\n')


def test_a_check_that_does_not_compile_is_refused_naming_task_check_and_line() -> None:
    with pytest.raises(TaskFormatError) as caught:
        Task(name="add", prompt="p", entry_point="add",
             checks=("assert add(1, 2) == 3", "x = 1\nassert add(1, 2) == = 3"))
    message = str(caught.value)
    assert "task 'add'" in message and "checks[1] does not compile" in message
    assert "line 2" in message and "assert add(1, 2) == = 3" in message
    assert caught.value.field == "checks"


def test_visible_checks_setup_code_and_prelude_are_compiled_too() -> None:
    for field, value in (("visible_checks", ("assert add(1, 2) ==",)), ("setup_code", "def helper(:\n"),
                         ("prelude", "import (")):
        data = {**GOOD, field: list(value) if isinstance(value, tuple) else value}
        with pytest.raises(TaskFormatError, match=f"field '{field}'.*does not compile"):
            Task.from_dict(data)


def test_every_problem_of_a_task_is_reported_not_only_the_first() -> None:
    data = {**GOOD, "checks": ["assert add(1, 2) == 3", "assert add(1,", "assert add(2, 2) === 4"],
            "difficulty": "impossible", "colour": "red"}
    with pytest.raises(TaskFormatError) as caught:
        Task.from_dict(data, path="tasks.jsonl")
    problems = caught.value.problems
    assert [field for field, _ in problems] == ["colour", "checks", "checks", "difficulty"]
    assert "checks[1]" in problems[1][1] and "checks[2]" in problems[2][1]
    assert "4 problems" in str(caught.value)
    lines = caught.value.lines()
    assert len(lines) == 4 and all(line.startswith("file tasks.jsonl, task 'add', field ") for line in lines)


def test_checks_that_compile_but_fail_at_run_time_load() -> None:
    """Only what cannot compile is refused: a NameError or a wrong value is the policy's affair."""
    task = Task.from_dict({**GOOD, "checks": ["assert add(1, 2) == 4", "assert undefined_name(1)",
                                              "assert add(*[1, 2]) == 3"]})
    assert len(task.checks) == 3


def test_every_shipped_task_set_compiles() -> None:
    """No false alarm on the builtin set and HumanEval (every check compiles under this Python)."""
    assert load_tasks("builtin") and len(load_tasks("humaneval")) == 164


def test_a_toml_task_file_names_the_line_of_the_broken_check(tmp_path: Path) -> None:
    path = tmp_path / "000_add.toml"
    path.write_text(toml_task("add", ["assert add(1) == 1", "assert add(2) == = 2"]))
    with pytest.raises(TaskFormatError) as caught:
        load_tasks(str(path))
    message = str(caught.value)
    assert str(path) in message and "task 'add'" in message and "checks[1]" in message
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "== = 2" in text)
    assert f"line {line} of the file" in message


def test_a_jsonl_task_with_a_broken_check_is_refused_at_load(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "name": "add2", "checks": ["assert add(1,"]}) + "\n")
    with pytest.raises(TaskFormatError, match=r"task 'add2'.*checks\[0\] does not compile"):
        load_tasks(str(path))


def test_run_refuses_a_task_set_with_a_broken_check_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "000_twice.toml").write_text(toml_task("twice", ["assert twice(1) == = 1"]))
    code = main(["run", "--tasks", str(tmp_path), "--policy", "reference", "--out", str(tmp_path / "run"),
                 "--no-progress"])
    _out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert "task 'twice'" in lines[0] and "checks[0] does not compile" in lines[0]
    assert not (tmp_path / "run" / "trajectories.jsonl").exists()


def test_tasks_validate_reports_every_problem_of_every_file_and_still_runs_the_good_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "000_ok.toml").write_text(toml_task("ok", ["assert ok(1) == 1"]))
    (tmp_path / "001_two.toml").write_text(toml_task("two", ["assert two(1) ==", "assert two(2) == 2",
                                                             "assert two(3 == 3"], 'difficulty = "hardest"\n'))
    (tmp_path / "002_one.toml").write_text(toml_task("one", ["assert one(1) == = 1"]))
    code = main(["tasks", "validate", str(tmp_path), "--no-progress"])
    out, _err = capsys.readouterr()
    assert code == 1
    assert "4 problems in the task files" in out
    problem_lines = [line for line in out.splitlines() if "does not compile" in line or "difficulty" in line]
    assert sum("task 'two'" in line for line in problem_lines) == 3
    assert sum("task 'one'" in line for line in problem_lines) == 1
    assert "1 of 1 reference solution(s) pass" in out  # the good file was still validated


def test_tasks_validate_reports_every_broken_record_of_a_jsonl_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tasks.jsonl"
    rows = [GOOD, {**GOOD, "name": "bad1", "checks": ["assert add(1,"]},
            {**GOOD, "name": "bad2", "checks": ["assert add(1, 2) == 3", "assert add(2 2) == 4"], "difficulty": "?"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code = main(["tasks", "validate", str(path), "--no-progress"])
    out, _err = capsys.readouterr()
    assert code == 1 and "3 problems in the task files" in out
    assert "task 'bad1'" in out and out.count("task 'bad2'") == 2
    assert "1 of 1 reference solution(s) pass" in out
    with pytest.raises(TaskFormatError, match="task 'bad1'"):  # loading for a run still refuses
        load_tasks(str(path))


def test_load_tasks_collects_problems_when_asked(tmp_path: Path) -> None:
    (tmp_path / "000_ok.toml").write_text(toml_task("ok", ["assert ok(1) == 1"]))
    (tmp_path / "001_bad.toml").write_text(toml_task("bad", ["assert bad(1) =="]))
    problems: list[str] = []
    tasks = load_tasks(str(tmp_path), problems=problems)
    assert [t.name for t in tasks] == ["ok"]
    assert len(problems) == 1 and "task 'bad'" in problems[0] and "checks[0]" in problems[0]


def test_generated_checks_past_the_limit_are_left_to_the_sandbox() -> None:
    """A check of generated test data longer than the limit is not compiled at load (a
    megabyte of literals takes a second to compile); a hand-written one always is."""
    from agentenv.tasks.schema import COMPILE_AT_LOAD_LIMIT, syntax_problem

    huge = "assert add(*" + "[" + "1, " * COMPILE_AT_LOAD_LIMIT + "]) =="
    assert syntax_problem(huge) is None
    assert syntax_problem(huge[:1000] + "]) ==") is not None
