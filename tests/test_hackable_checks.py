"""`agentenv tasks validate` lists checks only the candidate's own ``__eq__`` can decide.

``assert Stack() == Stack()`` or ``assert f(x) == g(y)``: both sides are made by the candidate
and neither is trusted data, so an always-equal class passes them, in Python and here alike
(Python's verdict wins). Such checks are flagged, with the task, the check and why; checks with
a trusted expected value (a literal, task setup data, a value the check computed from
builtins) or that compare builtin data made from candidate values (``len(...)``, ``str(...)``)
are not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv.cli import main
from agentenv.grading.hackable import hackable_checks
from agentenv.tasks import Task

STACK = """class Stack:
    def __init__(self):
        self.items = []
    def push(self, x):
        self.items.append(x)
    def __len__(self):
        return len(self.items)
    def __eq__(self, other):
        return isinstance(other, Stack) and self.items == other.items
"""

HACKABLE = (
    "assert Stack() == Stack()",
    "s = Stack(); s.push(1); t = Stack(); t.push(1); assert s == t",
    "assert make(1) != make(2)",
    "a = make(1)\nb = make(1)\nassert a == b",
)
DECIDABLE = (
    "assert len(Stack()) == 0",
    "assert len(Stack()) == len(Stack())",
    "assert str(make(1)) == str(make(1))",
    "assert make(2) == 4",
    "assert make(2) == EXPECTED",
    "for i in range(10):\n    assert make(i) == i * i",
    "xs = [1, 2]\nassert make(xs) == xs",
    "def _check():\n    from random import choice\n    s = ''.join(choice('ab') for _ in range(5))\n"
    "    assert make(s) == s\n_check()",
)


def _task(checks: tuple[str, ...]) -> Task:
    return Task(name="stack_eq", prompt="Write `Stack` and `make`.", entry_point="Stack",
                checks=checks, setup_code="EXPECTED = 4",
                reference_solution=STACK + "def make(x):\n    return x * x if isinstance(x, int) else x\n")


@pytest.mark.parametrize("check", HACKABLE)
def test_a_comparison_of_two_candidate_values_is_flagged(check: str) -> None:
    (found,) = hackable_checks(_task((check,)))
    assert found.task == "stack_eq" and found.check == check
    assert "__eq__" in found.why and " vs " in found.comparison


@pytest.mark.parametrize("check", DECIDABLE)
def test_a_check_with_trusted_data_on_one_side_is_not(check: str) -> None:
    assert hackable_checks(_task((check,))) == []


def test_visible_checks_are_examined_too() -> None:
    task = _task(("assert make(2) == 4",))
    task = Task.from_dict({**task.to_dict(), "visible_checks": ["assert Stack() == Stack()"]})
    assert [h.check for h in hackable_checks(task)] == ["assert Stack() == Stack()"]


def test_tasks_validate_lists_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(_task(("assert Stack() == Stack()", "assert make(2) == 4")).to_dict())
                    + "\n")
    code = main(["tasks", "validate", str(path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0  # a warning: the reference passes, and Python's verdict is what grading gives
    assert "1 hackable check" in out and "stack_eq" in out and "Stack() == Stack()" in out
    assert "make(2) == 4" not in out.split("hackable check")[1]
