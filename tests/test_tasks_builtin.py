"""The builtin task set: its shape, its data quality, and every solution scored in the sandbox."""

from __future__ import annotations

import ast
import itertools
import re
import sys
from collections import Counter

import pytest

import agentenv
from agentenv.grading import RunResult, run_tests
from agentenv.tasks import DIFFICULTIES, Task, load_tasks
from agentenv.tasks.builtin import builtin_tasks

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from agentenv._resources import data_dir

TASKS = builtin_tasks()
BY_NAME = {t.name: t for t in TASKS}
TIMEOUT = 10.0  # generous: the machine is shared; every solution here finishes in milliseconds


def score(task: Task, code: str) -> RunResult:
    return run_tests(code, task.checks, timeout=TIMEOUT, setup_code=task.setup_code,
                     float_tolerance=task.float_tolerance)


def by_task(tasks: list[Task]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("task", tasks, ids=[t.name for t in tasks])


ATTEMPTS = [(t, i, code) for t in TASKS for i, code in enumerate(t.metadata.get("attempts", []))]


def test_the_builtin_set_holds_at_least_24_tasks_with_add_first() -> None:
    """There are at least 24 builtin tasks and task 0 is the walk-through's `add`."""
    assert len(TASKS) >= 24
    assert TASKS[0].name == "add"
    assert TASKS[0].entry_point == "add"


def test_the_walk_through_tasks_are_present_with_parse_roman_hard() -> None:
    """`add`, `is_palindrome` and `parse_roman` exist, and `parse_roman` is a hard task."""
    assert {"add", "is_palindrome", "parse_roman"} <= set(BY_NAME)
    assert BY_NAME["parse_roman"].difficulty == "hard"


def test_difficulties_are_spread_across_easy_medium_and_hard() -> None:
    """Every task has a difficulty and each level holds at least a quarter of the set."""
    counts = Counter(t.difficulty for t in TASKS)
    assert set(counts) == set(DIFFICULTIES)
    assert all(counts[d] >= len(TASKS) // 4 for d in DIFFICULTIES), counts


def test_agentenv_tasks_is_the_builtin_loader_output() -> None:
    """`agentenv.TASKS` and `load_tasks("builtin")` give the same tasks in the same order."""
    assert [t.name for t in agentenv.TASKS] == [t.name for t in load_tasks("builtin")]
    assert load_tasks("builtin") == agentenv.TASKS


def test_task_files_are_numbered_in_order_and_named_after_their_task() -> None:
    """File NNN_name.toml holds task `name`, and the numbers run 000, 001, ... without gaps."""
    files = sorted((data_dir("tasks") / "builtin").glob("*.toml"))
    assert len(files) == len(TASKS)
    for i, (path, task) in enumerate(zip(files, TASKS, strict=True)):
        assert path.name == f"{i:03d}_{task.name}.toml"
        assert tomllib.loads(path.read_text(encoding="utf-8"))["name"] == task.name


@by_task(TASKS)
def test_every_task_is_complete(task: Task) -> None:
    """Each task has >= 5 hidden checks, 1-2 visible ones, tags, a reference, an attempt, builtin source."""
    assert len(task.checks) >= 5
    assert 1 <= len(task.visible_checks) <= 2
    assert task.tags
    assert task.reference_solution
    assert task.metadata.get("attempts")
    assert task.source == "builtin"
    assert len(set(task.checks)) == len(task.checks), "duplicate hidden checks"


@by_task(TASKS)
def test_every_prompt_states_the_signature_and_shows_its_visible_examples(task: Task) -> None:
    """The prompt names the entry point as a call, and each visible check is also a hidden check."""
    assert re.search(rf"`{task.entry_point}\(", task.prompt), "prompt must state the signature"
    for check in task.visible_checks:
        assert check in task.checks


@by_task(TASKS)
def test_checks_compare_calls_with_plain_values(task: Task) -> None:
    """Every one-line check is `assert <call> == <plain literal>`, so the trusted side can grade it."""
    for check in task.checks:
        assert isinstance(check, str)
        tree = ast.parse(check)
        if len(tree.body) > 1:  # a multi-statement check (e.g. "the input is not modified")
            continue
        node = tree.body[0]
        assert isinstance(node, ast.Assert), check
        assert isinstance(node.test, ast.Compare) and isinstance(node.test.ops[0], ast.Eq), check
        ast.literal_eval(node.test.comparators[0])  # raises if the expected value is not plain
        assert task.entry_point in ast.unparse(node.test.left), check


@by_task(TASKS)
def test_every_reference_solution_scores_one(task: Task) -> None:
    """The reference passes every hidden and every visible check."""
    assert task.reference_solution is not None
    result = score(task, task.reference_solution)
    assert result.fraction == 1.0, result.failures
    visible = run_tests(task.reference_solution, task.visible_checks, timeout=TIMEOUT,
                        float_tolerance=task.float_tolerance)
    assert visible.fraction == 1.0, visible.failures


@by_task(TASKS)
def test_an_obviously_wrong_solution_scores_less_than_the_reference(task: Task) -> None:
    """A function that ignores its input and returns None fails at least one check."""
    wrong = f"def {task.entry_point}(*args, **kwargs):\n    return None\n"
    assert score(task, wrong).fraction < 1.0


@pytest.mark.parametrize(("task", "index", "code"), ATTEMPTS,
                         ids=[f"{t.name}-{i}" for t, i, _ in ATTEMPTS])
def test_every_scripted_attempt_earns_partial_credit(task: Task, index: int, code: str) -> None:
    """Each buggy attempt passes some checks but not all, so a multi-turn run shows revision."""
    result = score(task, code)
    assert 0.0 < result.fraction < 1.0, (result.fraction, result.failures)
    assert not result.timed_out


def test_later_scripted_attempts_never_score_lower_than_earlier_ones() -> None:
    """Tasks with several attempts replay them from worse to better."""
    for task in TASKS:
        attempts = task.metadata["attempts"]
        if len(attempts) > 1:
            scores = [score(task, code).fraction for code in attempts]
            assert scores == sorted(scores), (task.name, scores)


def test_is_palindrome_reward_demo_climbs_from_zero_to_one() -> None:
    """The four walk-through attempts score strictly increasing fractions, from 0.0 to 1.0."""
    task = BY_NAME["is_palindrome"]
    demo = task.metadata["reward_demo"]
    assert len(demo) == 4
    fractions = [score(task, code).fraction for code in demo]
    assert fractions[0] == 0.0
    assert fractions[-1] == 1.0
    assert all(a < b for a, b in itertools.pairwise(fractions)), fractions


def test_a_naive_palindrome_check_earns_partial_credit() -> None:
    """`s == s[::-1]` ignores the case and punctuation rules and so passes only some checks."""
    task = BY_NAME["is_palindrome"]
    fraction = score(task, "def is_palindrome(s):\n    return s == s[::-1]\n").fraction
    assert 0.0 < fraction < 1.0


def test_special_casing_the_prompt_example_earns_partial_not_full_credit() -> None:
    """Hard-coding the visible example passes it, yet the hidden checks catch most of the hack."""
    task = BY_NAME["is_palindrome"]
    hack = task.metadata["special_case"]
    visible = run_tests(hack, task.visible_checks, timeout=TIMEOUT)
    assert visible.fraction == 1.0
    assert 0.0 < score(task, hack).fraction < 0.5
