"""A task's own time limit: read from benchmark rows, kept by Task, used by the graders."""

from __future__ import annotations

import pytest

from agentenv.errors import TaskFormatError
from agentenv.grading.scoring import score
from agentenv.tasks import StdioCase, Task
from agentenv.tasks.apps import task_from_record, time_limit_seconds


@pytest.mark.parametrize(("raw", "seconds"), [
    (2, 2.0), (1.5, 1.5), ("2 seconds", 2.0), ("1.5 s", 1.5), ({"seconds": 3, "nanos": 500000000}, 3.5),
    (None, None), ("", None), ("fast", None), (0, None), (-1, None), (True, None), ({"seconds": "x"}, None),
])
def test_time_limits_in_the_forms_datasets_state_them(raw: object, seconds: float | None) -> None:
    assert time_limit_seconds(raw) == seconds


def test_an_apps_stdio_row_keeps_its_time_limit() -> None:
    row = {"problem_id": 7, "question": "Print n twice.", "difficulty": "interview",
           "input_output": '{"inputs": ["2\\n"], "outputs": ["4\\n"]}', "time_limit": "8 seconds"}
    task = task_from_record(row)
    assert task.time_limit == 8.0
    assert Task.from_dict(task.to_dict()).time_limit == 8.0


def test_a_bad_time_limit_is_refused_naming_the_field() -> None:
    with pytest.raises(TaskFormatError, match="time_limit"):
        Task(name="t", prompt="p", entry_point="f", checks=("assert f()",), time_limit=-2)


BURN = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.8:\n    pass\n"
        "print(input())\n")


def test_graders_use_the_tasks_limit_where_it_is_longer_than_the_environments() -> None:
    base = Task(name="slow", prompt="echo", entry_point="main", checks=(StdioCase("1\n", "1\n"),))
    assert score(base, BURN, timeout=0.3).hidden.passed == 0
    longer = Task(name="slow", prompt="echo", entry_point="main", checks=(StdioCase("1\n", "1\n"),),
                  time_limit=3.0)
    assert score(longer, BURN, timeout=0.3).hidden.passed == 1
    shorter = Task(name="slow", prompt="echo", entry_point="main", checks=(StdioCase("1\n", "1\n"),),
                   time_limit=0.1)
    assert score(shorter, BURN, timeout=3.0).hidden.passed == 1  # a C++ limit is not held against Python
