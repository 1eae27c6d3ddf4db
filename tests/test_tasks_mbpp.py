"""The MBPP loader on a ten-problem sample of the real file (tests/data/mbpp_sample.jsonl)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agentenv.errors import ConfigError, DatasetUnavailable, TaskFormatError
from agentenv.grading import RunResult, run_tests
from agentenv.tasks import Task, load_tasks, mbpp

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "mbpp_sample.jsonl"
TIMEOUT = 10.0  # generous: the machine is shared; each reference finishes in milliseconds
# MBPP 341 asserts an order for tuple(set) that CPython does not produce: it fails everywhere.
BRITTLE = {"mbpp/341"}


def score(task: Task, code: str) -> RunResult:
    return run_tests(code, task.checks, timeout=TIMEOUT, setup_code=task.setup_code,
                     float_tolerance=task.float_tolerance)


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {t.name: t for t in load_tasks("mbpp", path=SAMPLE)}


def test_sample_loads_every_problem_in_task_id_order(tasks: dict[str, Task]) -> None:
    """All ten sample problems load, named mbpp/<task_id>, sorted by task id."""
    assert list(tasks) == [f"mbpp/{i}" for i in (1, 2, 3, 11, 16, 126, 341, 367, 601, 927)]
    assert all(t.source == "mbpp" for t in tasks.values())


def test_entry_point_is_the_function_the_tests_call(tasks: dict[str, Task]) -> None:
    """The entry point is inferred from the asserts, including a redefined builtin and a helper class."""
    assert tasks["mbpp/1"].entry_point == "min_cost"
    assert tasks["mbpp/126"].entry_point == "sum"  # the solution redefines the builtin sum
    assert tasks["mbpp/601"].entry_point == "max_chain_length"  # not the Pair class it also calls


def test_prompt_states_the_task_and_shows_only_the_first_test(tasks: dict[str, Task]) -> None:
    """The prompt is the text plus the first assert; the other asserts stay hidden."""
    task = tasks["mbpp/2"]
    assert task.prompt.startswith("Write a function to find the similar elements")
    assert task.checks[0] in task.prompt
    assert all(check not in task.prompt for check in task.checks[1:])
    assert task.visible_checks == (task.checks[0],)


def test_checks_are_the_asserts_and_challenge_tests_are_opt_in(tasks: dict[str, Task]) -> None:
    """test_list becomes the checks; challenge_test_list joins only with include_challenge=True."""
    record = next(json.loads(line) for line in SAMPLE.open() if json.loads(line)["task_id"] == 11)
    assert list(tasks["mbpp/11"].checks) == record["test_list"]
    with_challenge = {t.name: t for t in load_tasks("mbpp", path=SAMPLE, include_challenge=True)}
    assert list(with_challenge["mbpp/11"].checks) == record["test_list"] + record["challenge_test_list"]
    assert tasks["mbpp/11"].metadata["challenge_tests"] == 2


def test_reference_solution_is_the_code_with_unix_line_ends(tasks: dict[str, Task]) -> None:
    """The reference is MBPP's code with its Windows line ends normalised."""
    reference = tasks["mbpp/1"].reference_solution
    assert reference is not None and "\r" not in reference
    assert reference.startswith("R = 3\nC = 3\ndef min_cost(cost, m, n):")


def test_setup_code_runs_after_the_solution_so_it_can_use_its_classes(tasks: dict[str, Task]) -> None:
    """MBPP 367 builds its tree from the Node class the solution defines; its reference scores 1.0."""
    task = tasks["mbpp/367"]
    assert "root = Node(1)" in task.setup_code
    assert "class Node" in (task.reference_solution or "")
    result = score(task, task.reference_solution or "")
    assert result.all_passed, result.failures


@pytest.mark.parametrize("name", ["mbpp/1", "mbpp/2", "mbpp/3", "mbpp/11", "mbpp/16", "mbpp/126",
                                  "mbpp/367", "mbpp/601", "mbpp/927"])
def test_reference_solutions_score_one_in_the_sandbox(tasks: dict[str, Task], name: str) -> None:
    """Each sound reference of the sample passes all its checks through run_tests."""
    task = tasks[name]
    result = score(task, task.reference_solution or "")
    assert result.fraction == 1.0, result.failures


def test_known_brittle_reference_fails_exactly_its_set_order_assert(tasks: dict[str, Task]) -> None:
    """MBPP 341's reference fails only the assert that depends on set iteration order."""
    task = tasks["mbpp/341"]
    result = score(task, task.reference_solution or "")
    assert result.passed == 2 and result.failed_indices == (2,)
    assert "{12, 13, 14, 15, 16}" in str(task.checks[2])


def test_a_wrong_solution_scores_below_one(tasks: dict[str, Task]) -> None:
    """A solution that returns the wrong value fails the checks: the mapping is not vacuous."""
    task = tasks["mbpp/1"]
    result = score(task, "def min_cost(cost, m, n):\n    return 0\n")
    assert result.passed == 0 and result.total == 3


def test_split_selects_the_standard_task_id_range() -> None:
    """split='test' keeps task ids 11..510, split='train' 601..974."""
    assert [t.name for t in load_tasks("mbpp", path=SAMPLE, split="test")] == \
        ["mbpp/11", "mbpp/16", "mbpp/126", "mbpp/341", "mbpp/367"]
    assert [t.name for t in load_tasks("mbpp", path=SAMPLE, split="train")] == ["mbpp/601", "mbpp/927"]
    assert mbpp.split_of(500) == "test" and mbpp.split_of(975) is None


def test_unknown_split_is_a_config_error() -> None:
    """A split name MBPP does not have raises ConfigError listing the real ones."""
    with pytest.raises(ConfigError, match="validation"):
        load_tasks("mbpp", path=SAMPLE, split="dev")


def test_env_var_names_the_local_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """With $AGENTENV_MBPP_PATH set, load_tasks('mbpp') reads that file."""
    monkeypatch.setenv(mbpp.ENV_VAR, str(SAMPLE))
    assert len(load_tasks("mbpp")) == 10


def test_a_benchmark_file_loads_by_path_without_naming_the_loader() -> None:
    """load_tasks('.../mbpp_sample.jsonl') recognises MBPP records and maps them the same way."""
    assert load_tasks(SAMPLE) == load_tasks("mbpp", path=SAMPLE)


def test_sanitized_layout_with_prompt_and_test_imports(tmp_path: Path) -> None:
    """The sanitized variant (prompt, test_imports) loads; its imports run as setup code."""
    record = {"source_file": "x", "task_id": 700, "prompt": "Write a function to take a square root.",
              "code": "import math\ndef root(x):\n    return math.sqrt(x)\n",
              "test_imports": ["import math"], "test_list": ["assert math.isclose(root(4), 2.0)"]}
    path = tmp_path / "sanitized.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (task,) = load_tasks("mbpp", path=path)
    assert task.entry_point == "root" and task.setup_code == "import math\n"
    assert score(task, task.reference_solution or "").all_passed


def test_missing_path_is_dataset_unavailable(tmp_path: Path) -> None:
    """A path that does not exist raises DatasetUnavailable naming it."""
    with pytest.raises(DatasetUnavailable, match="does not exist"):
        load_tasks("mbpp", path=tmp_path / "nope.jsonl")


def test_malformed_line_names_the_file_and_line(tmp_path: Path) -> None:
    """A broken JSON line raises TaskFormatError with the file and the line number."""
    path = tmp_path / "broken.jsonl"
    path.write_text(SAMPLE.read_text().splitlines()[0] + "\n{not json\n")
    with pytest.raises(TaskFormatError, match=r"broken\.jsonl.*line 2"):
        load_tasks("mbpp", path=path)


def test_record_without_tests_names_the_field(tmp_path: Path) -> None:
    """An MBPP record with an empty test_list raises TaskFormatError naming test_list."""
    path = tmp_path / "empty.jsonl"
    path.write_text(json.dumps({"task_id": 5, "text": "t", "code": "", "test_list": []}) + "\n")
    with pytest.raises(TaskFormatError, match="test_list"):
        load_tasks("mbpp", path=path)


def test_offline_without_a_local_copy_fails_fast_saying_how_to_supply_one(unreachable_hub: None) -> None:
    """No path, no env var, no Hub: DatasetUnavailable from the reachability probe (no download, no retries), naming path= and the env var."""
    with pytest.raises(DatasetUnavailable) as info:
        load_tasks("mbpp")
    # fast: the reachability probe refused it, before any download and its retries
    assert "not reachable from here" in str(info.value), info.value
    message = str(info.value)
    assert "path=" in message and mbpp.ENV_VAR in message


def test_offline_error_is_clear_when_the_hub_probe_fails(unreachable_hub: None) -> None:
    """With datasets installed, the error says the Hub is unreachable and names the endpoint."""
    pytest.importorskip("datasets")
    with pytest.raises(DatasetUnavailable, match=r"not reachable.*127\.0\.0\.1"):
        load_tasks("mbpp")


def test_missing_hf_extra_is_reported_with_the_install_command(
        unreachable_hub: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the datasets package, the error names the hf extra and the local-copy options."""
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(DatasetUnavailable, match=r"agentenv-coding\[hf\].*path="):
        load_tasks("mbpp")
