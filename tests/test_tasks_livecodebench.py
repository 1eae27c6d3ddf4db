"""The LiveCodeBench loader: both test types, the private-test encoding, the restricted unpickler."""

from __future__ import annotations

import base64
import json
import math
import os
import pickle
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentenv.errors import ConfigError, DatasetUnavailable, TaskFormatError
from agentenv.grading import RunResult, run_tests
from agentenv.tasks import StdioCase, Task, load_tasks
from agentenv.tasks import livecodebench as lcb
from agentenv.tasks.jsonl import STDIO_ENTRY_POINT

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "livecodebench_sample.jsonl"
TIMEOUT = 10.0
ROWS = [json.loads(line) for line in SAMPLE.read_text().splitlines()]

# Correct programs for the fixture problems (written for these tests).
SOLUTIONS = {
    "3501": "from typing import List\n\nclass Solution:\n"
            "    def countDivisibleDigitSums(self, nums: List[int], k: int) -> int:\n"
            "        return sum(1 for n in nums if sum(map(int, str(n))) % k == 0)\n",
    "abc370_b": "n = int(input())\na = list(map(int, input().split()))\nprint(max(a) - min(a))\n",
    "1850A": "import sys\n\ndef main():\n    data = sys.stdin.read().split()\n    t = int(data[0])\n"
             "    for i in range(t):\n        print(int(data[1 + 2 * i]) * int(data[2 + 2 * i]))\n\nmain()\n",
    "3300": "class Solution:\n    def averageOfExtremes(self, nums):\n"
            "        return (min(nums) + max(nums)) / 2\n",
    "3105": "class Solution:\n    def canSplit(self, s: str, parts: int) -> bool:\n"
            "        if not s or len(s) % parts:\n            return False\n"
            "        size = len(s) // parts\n        return s[:size] * parts == s\n",
}


def score(task: Task, code: str) -> RunResult:
    return run_tests(code, task.checks, timeout=TIMEOUT, setup_code=task.setup_code,
                     float_tolerance=task.float_tolerance)


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {t.metadata["question_id"]: t for t in load_tasks("livecodebench", path=SAMPLE)}


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_sample_loads_every_problem_with_release_date_and_difficulty(tasks: dict[str, Task]) -> None:
    """Five problems load, named livecodebench/<question_id>, keeping date, difficulty and platform."""
    assert set(tasks) == set(SOLUTIONS)
    task = tasks["3501"]
    assert task.name == "livecodebench/3501" and task.source == "livecodebench"
    assert task.metadata["release_date"] == "2024-09-14"
    assert task.difficulty == "easy" and task.tags == ("leetcode", "functional")
    assert tasks["abc370_b"].tags == ("atcoder", "stdin")
    assert all(t.reference_solution is None for t in tasks.values())  # LiveCodeBench ships none


def test_every_task_gets_the_imports_livecodebench_prepends(tasks: dict[str, Task]) -> None:
    """typing, collections, math, heapq... as LiveCodeBench's grader star-imports them."""
    assert all(t.prelude == lcb.PRELUDE for t in tasks.values())
    for line in ("from typing import *", "from collections import *", "from math import *",
                 "from heapq import *", "from itertools import *", "import sys"):
        assert line in lcb.PRELUDE.splitlines()
    bare = "class Solution:\n    def f(self, xs: List[int]) -> int:\n        return max(Counter(xs).values())\n"
    result = run_tests(bare, ["assert Solution().f([1, 1, 2]) == 2"], prelude=lcb.PRELUDE)
    assert result.all_passed


def test_functional_tests_become_calls_on_a_fresh_solution_instance(tasks: dict[str, Task]) -> None:
    """A LeetCode test turns into assert Solution().<func_name>(<JSON args>) == <JSON output>."""
    task = tasks["3501"]
    assert task.entry_point == "Solution"
    assert task.visible_checks == ("assert Solution().countDivisibleDigitSums([12, 33, 4], 3) == 2",)
    assert "assert Solution().countDivisibleDigitSums([99, 18, 7], 9) == 2" in task.checks
    assert "class Solution:" in task.prompt and "def countDivisibleDigitSums" in task.prompt


def test_json_literals_become_python_literals(tasks: dict[str, Task]) -> None:
    """JSON true/false and strings are written as Python True/False and quoted strings."""
    assert "assert Solution().canSplit('abab', 2) == True" in tasks["3105"].visible_checks
    assert "assert Solution().canSplit('', 1) == False" in tasks["3105"].checks


def test_stdin_tests_become_stdio_cases_of_a_whole_program(tasks: dict[str, Task]) -> None:
    """AtCoder/Codeforces tests are StdioCase checks and the entry point is the program itself."""
    task = tasks["abc370_b"]
    assert task.entry_point == STDIO_ENTRY_POINT and task.is_stdio
    assert task.visible_checks == (StdioCase("3\n4 1 7\n", "6\n", "livecodebench"),)
    assert "standard input" in task.prompt


def test_public_tests_are_visible_and_private_tests_are_hidden(tasks: dict[str, Task]) -> None:
    """Public tests are visible_checks; hidden checks are the private ones plus the public, as LCB grades."""
    task = tasks["1850A"]
    private = [StdioCase("1\n-7 6\n", "-42\n", "livecodebench"), StdioCase("3\n0 9\n1 1\n100000 100000\n", "0\n1\n10000000000\n", "livecodebench")]
    assert list(task.checks) == [*private, *task.visible_checks]
    (only_private,) = [t for t in load_tasks("livecodebench", path=SAMPLE, hidden_includes_public=False)
                       if t.metadata["question_id"] == "1850A"]
    assert list(only_private.checks) == private
    assert task.metadata["public_tests"] == 1 and task.metadata["private_tests"] == 2


def test_private_tests_in_plain_json_are_read_too(tasks: dict[str, Task]) -> None:
    """Early rows keep private tests as plain JSON; they decode the same way."""
    assert ROWS[3]["private_test_cases"].startswith("[")
    assert "assert Solution().averageOfExtremes([-1, 2]) == 0.5" in tasks["3300"].checks


def test_float_answers_get_a_tolerance_and_exact_ones_do_not(tasks: dict[str, Task]) -> None:
    """Only problems whose expected values hold floats get float_tolerance."""
    assert tasks["3300"].float_tolerance == lcb.FLOAT_TOLERANCE
    assert tasks["3501"].float_tolerance is None and tasks["abc370_b"].float_tolerance is None


@pytest.mark.parametrize("question_id", sorted(SOLUTIONS))
def test_correct_programs_score_one_through_the_sandbox(tasks: dict[str, Task], question_id: str) -> None:
    """A correct program passes every hidden and visible check, functional and stdin alike."""
    task = tasks[question_id]
    result = score(task, SOLUTIONS[question_id])
    assert result.all_passed, result.failures
    visible = run_tests(SOLUTIONS[question_id], task.visible_checks, timeout=TIMEOUT,
                        float_tolerance=task.float_tolerance)
    assert visible.all_passed


@pytest.mark.parametrize("question_id", ["3501", "abc370_b"])
def test_wrong_programs_score_below_one(tasks: dict[str, Task], question_id: str) -> None:
    """An off-by-one program fails some checks: the checks really test the answer."""
    wrong = {"3501": "class Solution:\n    def countDivisibleDigitSums(self, nums, k):\n        return len(nums)\n",
             "abc370_b": "n = int(input())\na = list(map(int, input().split()))\nprint(max(a) - min(a) + 1)\n"}
    assert score(tasks[question_id], wrong[question_id]).fraction < 1.0


def test_since_keeps_a_contamination_free_window() -> None:
    """since='2024-08-01' keeps problems released on or after that day."""
    kept = load_tasks("livecodebench", path=SAMPLE, since="2024-08-01")
    assert {t.metadata["question_id"] for t in kept} == {"3501", "abc370_b", "3300"}


def test_difficulty_and_platform_filters() -> None:
    """difficulty= and tags= (platforms, test types) select problems."""
    medium = load_tasks("livecodebench", path=SAMPLE, difficulty="medium")
    assert {t.metadata["question_id"] for t in medium} == {"abc370_b", "3300", "3105"}
    stdin = load_tasks("livecodebench", path=SAMPLE, tags="stdin")
    assert {t.metadata["question_id"] for t in stdin} == {"abc370_b", "1850A"}


class _RunsShell:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (self.command,))


def _encoded(obj: Any) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(obj))).decode()


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    """A private-test blob whose pickle calls os.system raises TaskFormatError; the command never runs."""
    marker = tmp_path / "pwned"
    row = dict(ROWS[0], private_test_cases=_encoded(_RunsShell(f"touch {marker}")))
    path = write_rows(tmp_path / "evil.jsonl", [row])
    with pytest.raises(TaskFormatError) as info:
        load_tasks("livecodebench", path=path)
    message = str(info.value)
    assert "private_test_cases" in message and "refuses" in message and "system" in message
    assert "evil.jsonl" in message and "livecodebench/3501" in message
    assert not marker.exists()


@pytest.mark.parametrize("payload", [
    pytest.param(_RunsShell("true"), id="reduce-os-system"),
    pytest.param(eval, id="builtin-function"),
    pytest.param({1, 2}, id="set-needs-no-global-but-is-not-tests"),
    pytest.param(math.pi, id="bare-float"),
])
def test_decoder_accepts_only_plain_json_strings(payload: Any) -> None:
    """Anything but a pickled JSON string of tests is rejected with a ValueError reason."""
    with pytest.raises(ValueError):
        lcb.decode_test_cases(_encoded(payload))


def test_decoder_rejects_garbage_and_oversized_blobs() -> None:
    """Non-base64 text, non-zlib bytes and blobs above the size cap are reasons, not crashes."""
    with pytest.raises(ValueError, match="base64"):
        lcb.decode_test_cases("not base64 at all!")
    with pytest.raises(ValueError, match="zlib"):
        lcb.decode_test_cases(base64.b64encode(b"plain bytes").decode())
    big = lcb.encode_private_tests([{"input": "x" * 10_000, "output": "", "testtype": "stdin"}])
    with pytest.raises(ValueError, match="more than"):
        lcb.decode_test_cases(big, max_bytes=1000)


test_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


@given(test_values)
def test_py_literal_evaluates_back_to_the_same_value(value: Any) -> None:
    """Every JSON-decoded value (inf included) is written as Python source that evaluates to it."""
    assert eval(lcb.py_literal(value)) == value


@given(st.lists(st.fixed_dictionaries({"input": st.text(), "output": st.text(),
                                       "testtype": st.sampled_from(["stdin", "functional"])}),
                max_size=5))
def test_private_test_encoding_round_trips(tests: list[dict[str, str]]) -> None:
    """encode_private_tests and decode_test_cases are inverses."""
    assert lcb.decode_test_cases(lcb.encode_private_tests(tests)) == tests


def test_functional_test_without_func_name_names_the_problem(tmp_path: Path) -> None:
    """A functional test on a problem whose metadata lacks func_name is a clear TaskFormatError."""
    row = dict(ROWS[0], metadata="{}")
    with pytest.raises(TaskFormatError, match="func_name"):
        load_tasks("livecodebench", path=write_rows(tmp_path / "x.jsonl", [row]))


def test_version_tags_pick_release_files(tmp_path: Path) -> None:
    """In a folder copy, release_v1 reads test.jsonl, v2 reads test2.jsonl, release_v2 both."""
    write_rows(tmp_path / "test.jsonl", ROWS[:2])
    write_rows(tmp_path / "test2.jsonl", ROWS[2:])
    ids = lambda **kw: [t.metadata["question_id"] for t in load_tasks("livecodebench", path=tmp_path, **kw)]  # noqa: E731
    assert ids(version="release_v1") == ["3501", "abc370_b"]
    assert ids(version="v2") == ["1850A", "3300", "3105"]
    assert ids(version="release_v2") == ids() == [r["question_id"] for r in ROWS]
    with pytest.raises(DatasetUnavailable, match=r"test3\.jsonl"):
        ids(version="release_v3")
    with pytest.raises(ConfigError, match="release_vN"):
        ids(version="newest")


def test_release_files_follow_the_dataset_version_tags() -> None:
    """release_vN is cumulative, vN one file, vA_vB a range, release_latest every file."""
    available = ["README.md", "test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl"]
    assert lcb.release_files("release_v3", available) == ["test.jsonl", "test2.jsonl", "test3.jsonl"]
    assert lcb.release_files("v4", available) == ["test4.jsonl"]
    assert lcb.release_files("v2_v3", available) == ["test2.jsonl", "test3.jsonl"]
    assert lcb.release_files("release_latest", available) == available[1:]


def test_env_var_and_path_sniffing_find_the_local_copy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """$AGENTENV_LIVECODEBENCH_PATH is used, and a bare file path is recognised as LiveCodeBench."""
    copy = tmp_path / "test.jsonl"
    shutil.copy(SAMPLE, copy)
    monkeypatch.setenv(lcb.ENV_VAR, str(tmp_path))
    assert len(load_tasks("livecodebench")) == 5
    assert load_tasks(SAMPLE) == load_tasks("livecodebench", path=SAMPLE)


def test_offline_without_a_local_copy_fails_fast_saying_how_to_supply_one(unreachable_hub: None) -> None:
    """No copy and an unreachable Hub: DatasetUnavailable from the reachability probe (no download, no retries), naming path= and the env var."""
    with pytest.raises(DatasetUnavailable) as info:
        load_tasks("livecodebench")
    # fast: the reachability probe refused it, before any download and its retries
    assert "not reachable from here" in str(info.value), info.value
    assert "path=" in str(info.value) and lcb.ENV_VAR in str(info.value)


def test_stdin_tasks_state_livecodebench_time_limit_and_comparison() -> None:
    from agentenv.tasks.livecodebench import TIME_LIMIT, task_from_record

    row = {"question_id": "abc1", "question_title": "t", "question_content": "Add.", "platform": "atcoder",
           "contest_id": "abc", "contest_date": "2024-09-01T00:00:00", "starter_code": "", "difficulty": "easy",
           "metadata": "{}", "public_test_cases": '[{"input": "1 2\\n", "output": "3\\n", "testtype": "stdin"}]',
           "private_test_cases": "[]"}
    task = task_from_record(row)
    assert task.time_limit == TIME_LIMIT == 6.0
    assert {c.compare for c in task.checks} == {"livecodebench"}  # type: ignore[union-attr]
