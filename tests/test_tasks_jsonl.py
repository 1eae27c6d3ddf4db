"""The generic loader: agentenv task-record files, and any dataset through a field mapping."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import agentenv
from agentenv.errors import ConfigError, DatasetUnavailable, TaskFormatError
from agentenv.grading import run_tests
from agentenv.tasks import StdioCase, Task, load_tasks
from agentenv.tasks.jsonl import (
    STDIO_ENTRY_POINT,
    coerce_checks,
    infer_entry_point,
    parse_mapping,
    sniff_layout,
    split_test_code,
)

DATA = Path(__file__).parent / "data"
CUSTOM = DATA / "custom_qa.jsonl"
MAP = {"prompt": "question", "checks": "tests", "reference_solution": "solution",
       "difficulty": "level", "tags": "topic", "entry_point": "entry",
       "metadata.release_date": "released"}
MAP_CLI = ("prompt=question,checks=tests,reference_solution=solution,difficulty=level,tags=topic,"
           "entry_point=entry,metadata.release_date=released")


def write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def custom() -> dict[str, Task]:
    return {t.name: t for t in load_tasks(CUSTOM, map=MAP)}


def test_task_records_round_trip_through_a_jsonl_file(tmp_path: Path) -> None:
    """What Task.to_dict writes, load_tasks(path) reads back as equal tasks."""
    tasks = agentenv.TASKS
    path = write_lines(tmp_path / "tasks.jsonl", [t.to_dict() for t in tasks])
    loaded = load_tasks(path)
    assert loaded == tasks
    assert [t.metadata for t in loaded] == [t.metadata for t in tasks]


def test_task_records_round_trip_with_stdio_checks(tmp_path: Path) -> None:
    """StdioCase checks survive the JSONL round trip."""
    task = Task(name="echo", prompt="Echo stdin.", entry_point=STDIO_ENTRY_POINT,
                checks=(StdioCase("hi\n", "hi\n"),), reference_solution="print(input())\n")
    (loaded,) = load_tasks(write_lines(tmp_path / "t.jsonl", [task.to_dict()]))
    assert loaded == task


def test_json_file_with_a_list_and_gzip_jsonl_load_too(tmp_path: Path) -> None:
    """A .json list, a .json object with 'tasks', and a .jsonl.gz file all load."""
    records = [t.to_dict() for t in agentenv.TASKS[:3]]
    (tmp_path / "a.json").write_text(json.dumps(records))
    (tmp_path / "b.json").write_text(json.dumps({"tasks": records}))
    with gzip.open(tmp_path / "c.jsonl.gz", "wt") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    for name in ("a.json", "b.json", "c.jsonl.gz"):
        assert load_tasks(tmp_path / name) == agentenv.TASKS[:3]


def test_parquet_files_load_when_pyarrow_is_installed(tmp_path: Path) -> None:
    """A Parquet file of custom records loads through the mapping (pyarrow comes with the hf extra)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in CUSTOM.read_text().splitlines()]
    rows = [r for r in rows if isinstance(r["tests"], list) and all(isinstance(t, str) for t in r["tests"])]
    table = pa.Table.from_pylist([{k: r[k] for k in ("id", "question", "tests", "solution")} for r in rows])
    pq.write_table(table, tmp_path / "qa.parquet")
    tasks = load_tasks(tmp_path / "qa.parquet", map="prompt=question,checks=tests,reference_solution=solution")
    assert [t.name for t in tasks] == [f"qa/{r['id']}" for r in rows]


def test_mapping_dict_and_cli_string_are_the_same(custom: dict[str, Task]) -> None:
    """map={...} and map='prompt=question,...' load the same tasks."""
    assert load_tasks(CUSTOM, map=MAP_CLI) == list(custom.values())
    assert parse_mapping(MAP_CLI) == MAP


@pytest.mark.parametrize("spec, message", [
    ("prompt=question,checks", "TASK_FIELD=RECORD_FIELD"),
    ("question=prompt", "cannot map onto 'question'"),
    ("metadata.=x", "cannot map onto"),
])
def test_bad_mappings_are_config_errors(spec: str, message: str) -> None:
    """A malformed entry or an unknown target raises ConfigError saying how to write it."""
    with pytest.raises(ConfigError, match=message):
        parse_mapping(spec)


def test_mapped_fields_reach_the_task(custom: dict[str, Task]) -> None:
    """Names come from the id field, difficulty is normalised, tags and release date are kept."""
    task = custom["custom_qa/q1"]
    assert task.prompt == "Write double(x) that returns twice x."
    assert task.entry_point == "double"  # inferred from the checks
    assert task.difficulty == "easy" and task.tags == ("math", "warmup")
    assert task.metadata["release_date"] == "2024-09-01"
    assert custom["custom_qa/q2"].tags == ("geometry", "math")  # a comma-separated string


def test_test_code_strings_split_into_asserts_and_setup(custom: dict[str, Task]) -> None:
    """A string of test code gives one check per top-level assert; its import becomes setup code."""
    task = custom["custom_qa/q2"]
    assert task.checks == ("assert hyp(3, 4) == 5.0", "assert math.isclose(hyp(1, 1), 2 ** 0.5)")
    assert task.setup_code == "import math\n"


def test_input_output_objects_become_stdio_cases(custom: dict[str, Task]) -> None:
    """Checks given as {input, output} objects are StdioCase checks of a whole program."""
    task = custom["custom_qa/q3"]
    assert task.checks == (StdioCase("abc\n", "cba\n"), StdioCase("x\n", "x\n"))
    assert task.entry_point == STDIO_ENTRY_POINT


def test_humaneval_style_check_function_becomes_one_check(custom: dict[str, Task]) -> None:
    """Test code defining check(candidate) becomes setup code plus the check check(<entry_point>)."""
    task = custom["custom_qa/q4"]
    assert task.entry_point == "inc" and task.checks == ("check(inc)",)
    assert "def check(candidate):" in task.setup_code


@pytest.mark.parametrize("name", ["custom_qa/q1", "custom_qa/q2", "custom_qa/q3", "custom_qa/q4",
                                  "custom_qa/q5"])
def test_mapped_references_score_one_in_the_sandbox(custom: dict[str, Task], name: str) -> None:
    """Every mapped task is runnable: its reference passes its checks."""
    task = custom[name]
    result = run_tests(task.reference_solution or "", task.checks, timeout=10.0,
                       setup_code=task.setup_code, float_tolerance=task.float_tolerance)
    assert result.all_passed, result.failures


def test_since_filter_works_through_mapped_release_dates() -> None:
    """metadata.release_date from the mapping makes since= work; tasks without a date drop out."""
    kept = load_tasks(CUSTOM, map=MAP, since="2024-09-01")
    assert [t.name for t in kept] == ["custom_qa/q1", "custom_qa/q3", "custom_qa/q5"]


def test_records_without_task_fields_ask_for_a_mapping() -> None:
    """Loading a foreign dataset without map= says which mapping option to pass."""
    with pytest.raises(TaskFormatError, match="map='prompt=question"):
        load_tasks(CUSTOM)


def test_uninferable_entry_point_asks_for_a_mapping(tmp_path: Path) -> None:
    """Checks that call no function and no mapped entry point raise, naming entry_point."""
    path = write_lines(tmp_path / "x.jsonl", [{"prompt": "p", "checks": ["assert True"]}])
    with pytest.raises(TaskFormatError, match="entry_point=RECORD_FIELD"):
        load_tasks(path)


def test_missing_required_mapped_field_names_it(tmp_path: Path) -> None:
    """A record lacking the field mapped to prompt raises TaskFormatError naming file and field."""
    path = write_lines(tmp_path / "x.jsonl", [{"q": "p", "tests": ["assert f(1) == 1"]}])
    with pytest.raises(TaskFormatError, match=r"x\.jsonl line 1.*'prompt'"):
        load_tasks(path, map="prompt=question,checks=tests")


def test_duplicate_names_are_rejected(tmp_path: Path) -> None:
    """Two records with the same name raise TaskFormatError naming both places."""
    record = agentenv.TASKS[0].to_dict()
    path = write_lines(tmp_path / "dup.jsonl", [record, record])
    with pytest.raises(TaskFormatError, match=r"duplicate task name.*line 1"):
        load_tasks(path)


def test_malformed_json_line_names_the_line(tmp_path: Path) -> None:
    """Invalid JSON on line 2 is reported with the file name and line 2."""
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(agentenv.TASKS[0].to_dict()) + "\n{oops\n")
    with pytest.raises(TaskFormatError, match=r"bad\.jsonl.*line 2"):
        load_tasks(path)


def test_invalid_task_record_names_the_field(tmp_path: Path) -> None:
    """A task record with an unknown difficulty names the field and the line."""
    record = dict(agentenv.TASKS[0].to_dict(), difficulty="trivial")
    with pytest.raises(TaskFormatError, match=r"line 1.*difficulty"):
        load_tasks(write_lines(tmp_path / "t.jsonl", [record]))


def test_infer_entry_point_prefers_outer_calls_and_defined_functions() -> None:
    """The outermost non-builtin call wins; a reference's functions beat its classes."""
    assert infer_entry_point(["assert sorted(f(3)) == [1]"]) == "f"
    assert infer_entry_point(["assert g([P(1), P(2)]) == 2"]) == "g"
    assert infer_entry_point(["assert len(x) == 1"]) is None
    assert infer_entry_point(["assert sum(1, 2) == 3"], code="def sum(a, b):\n    return a + b\n") == "sum"
    code = "class P:\n    pass\ndef g(ps):\n    return len(ps)\n"
    assert infer_entry_point(["assert P(1) is not None", "assert g([P(1)]) == 1",
                              "assert g([]) == 0"], code=code) == "g"
    assert infer_entry_point(["assert h(1) == 1"], setup_code="def h(x):\n    return x\n") is None


def test_split_test_code_keeps_decorated_helpers_in_setup() -> None:
    """Non-assert statements, decorators included, go to setup in their original order."""
    checks, setup = split_test_code("import functools\n@functools.cache\ndef k(x):\n    return x\n"
                                    "assert k(1) == 1\n")
    assert checks == ["assert k(1) == 1"]
    assert setup.startswith("import functools\n@functools.cache\ndef k(x):")


def test_coerce_checks_reads_json_strings_and_rejects_unknown_shapes() -> None:
    """A JSON list in a string is decoded; a number or Python without asserts is an error."""
    assert coerce_checks('["assert f(1) == 2"]') == (["assert f(1) == 2"], "")
    assert coerce_checks({"inputs": ["1\n"], "outputs": ["2\n"]}) == ([StdioCase("1\n", "2\n")], "")
    with pytest.raises(TaskFormatError, match="float"):
        coerce_checks(3.5)
    with pytest.raises(TaskFormatError, match="without any top-level assert"):
        coerce_checks("x = 1\n")
    with pytest.raises(TaskFormatError, match="apps"):
        coerce_checks({"inputs": [[1]], "outputs": [[2]], "fn_name": "f"})


def test_sniff_layout_recognises_each_benchmark() -> None:
    """The first record tells MBPP, LiveCodeBench and APPS files apart from task records."""
    assert sniff_layout(DATA / "mbpp_sample.jsonl") == "mbpp"
    assert sniff_layout(DATA / "livecodebench_sample.jsonl") == "livecodebench"
    assert sniff_layout(DATA / "apps_sample.jsonl") == "apps"
    assert sniff_layout(CUSTOM) is None


def test_missing_file_is_dataset_unavailable(tmp_path: Path) -> None:
    """The jsonl loader given a missing path raises DatasetUnavailable."""
    with pytest.raises(DatasetUnavailable):
        load_tasks("jsonl", path=tmp_path / "none.jsonl")


def test_jsonl_loader_needs_a_path_or_a_dataset() -> None:
    """load_tasks('jsonl') with neither path= nor dataset= explains both."""
    with pytest.raises(ConfigError, match="dataset="):
        load_tasks("jsonl")


def test_hub_dataset_offline_fails_fast_with_directions(unreachable_hub: None) -> None:
    """dataset= with the Hub unreachable raises DatasetUnavailable from the reachability probe (no download, no retries), naming path=."""
    with pytest.raises(DatasetUnavailable, match="path=") as info:
        load_tasks("jsonl", dataset="openai/openai_humaneval", split="test", map=MAP)
    # fast: the reachability probe refused it, before any download and its retries
    assert "not reachable from here" in str(info.value), info.value
