"""compare_runs: per-task paired differences between two runs (the prompt-template experiment)."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_builders import single_step, write_run

from agentenv.errors import ConfigError
from agentenv.records import Trajectory
from agentenv.report import compare_runs, format_comparison, write_comparison


def _run(plan: dict[str, list[bool]], template: str) -> list[Trajectory]:
    episodes = []
    for task, outcomes in plan.items():
        for sample, solved in enumerate(outcomes):
            episode = single_step(task, solved, sample=sample)
            episode.template_ids = {"system": "system@1111", "task": template}
            episodes.append(episode)
    return episodes


# A never solves; B solves tasks t0-t3 twice and t4-t7 once (of two samples).
RUN_A = {f"t{i}": [False, False] for i in range(8)}
RUN_B = {f"t{i}": [True, True] if i < 4 else [True, False] for i in range(8)}


def test_overall_differences_are_means_of_per_task_differences_with_an_interval() -> None:
    """Solve-rate gain 0.75 and reward gain 0.375; the paired intervals hold them, not 0."""
    result = compare_runs(_run(RUN_A, "task@old"), _run(RUN_B, "task@new"), n_boot=2000)
    solve = result["overall"]["solve_rate"]
    assert (solve["a"], solve["b"]) == (0.0, 0.75)
    interval = solve["difference"]
    assert interval["estimate"] == pytest.approx(0.75)
    assert 0.5 <= interval["low"] < 0.75 < interval["high"] <= 1.0
    assert interval["excludes_zero"] and interval["n"] == 8
    reward = result["overall"]["mean_reward"]["difference"]
    assert reward["estimate"] == pytest.approx(0.375)
    assert reward["low"] < 0.375 < reward["high"]
    assert result["overall"]["pass@1"]["difference"]["estimate"] == pytest.approx(0.75)
    assert result["direction"] == "B - A" and result["common_tasks"] == 8


def test_per_task_rows_give_the_difference_and_a_within_task_interval() -> None:
    """t0 gains exactly 1 (a point interval); t4 gains 0.5 with an interval of [0, 1]."""
    result = compare_runs(_run(RUN_A, "task@old"), _run(RUN_B, "task@new"), n_boot=200)
    t0, t4 = result["by_task"]["t0"]["solve_rate"], result["by_task"]["t4"]["solve_rate"]
    assert (t0["difference"], t0["low"], t0["high"]) == (1.0, 1.0, 1.0)
    assert (t4["a"], t4["b"], t4["difference"]) == (0.0, 0.5, 0.5)
    assert (t4["low"], t4["high"]) == (0.0, 1.0)
    assert result["by_task"]["t4"]["mean_reward"]["difference"] == pytest.approx(0.25)


def test_differing_template_ids_are_reported_for_both_runs() -> None:
    """The template ids of both runs are reported and the one that differs is named."""
    result = compare_runs(_run(RUN_A, "task@old"), _run(RUN_B, "task@new"), n_boot=100)
    assert result["a"]["template_ids"] == [{"system": "system@1111", "task": "task@old"}]
    assert result["b"]["template_ids"] == [{"system": "system@1111", "task": "task@new"}]
    assert not result["same_templates"]
    assert result["template_differences"] == {"task": {"a": ["task@old"], "b": ["task@new"]}}
    text = format_comparison(result)
    assert "task@old" in text and "task@new" in text and "+0.750" in text


def test_tasks_in_one_run_only_are_left_out_with_a_warning() -> None:
    """Only shared tasks are compared; the others are listed and a warning says so."""
    b = {**RUN_B, "extra": [True, True]}
    del b["t7"]
    result = compare_runs(_run(RUN_A, "x"), _run(b, "x"), n_boot=100)
    assert result["common_tasks"] == 7
    assert result["only_in_a"] == ["t7"] and result["only_in_b"] == ["extra"]
    assert any("only in A" in w for w in result["warnings"])
    assert result["same_templates"]


def test_a_task_with_one_episode_on_a_side_gets_no_interval() -> None:
    """One draw says nothing about its spread: the per-task interval is None."""
    result = compare_runs(_run({"t": [False]}, "x"), _run({"t": [True, True]}, "x"), n_boot=100)
    row = result["by_task"]["t"]["solve_rate"]
    assert row["difference"] == 1.0 and row["low"] is None and row["high"] is None


def test_runs_with_no_task_in_common_cannot_be_compared() -> None:
    """Disjoint task sets are a configuration error."""
    with pytest.raises(ConfigError, match="share no task"):
        compare_runs(_run({"a": [True]}, "x"), _run({"b": [True]}, "x"))


def test_compare_reads_run_directories_and_writes_its_table(tmp_path: Path) -> None:
    """Directories work as inputs; write_comparison leaves compare.json and compare.txt."""
    a = write_run(tmp_path / "a", _run(RUN_A, "task@old"))
    b = write_run(tmp_path / "b", _run(RUN_B, "task@new"))
    result = write_comparison(a, b, tmp_path / "out", n_boot=100)
    assert result["a"]["path"] == str(a)
    assert (tmp_path / "out" / "compare.json").is_file()
    assert "solve_rate" in (tmp_path / "out" / "compare.txt").read_text()
