"""The filters every loader shares (difficulty, tags, since, dedupe, seeded shuffle, limit), and
`agentenv tasks validate` on each loader's fixture."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentenv.errors import ConfigError
from agentenv.tasks import Task, load_tasks
from agentenv.tasks.filters import DIFFICULTY_ALIASES, apply_filters, normalize_difficulty

DATA = Path(__file__).parent / "data"
CUSTOM_MAP = ("prompt=question,checks=tests,reference_solution=solution,difficulty=level,tags=topic,"
              "entry_point=entry,metadata.release_date=released")
# One local fixture per loader: (load_tasks name or path, options).
SOURCES: dict[str, tuple[str | Path, dict[str, Any]]] = {
    "mbpp": ("mbpp", {"path": DATA / "mbpp_sample.jsonl"}),
    "livecodebench": ("livecodebench", {"path": DATA / "livecodebench_sample.jsonl"}),
    "apps": ("apps", {"path": DATA / "apps_sample.jsonl"}),
    "jsonl": (DATA / "custom_qa.jsonl", {"map": CUSTOM_MAP}),
}


def load(source: str, **filters: Any) -> list[Task]:
    name, options = SOURCES[source]
    return load_tasks(name, **options, **filters)


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_limit_keeps_the_first_n(source: str) -> None:
    """limit=N keeps the first N tasks of every loader."""
    full = load(source)
    assert load(source, limit=2) == full[:2]
    assert load(source, limit=0) == []


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_seeded_shuffle_is_a_reproducible_permutation(source: str) -> None:
    """shuffle_seed gives the same order for the same seed, a permutation of the full set."""
    full = load(source)
    first, again = load(source, shuffle_seed=7), load(source, shuffle_seed=7)
    assert first == again
    assert sorted(t.name for t in first) == sorted(t.name for t in full)
    orders = {tuple(t.name for t in load(source, shuffle_seed=seed)) for seed in range(6)}
    assert len(orders) > 1  # different seeds give different orders


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_shuffle_happens_before_limit(source: str) -> None:
    """shuffle_seed with limit samples N tasks from the whole shuffled set."""
    assert load(source, shuffle_seed=3, limit=2) == load(source, shuffle_seed=3)[:2]


@pytest.mark.parametrize("source, difficulty, expected", [
    ("livecodebench", "hard", {"livecodebench/1850A"}),
    ("apps", "easy", {"apps/0", "apps/4", "code_contests/1234_A. Tiny Sum"}),
    ("jsonl", "medium,hard", {"custom_qa/q2", "custom_qa/q3"}),
    ("mbpp", "easy", set()),  # MBPP has no difficulty labels
])
def test_difficulty_filter_across_loaders(source: str, difficulty: str, expected: set[str]) -> None:
    """difficulty= keeps the listed levels, whatever label the benchmark used."""
    assert {t.name for t in load(source, difficulty=difficulty)} == expected


@pytest.mark.parametrize("source, tags, expected", [
    ("livecodebench", "atcoder,codeforces", {"livecodebench/abc370_b", "livecodebench/1850A"}),
    ("apps", "Math", {"apps/3", "apps/6"}),
    ("jsonl", "strings", {"custom_qa/q3"}),
])
def test_tag_filter_across_loaders(source: str, tags: str, expected: set[str]) -> None:
    """tags= keeps tasks carrying at least one listed tag."""
    assert {t.name for t in load(source, tags=tags)} == expected


@pytest.mark.parametrize("source, expected_dropped", [
    ("jsonl", {"custom_qa/q5"}),
    ("apps", {"apps/6"}),
    ("mbpp", set()),
    ("livecodebench", set()),
])
def test_dedupe_drops_repeated_prompts_across_loaders(source: str, expected_dropped: set[str]) -> None:
    """dedupe=True drops a task whose prompt was already seen, keeping the first."""
    full = {t.name for t in load(source)}
    assert full - {t.name for t in load(source, dedupe=True)} == expected_dropped


def test_since_rejects_a_date_that_is_not_iso() -> None:
    """since='last summer' is a ConfigError showing the expected format."""
    with pytest.raises(ConfigError, match="2024-08-01"):
        load("livecodebench", since="last summer")


def test_unknown_difficulty_filter_is_a_config_error() -> None:
    """difficulty='trivial' names the three levels."""
    with pytest.raises(ConfigError, match="easy, medium, hard"):
        load("apps", difficulty="trivial")


@pytest.mark.parametrize("label, level", [
    ("introductory", "easy"), ("interview", "medium"), ("competition", "hard"),
    ("EASY", "easy"), ("MEDIUM", "medium"), ("MEDIUM_HARD", "hard"), ("VERY_HARD", "hard"),
    ("UNKNOWN_DIFFICULTY", None), ("Hard", "hard"), ("very hard", "hard"), (None, None),
])
def test_normalize_difficulty_maps_benchmark_labels(label: str | None, level: str | None) -> None:
    """APPS, TACO and LiveCodeBench labels map onto easy/medium/hard."""
    assert normalize_difficulty(label) == level


def test_normalize_difficulty_is_lenient_unless_strict() -> None:
    """An unknown label gives None, or ConfigError when strict=True."""
    assert normalize_difficulty("legendary") is None
    with pytest.raises(ConfigError, match="legendary"):
        normalize_difficulty("legendary", strict=True)
    assert all(v in (None, "easy", "medium", "hard") for v in DIFFICULTY_ALIASES.values())


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=12), st.integers(0, 2**32),
       st.integers(0, 15))
def test_filters_return_a_subset_bounded_by_limit(prompts: list[str], seed: int, limit: int) -> None:
    """Shuffle plus limit plus dedupe returns at most `limit` distinct-prompt tasks from the input."""
    tasks = [Task(name=f"t{i}", prompt=p, entry_point="f", checks=("assert f()",))
             for i, p in enumerate(prompts)]
    out = apply_filters(tasks, shuffle_seed=seed, limit=limit, dedupe=True)
    assert len(out) <= min(limit, len(set(prompts)))
    assert len({t.prompt for t in out}) == len(out)
    assert all(t in tasks for t in out)


@pytest.mark.parametrize("fixture, exit_code, failing", [
    ("mbpp_sample.jsonl", 1, {"mbpp/341"}),
    ("livecodebench_sample.jsonl", 0, set()),
    ("apps_sample.jsonl", 0, set()),
])
def test_tasks_validate_runs_every_loaders_references(
        fixture: str, exit_code: int, failing: set[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`agentenv tasks validate FILE` loads each benchmark file and reports exactly the broken references."""
    from agentenv.cli import main

    code = main(["tasks", "validate", str(DATA / fixture), "--no-progress"])
    out = capsys.readouterr().out
    reported = {word for word in out.split() if word.startswith(("mbpp/", "apps/", "livecodebench/"))}
    assert reported == failing
    assert code == exit_code
    if fixture.startswith("livecodebench"):
        assert "5 task(s) have no reference" in out


def test_fixture_files_are_what_make_fixtures_writes(tmp_path: Path) -> None:
    """Regenerating the handwritten fixtures gives the same tasks as the committed files."""
    runpy.run_path(str(DATA / "make_fixtures.py"))["main"](tmp_path)
    for file, loader, options in [("livecodebench_sample.jsonl", "livecodebench", {}),
                                  ("apps_sample.jsonl", "apps", {}),
                                  ("custom_qa.jsonl", "jsonl", {"map": CUSTOM_MAP})]:
        assert load_tasks(loader, path=tmp_path / file, **options) == \
            load_tasks(loader, path=DATA / file, **options)
