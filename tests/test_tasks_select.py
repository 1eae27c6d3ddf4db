"""One task chosen by index or by name, validated in one place."""

from __future__ import annotations

import pytest

from agentenv.errors import ConfigError
from agentenv.tasks.builtin import builtin_tasks
from agentenv.tasks.schema import decode_checks
from agentenv.tasks.select import index_of, task_index

TASKS = builtin_tasks()[:3]


@pytest.mark.parametrize("bad", [3, -1, True, 1.0, "0", None])
def test_an_index_outside_the_set_or_not_an_int_says_the_range(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"task_index must be an int in \[0, 3\)"):
        task_index(TASKS, bad)


def test_negative_indexes_only_when_asked() -> None:
    assert task_index(TASKS, -1, negative=True) == -1
    with pytest.raises(ConfigError):
        task_index(TASKS, -4, negative=True)


def test_a_name_is_found_or_a_close_one_suggested() -> None:
    assert index_of(TASKS, TASKS[1].name) == 1
    with pytest.raises(ConfigError, match=f"Did you mean '{TASKS[0].name}'"):
        index_of(TASKS, TASKS[0].name + "x")
    with pytest.raises(ConfigError, match="in builtin; see `agentenv tasks list --tasks builtin`"):
        index_of(TASKS, "zzzzzzzz", where="builtin")


def test_checks_decode_from_json_text_lists_and_python() -> None:
    assert decode_checks('["assert f() == 1"]') == ("assert f() == 1",)
    assert decode_checks("assert f() == 1") == ("assert f() == 1",)
    assert decode_checks(None) is None
    with pytest.raises(ConfigError, match="a row's checks must be"):
        decode_checks(3)
