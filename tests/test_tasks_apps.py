"""The APPS/TACO/CodeContests loader on a small sample in each layout (tests/data/apps_sample.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.errors import ConfigError, DatasetUnavailable, TaskFormatError
from agentenv.grading import RunResult, run_tests
from agentenv.tasks import StdioCase, Task, apps, load_tasks
from agentenv.tasks.jsonl import STDIO_ENTRY_POINT

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "apps_sample.jsonl"
TIMEOUT = 10.0
ROWS = [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def score(task: Task, code: str) -> RunResult:
    return run_tests(code, task.checks, timeout=TIMEOUT, setup_code=task.setup_code,
                     float_tolerance=task.float_tolerance)


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {t.name: t for t in load_tasks("apps", path=SAMPLE)}


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rows_with_tests_load_and_rows_without_are_skipped(tasks: dict[str, Task]) -> None:
    """Every row with tests becomes a task; problem 5 (empty input_output) is skipped."""
    assert sorted(tasks) == sorted(["apps/0", "apps/1", "apps/2", "apps/3", "apps/4", "apps/6", "apps/7",
                                    "code_contests/1234_A. Tiny Sum"])


def test_stdio_problems_become_stdio_cases(tasks: dict[str, Task]) -> None:
    """Without fn_name each input/output pair is a StdioCase and the entry point is the program."""
    task = tasks["apps/0"]
    assert task.entry_point == STDIO_ENTRY_POINT
    assert task.checks == (StdioCase("3\n1 2 3\n", "6\n", "apps"), StdioCase("1\n-5\n", "-5\n", "apps"))
    assert task.visible_checks == task.checks[:1]


def test_inputs_stored_as_lists_of_lines_are_joined(tasks: dict[str, Task]) -> None:
    """TACO's list-of-lines inputs and outputs are joined with newlines."""
    assert tasks["apps/3"].checks[0] == StdioCase("2\n3", "6\n5", "apps")


def test_call_based_outputs_wrapped_in_one_element_lists_are_unwrapped(tasks: dict[str, Task]) -> None:
    """APPS stores expected values as [value]; the checks compare with the value itself."""
    assert tasks["apps/1"].entry_point == "digital_root"
    assert tasks["apps/1"].checks == ("assert digital_root(16) == 7", "assert digital_root(942) == 6",
                                      "assert digital_root(0) == 0")
    assert tasks["apps/2"].checks == ("assert evens_up_to(5) == [2, 4]", "assert evens_up_to(1) == []")


def test_unwrapping_can_be_turned_off() -> None:
    """unwrap_outputs=False keeps the stored expected values as they are."""
    by_name = {t.name: t for t in load_tasks("apps", path=SAMPLE, unwrap_outputs=False)}
    assert by_name["apps/1"].checks[0] == "assert digital_root(16) == [7]"


def test_outputs_that_are_not_all_wrapped_stay_as_stored(tasks: dict[str, Task]) -> None:
    """A problem whose expected values are plain ints is not unwrapped."""
    assert tasks["apps/4"].checks == ("assert Solution().maxGap([1, 5, 2]) == 4",
                                      "assert Solution().maxGap([7]) == 0")


def test_leetcode_style_starter_code_calls_a_solution_instance(tasks: dict[str, Task]) -> None:
    """A starter with class Solution gives checks on Solution() and entry point Solution."""
    task = tasks["apps/4"]
    assert task.entry_point == "Solution" and task.metadata["fn_name"] == "maxGap"
    assert "class Solution:" in task.prompt


def test_difficulty_labels_map_to_three_levels(tasks: dict[str, Task]) -> None:
    """introductory/interview/competition, TACO's labels and CodeContests' enum map to easy/medium/hard."""
    got = {name: t.difficulty for name, t in tasks.items()}
    assert got == {"apps/0": "easy", "apps/1": "medium", "apps/2": "hard", "apps/3": "hard",
                   "apps/4": "easy", "apps/6": None, "apps/7": "medium",
                   "code_contests/1234_A. Tiny Sum": "easy"}
    assert tasks["apps/3"].metadata["raw_difficulty"] == "MEDIUM_HARD"


def test_tags_and_release_date_come_from_the_row(tasks: dict[str, Task]) -> None:
    """TACO's tag list (a string) becomes tags; its date becomes release_date."""
    assert tasks["apps/3"].tags == ("Math", "Greedy")
    assert tasks["apps/3"].metadata["release_date"] == "2024-10-02"
    assert tasks["code_contests/1234_A. Tiny Sum"].tags == ("math",)


def test_reference_is_the_first_python_solution(tasks: dict[str, Task]) -> None:
    """APPS' first solution is the reference; CodeContests' is its first Python 3 solution."""
    assert tasks["apps/1"].reference_solution is not None
    assert "def digital_root" in tasks["apps/1"].reference_solution
    assert tasks["code_contests/1234_A. Tiny Sum"].reference_solution == \
        "a, b = map(int, input().split())\nprint(a + b)\n"


@pytest.mark.parametrize("name", ["apps/0", "apps/1", "apps/2", "apps/3", "apps/4", "apps/6", "apps/7",
                                  "code_contests/1234_A. Tiny Sum"])
def test_reference_solutions_score_one_in_the_sandbox(tasks: dict[str, Task], name: str) -> None:
    """Each reference passes all its checks: stdio, call-based, Solution-class and float ones."""
    task = tasks[name]
    result = score(task, task.reference_solution or "")
    assert result.all_passed, result.failures


def test_a_wrong_solution_scores_below_one(tasks: dict[str, Task]) -> None:
    """A wrong call-based answer and a wrong program both fail checks."""
    assert score(tasks["apps/1"], "def digital_root(n):\n    return n % 10\n").fraction < 1.0
    assert score(tasks["apps/0"], "input()\nprint(0)\n").passed == 0


def test_float_answers_get_a_tolerance(tasks: dict[str, Task]) -> None:
    """Only the problem with float expected values gets float_tolerance."""
    assert tasks["apps/7"].float_tolerance is not None
    assert tasks["apps/1"].float_tolerance is None


def test_code_contests_public_tests_are_visible_and_generated_ones_opt_in(tasks: dict[str, Task]) -> None:
    """Public tests are visible and hidden; generated tests join only with include_generated=True."""
    task = tasks["code_contests/1234_A. Tiny Sum"]
    assert task.visible_checks == (StdioCase("1 2\n", "3\n", "code_contests"),)
    assert len(task.checks) == 3
    with_generated = {t.name: t for t in load_tasks("apps", path=SAMPLE, include_generated=True)}
    assert with_generated[task.name].checks[-1] == StdioCase("5 5\n", "10\n", "code_contests")


def test_visible_and_max_checks_options(tasks: dict[str, Task]) -> None:
    """visible=0 shows no test; max_checks caps the hidden tests."""
    by_name = {t.name: t for t in load_tasks("apps", path=SAMPLE, visible=0, max_checks=1)}
    assert by_name["apps/1"].visible_checks == () and len(by_name["apps/1"].checks) == 1
    with pytest.raises(ConfigError):
        load_tasks("apps", path=SAMPLE, max_checks=0)


def test_integer_keyed_objects_get_int_keys(tmp_path: Path) -> None:
    """JSON objects whose keys are all integers become int-keyed dicts, as APPS' grader does."""
    row = {"problem_id": 9, "difficulty": "interview", "question": "Invert a dict.",
           "starter_code": "def invert(d):\n\t", "solutions": "[]",
           "input_output": json.dumps({"fn_name": "invert", "inputs": [[{"1": 2}]], "outputs": [[{"2": 1}]]})}
    (task,) = load_tasks("apps", path=write_rows(tmp_path / "d.jsonl", [row]))
    assert task.checks == ("assert invert({1: 2}) == {2: 1}",)
    assert task.reference_solution is None


def test_folder_copy_names_tasks_by_split_and_split_selects_a_file(tmp_path: Path) -> None:
    """train.jsonl and test.jsonl both hold problem 0; names carry the split; split= reads one file."""
    write_rows(tmp_path / "train.jsonl", ROWS[:2])
    write_rows(tmp_path / "test.jsonl", ROWS[:1])
    assert sorted(t.name for t in load_tasks("apps", path=tmp_path)) == \
        ["apps/test/0", "apps/train/0", "apps/train/1"]
    assert [t.name for t in load_tasks("apps", path=tmp_path, split="test")] == ["apps/test/0"]


def test_malformed_input_output_names_the_file_line_and_field(tmp_path: Path) -> None:
    """input_output that is not JSON raises TaskFormatError with file, line and field."""
    row = dict(ROWS[0], input_output="{not json")
    with pytest.raises(TaskFormatError, match=r"bad\.jsonl line 1.*apps/0.*input_output"):
        load_tasks("apps", path=write_rows(tmp_path / "bad.jsonl", [row]))


def test_mismatched_inputs_and_outputs_are_rejected(tmp_path: Path) -> None:
    """Different numbers of inputs and outputs raise TaskFormatError."""
    row = dict(ROWS[0], input_output=json.dumps({"inputs": ["1\n"], "outputs": []}))
    with pytest.raises(TaskFormatError, match="same length"):
        load_tasks("apps", path=write_rows(tmp_path / "bad.jsonl", [row]))


def test_a_row_in_no_known_layout_is_rejected(tmp_path: Path) -> None:
    """A row with neither input_output nor CodeContests tests says which layouts are expected."""
    with pytest.raises(TaskFormatError, match="input_output"):
        load_tasks("apps", path=write_rows(tmp_path / "x.jsonl", [{"question": "q"}]))


def test_dedupe_drops_the_taco_copy_of_an_apps_statement() -> None:
    """Problem 6 repeats problem 0's statement (as TACO repeats APPS); dedupe keeps the first."""
    names = [t.name for t in load_tasks("apps", path=SAMPLE, dedupe=True)]
    assert "apps/0" in names and "apps/6" not in names


def test_a_benchmark_file_loads_by_path_without_naming_the_loader() -> None:
    """load_tasks(path) recognises APPS rows and gives the same tasks as the apps loader."""
    assert load_tasks(SAMPLE) == load_tasks("apps", path=SAMPLE)


def test_offline_without_a_local_copy_fails_fast_saying_how_to_supply_one(unreachable_hub: None) -> None:
    """No copy and an unreachable Hub: DatasetUnavailable from the reachability probe (no download, no retries), naming path= and the env var."""
    with pytest.raises(DatasetUnavailable) as info:
        load_tasks("apps", split="test")
    # fast: the reachability probe refused it, before any download and its retries
    assert "not reachable from here" in str(info.value), info.value
    assert "path=" in str(info.value) and apps.ENV_VAR in str(info.value)
