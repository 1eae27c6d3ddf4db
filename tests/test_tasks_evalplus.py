"""EvalPlus's augmented suites (HumanEval+, MBPP+) loaded from a local copy: inputs become checks
with the canonical solution's outputs, and the added inputs catch what the base ones miss.

tests/data/evalplus_sample.jsonl is in EvalPlus's release format: HumanEval/0 and HumanEval/2
(prompts and canonical solutions from HumanEval) and an MBPP+-style record that needs its
``test_imports``; base and plus inputs written for these tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv.envs.coding import CodingEnv
from agentenv.errors import DatasetUnavailable, TaskFormatError
from agentenv.tasks import Task, load_tasks

DATA = Path(__file__).parent / "data" / "evalplus_sample.jsonl"


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {t.name: t for t in load_tasks("evalplus", path=str(DATA))}


def reward(task: Task, code: str) -> float:
    env = CodingEnv(tasks=[task], timeout=10.0)
    env.reset(task_index=0)
    _, value, _, _ = env.step(f"```python\n{code}```\n")
    return float(value)


# adjacent pairs only: right on every base input of HumanEval/0, wrong on a plus one
ADJACENT_ONLY = '''def has_close_elements(numbers, threshold):
    return any(abs(a - b) < threshold for a, b in zip(numbers, numbers[1:]))
'''


def test_records_become_tasks_with_one_check_per_input(tasks: dict[str, Task]) -> None:
    assert list(tasks) == ["HumanEval/0", "HumanEval/2", "Mbpp/3"]
    first = tasks["HumanEval/0"]
    assert first.source == "humaneval+" and tasks["Mbpp/3"].source == "mbpp+"
    assert len(first.checks) == 6 and first.metadata["base_checks"] == 3
    assert first.checks[3] == "assert has_close_elements([1.0, 5.0, 1.2], 0.5) == True"
    assert first.visible_checks == (first.checks[0],)
    assert first.reference_solution is not None and first.reference_solution.startswith(first.prompt)


def test_the_canonical_solution_passes_every_check(tasks: dict[str, Task]) -> None:
    for task in tasks.values():
        assert task.reference_solution is not None
        assert reward(task, task.reference_solution) == 1.0, task.name


def test_the_plus_inputs_catch_a_solution_the_base_inputs_pass(tasks: dict[str, Task]) -> None:
    base = {t.name: t for t in load_tasks("evalplus", path=str(DATA), suite="base")}
    assert len(base["HumanEval/0"].checks) == 3
    assert reward(base["HumanEval/0"], ADJACENT_ONLY) == 1.0
    assert reward(tasks["HumanEval/0"], ADJACENT_ONLY) < 1.0


def test_float_outputs_compare_within_evalplus_tolerance(tasks: dict[str, Task]) -> None:
    truncate = tasks["HumanEval/2"]
    assert truncate.float_tolerance == 1e-6  # atol 0 and float outputs: EvalPlus's 1e-6
    assert tasks["HumanEval/0"].float_tolerance is None
    assert reward(truncate, "def truncate_number(number):\n    return number - int(number)\n") == 1.0
    assert reward(truncate, "def truncate_number(number):\n    return round(number % 1.0, 2)\n") < 1.0


def test_test_imports_are_setup_and_inputs_the_reference_refuses_are_left_out(
        tasks: dict[str, Task]) -> None:
    prime = tasks["Mbpp/3"]
    assert prime.setup_code == "import math\n"
    assert prime.metadata["inputs_left_out"] == 1  # is_not_prime(0) raises in the reference
    assert len(prime.checks) == 7 and not any("is_not_prime(0)" in c for c in prime.checks)


def test_the_path_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTENV_EVALPLUS_PATH", str(DATA))
    assert len(load_tasks("evalplus", limit=1)) == 1


def test_without_a_local_copy_the_error_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTENV_EVALPLUS_PATH", raising=False)
    with pytest.raises(DatasetUnavailable, match="--data"):
        load_tasks("evalplus")


def test_malformed_records_name_the_task_and_field(tmp_path: Path) -> None:
    record = json.loads(DATA.read_text().splitlines()[0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({k: v for k, v in record.items() if k != "entry_point"}) + "\n")
    with pytest.raises(TaskFormatError, match="entry_point") as info:
        load_tasks("evalplus", path=str(bad))
    assert "HumanEval/0" in str(info.value)
    bad.write_text(json.dumps({**record, "canonical_solution": "    return undefined_name(\n"}) + "\n")
    with pytest.raises(TaskFormatError, match="canonical"):
        load_tasks("evalplus", path=str(bad))
