"""The Task record, load_tasks' errors for bad task files and names, and the common filters."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentenv.errors import ConfigError, TaskFormatError
from agentenv.tasks import DIFFICULTIES, StdioCase, Task, load_tasks
from agentenv.tasks.filters import apply_filters

GOOD = """
name = "{name}"
difficulty = "{difficulty}"
tags = [{tags}]
entry_point = "double"
prompt = '''
Write `double(x)` that returns {name} twice x.
'''
checks = ["assert double(2) == 4", "assert double(0) == 0"]
reference_solution = '''
def double(x):
    return 2 * x
'''
"""


def write_task(directory: Path, filename: str, text: str) -> Path:
    path = directory / filename
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def good_task(directory: Path, filename: str = "000_double.toml", name: str = "double",
              difficulty: str = "easy", tags: str = '"math"') -> Path:
    return write_task(directory, filename, GOOD.format(name=name, difficulty=difficulty, tags=tags))


def load_error(directory: Path) -> TaskFormatError:
    with pytest.raises(TaskFormatError) as info:
        load_tasks(directory)
    return info.value


# -- loading a directory of TOML task files ---------------------------------------------------

def test_a_directory_of_good_task_files_loads_in_file_name_order(tmp_path: Path) -> None:
    """load_tasks(dir) reads every .toml file, sorted by file name, as builtin-source tasks."""
    good_task(tmp_path, "001_b.toml", name="b")
    good_task(tmp_path, "000_a.toml", name="a")
    tasks = load_tasks(tmp_path)
    assert [t.name for t in tasks] == ["a", "b"]
    assert tasks[0].checks == ("assert double(2) == 4", "assert double(0) == 0")
    assert tasks[0].source == "builtin"


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    """A file that is not TOML gets an error naming the file and saying to fix the syntax."""
    bad = write_task(tmp_path, "000_broken.toml", 'name = "broken"\nchecks = [\n')
    error = load_error(tmp_path)
    assert str(bad) in str(error)
    assert "TOML" in str(error)


def test_a_missing_required_field_names_the_file_the_task_and_the_field(tmp_path: Path) -> None:
    """A task without entry_point is reported with its file, its name and the missing field."""
    bad = write_task(tmp_path, "000_nope.toml", """
        name = "no_entry"
        prompt = "Write f."
        checks = ["assert f() == 1"]
    """)
    error = load_error(tmp_path)
    assert (error.path, error.task, error.field) == (str(bad), "no_entry", "entry_point")
    message = str(error)
    assert str(bad) in message and "'no_entry'" in message and "'entry_point'" in message


def test_an_unknown_difficulty_names_the_field_and_the_allowed_values(tmp_path: Path) -> None:
    """difficulty = "impossible" is rejected, naming the field and listing easy, medium, hard."""
    bad = good_task(tmp_path, difficulty="impossible")
    error = load_error(tmp_path)
    assert (error.path, error.task, error.field) == (str(bad), "double", "difficulty")
    assert all(level in str(error) for level in DIFFICULTIES)


def test_a_misspelled_field_is_reported_as_unknown(tmp_path: Path) -> None:
    """A typo such as `check` instead of `checks` is an unknown field, never silently ignored."""
    write_task(tmp_path, "000_typo.toml", """
        name = "typo"
        prompt = "Write f."
        entry_point = "f"
        check = ["assert f() == 1"]
    """)
    error = load_error(tmp_path)
    assert error.task == "typo"
    assert error.field == "check"


def test_checks_that_are_not_a_list_name_the_checks_field(tmp_path: Path) -> None:
    """checks = "assert ..." (a string, not a list) is reported on the checks field."""
    write_task(tmp_path, "000_str.toml", """
        name = "stringy"
        prompt = "Write f."
        entry_point = "f"
        checks = "assert f() == 1"
    """)
    error = load_error(tmp_path)
    assert (error.task, error.field) == ("stringy", "checks")


def test_a_check_of_the_wrong_shape_names_the_checks_field(tmp_path: Path) -> None:
    """A check that is neither a string nor a stdin/expected_stdout table is rejected."""
    write_task(tmp_path, "000_shape.toml", """
        name = "shape"
        prompt = "Write f."
        entry_point = "f"
        checks = [42]
    """)
    error = load_error(tmp_path)
    assert (error.task, error.field) == ("shape", "checks")


def test_an_empty_check_list_is_rejected(tmp_path: Path) -> None:
    """A task with no hidden checks cannot score anything, so it is an error on `checks`."""
    write_task(tmp_path, "000_empty.toml", """
        name = "empty"
        prompt = "Write f."
        entry_point = "f"
        checks = []
    """)
    error = load_error(tmp_path)
    assert (error.task, error.field) == ("empty", "checks")


def test_tags_must_be_a_list_of_strings(tmp_path: Path) -> None:
    """tags = [1, 2] is reported on the tags field."""
    good_task(tmp_path, tags="1, 2")
    error = load_error(tmp_path)
    assert (error.task, error.field) == ("double", "tags")


def test_a_negative_float_tolerance_is_rejected(tmp_path: Path) -> None:
    """float_tolerance must be a non-negative number."""
    write_task(tmp_path, "000_tol.toml", """
        name = "tol"
        prompt = "Write f."
        entry_point = "f"
        checks = ["assert f() == 1.0"]
        float_tolerance = -0.1
    """)
    error = load_error(tmp_path)
    assert (error.task, error.field) == ("tol", "float_tolerance")


def test_an_unknown_equality_is_rejected_and_the_known_ones_load(tmp_path: Path) -> None:
    """equality must be "python" (the default) or "strict"; the error names the field."""
    write_task(tmp_path, "000_eq.toml", """
        name = "eq"
        prompt = "Write f."
        entry_point = "f"
        checks = ["assert f() == 1"]
        equality = "fuzzy"
    """)
    error = load_error(tmp_path)
    assert (error.task, error.field) == ("eq", "equality")
    task = Task(name="t", prompt="p", entry_point="f", checks=("assert f() == 1",), equality="strict")
    assert Task.from_dict(task.to_dict()) == task
    assert Task(name="t", prompt="p", entry_point="f", checks=("x",)).equality == "python"


def test_stdio_checks_load_as_stdio_cases(tmp_path: Path) -> None:
    """A check table with stdin and expected_stdout becomes a StdioCase."""
    write_task(tmp_path, "000_io.toml", """
        name = "echo"
        prompt = "Echo stdin."
        entry_point = "main"
        checks = [{ stdin = "hi\\n", expected_stdout = "hi\\n" }]
    """)
    (task,) = load_tasks(tmp_path)
    assert task.checks == (StdioCase(stdin="hi\n", expected_stdout="hi\n"),)
    assert task.is_stdio


def test_duplicate_task_names_in_one_directory_are_rejected(tmp_path: Path) -> None:
    """Two files holding the same task name give an error on the name field."""
    good_task(tmp_path, "000_a.toml", name="same")
    good_task(tmp_path, "001_b.toml", name="same")
    error = load_error(tmp_path)
    assert (error.task, error.field) == ("same", "name")


def test_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    """A directory with no .toml task files is reported rather than giving an empty task set."""
    error = load_error(tmp_path)
    assert str(tmp_path) in str(error)


# -- names --------------------------------------------------------------------------------

def test_an_unknown_task_set_name_suggests_the_closest_one() -> None:
    """load_tasks("bulitin") raises ConfigError with "Did you mean 'builtin'?"."""
    with pytest.raises(ConfigError, match=r"Did you mean 'builtin'\?"):
        load_tasks("bulitin")


def test_an_unknown_name_with_no_close_match_lists_the_known_names() -> None:
    """A name nothing resembles lists the known task sets so the user can pick one."""
    with pytest.raises(ConfigError) as info:
        load_tasks("zzzzzz-not-a-set")
    assert "builtin" in str(info.value) and "humaneval" in str(info.value)
    assert "Did you mean" not in str(info.value)


def test_task_set_names_are_case_insensitive() -> None:
    """load_tasks("BUILTIN") is load_tasks("builtin")."""
    assert load_tasks("BUILTIN") == load_tasks("builtin")


# -- filters ------------------------------------------------------------------------------

def test_the_difficulty_filter_keeps_only_the_listed_levels() -> None:
    """difficulty="hard" keeps only hard tasks; "easy,medium" keeps both levels and no hard one."""
    hard = load_tasks("builtin", difficulty="hard")
    assert hard and all(t.difficulty == "hard" for t in hard)
    both = load_tasks("builtin", difficulty="easy,medium")
    assert {t.difficulty for t in both} == {"easy", "medium"}
    assert len(both) + len(hard) == len(load_tasks("builtin"))


def test_an_unknown_difficulty_filter_is_a_config_error() -> None:
    """difficulty="extreme" raises ConfigError naming the allowed levels."""
    with pytest.raises(ConfigError, match="easy"):
        load_tasks("builtin", difficulty="extreme")


def test_the_tags_filter_keeps_tasks_with_any_listed_tag() -> None:
    """tags=["graphs", "semver"] keeps exactly the tasks carrying one of those tags."""
    everything = load_tasks("builtin")
    kept = load_tasks("builtin", tags=["graphs", "semver"])
    assert kept == [t for t in everything if {"graphs", "semver"} & set(t.tags)]
    assert len(kept) >= 2


def test_limit_keeps_the_first_tasks_in_order() -> None:
    """limit=3 gives the first three tasks, starting with add; limit=0 gives none."""
    assert [t.name for t in load_tasks("builtin", limit=3)] == \
        [t.name for t in load_tasks("builtin")[:3]]
    assert load_tasks("builtin", limit=0) == []


def test_a_negative_limit_is_a_config_error() -> None:
    """limit=-1 is rejected with a ConfigError."""
    with pytest.raises(ConfigError):
        load_tasks("builtin", limit=-1)


def test_shuffle_seed_gives_a_reproducible_permutation() -> None:
    """The same shuffle_seed gives the same order, a different seed another, with no task lost."""
    base = [t.name for t in load_tasks("builtin")]
    a = [t.name for t in load_tasks("builtin", shuffle_seed=7)]
    b = [t.name for t in load_tasks("builtin", shuffle_seed=7)]
    c = [t.name for t in load_tasks("builtin", shuffle_seed=8)]
    assert a == b
    assert sorted(a) == sorted(base)
    assert a != base and a != c


def test_shuffle_happens_before_limit() -> None:
    """shuffle_seed with limit samples from the whole set, not only from its head."""
    names = {t.name for seed in range(5)
             for t in load_tasks("builtin", shuffle_seed=seed, limit=3)}
    assert not names <= {t.name for t in load_tasks("builtin", limit=3)}


def test_dedupe_drops_tasks_whose_prompt_repeats_up_to_whitespace() -> None:
    """Two tasks whose prompts differ only in whitespace collapse to the first one."""
    records = [
        {"name": "one", "prompt": "Write f.\n  It returns 1.", "entry_point": "f",
         "checks": ["assert f() == 1"]},
        {"name": "two", "prompt": "Write f. It returns 1.", "entry_point": "f",
         "checks": ["assert f() == 1"]},
        {"name": "three", "prompt": "Write g.", "entry_point": "g", "checks": ["assert g() == 2"]},
    ]
    tasks = [Task.from_dict(r) for r in records]
    assert [t.name for t in apply_filters(tasks, dedupe=True)] == ["one", "three"]
    assert len(apply_filters(tasks)) == 3


def test_since_keeps_tasks_released_on_or_after_the_date() -> None:
    """since="2024-06-01" keeps tasks whose metadata release_date is that day or later."""
    tasks = [Task(name=n, prompt=f"Write {n}.", entry_point="f", checks=("assert f() == 1",),
                  metadata={"release_date": d} if d else {})
             for n, d in [("old", "2023-01-05"), ("edge", "2024-06-01"), ("new", "2024-09-30"),
                          ("undated", None)]]
    assert [t.name for t in apply_filters(tasks, since="2024-06-01")] == ["edge", "new"]


# -- the record ---------------------------------------------------------------------------

def test_task_lists_become_tuples_so_a_task_stays_immutable() -> None:
    """Lists passed for checks and tags are stored as tuples; the dataclass is frozen."""
    task = Task(name="t", prompt="p", entry_point="f",
                checks=["assert f() == 1"], tags=["x"])  # type: ignore[arg-type]
    assert task.checks == ("assert f() == 1",) and task.tags == ("x",)
    with pytest.raises(AttributeError):
        task.name = "other"  # type: ignore[misc]


def test_the_builtin_tasks_round_trip_through_json() -> None:
    """Every builtin task survives to_dict -> JSON -> from_dict unchanged, metadata included."""
    for task in load_tasks("builtin"):
        again = Task.from_dict(json.loads(json.dumps(task.to_dict())))
        assert again == task
        assert dict(again.metadata) == dict(task.metadata)


_text = st.text(min_size=1, max_size=30).filter(lambda s: s.strip() != "")
# A valid check compiles (a task refuses one that does not): arbitrary text inside literals.
_check = st.one_of(st.builds(lambda a, b: f"assert f({a!r}) == {b!r}", _text, st.text(max_size=20)),
                   st.builds(StdioCase, stdin=st.text(max_size=20), expected_stdout=st.text(max_size=20)))


@given(
    name=_text, prompt=_text, entry_point=_text,
    checks=st.lists(_check, min_size=1, max_size=4),
    visible=st.lists(_check, max_size=2),
    difficulty=st.one_of(st.none(), st.sampled_from(DIFFICULTIES)),
    tags=st.lists(_text, max_size=3),
    tolerance=st.one_of(st.none(), st.floats(min_value=0, max_value=1)),
)
def test_any_valid_task_round_trips_through_json(name: str, prompt: str, entry_point: str,
                                                 checks: list, visible: list,
                                                 difficulty: str | None, tags: list[str],
                                                 tolerance: float | None) -> None:
    """Task.from_dict(json(Task.to_dict())) rebuilds an equal task for arbitrary valid fields."""
    task = Task(name=name, prompt=prompt, entry_point=entry_point, checks=tuple(checks),
                visible_checks=tuple(visible), difficulty=difficulty, tags=tuple(tags),
                float_tolerance=tolerance, metadata={"attempts": [prompt]})
    again = Task.from_dict(json.loads(json.dumps(task.to_dict())))
    assert again == task
    assert again.metadata == {"attempts": [prompt]}


def test_a_single_toml_task_file_loads_by_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """load_tasks("x.toml") reads one task file in the builtin format."""
    from agentenv.tasks import load_tasks

    path = tmp_path / "double.toml"
    path.write_text('name = "double"\nentry_point = "double"\nprompt = "Write double(x)."\n'
                    'checks = ["assert double(2) == 4"]\n', encoding="utf-8")
    (task,) = load_tasks(path)
    assert task.name == "double" and task.checks == ("assert double(2) == 4",)
