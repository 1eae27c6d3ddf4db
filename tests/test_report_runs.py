"""Reading run directories: load_run, load_summary, run_mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_builders import multi_turn, multi_turn_run, single_step, write_run

from agentenv.errors import AgentEnvError, RunFormatError
from agentenv.report import load_run, load_summary, run_mode


def test_load_run_reads_every_episode_back_as_equal_trajectories(tmp_path: Path) -> None:
    """A run directory round-trips: each line becomes the Trajectory that was written."""
    episodes = multi_turn_run()
    write_run(tmp_path, episodes)
    loaded = load_run(tmp_path)
    assert [t.to_dict() for t in loaded] == [t.to_dict() for t in episodes]


def test_load_run_accepts_the_trajectories_file_itself(tmp_path: Path) -> None:
    """Passing the .jsonl path works as well as passing its directory."""
    write_run(tmp_path, multi_turn_run())
    assert len(load_run(tmp_path / "trajectories.jsonl")) == 6


def test_a_missing_run_directory_is_one_clear_error_naming_the_file(tmp_path: Path) -> None:
    """No directory, or no trajectories.jsonl in it: the error names the path and what to pass."""
    with pytest.raises(RunFormatError, match=r"nowhere: no such file or run directory.*agentenv run"):
        load_run(tmp_path / "nowhere")
    with pytest.raises(RunFormatError, match=r"trajectories\.jsonl: no such file.*agentenv run"):
        load_run(tmp_path)


def test_a_malformed_line_is_reported_with_file_and_line_number(tmp_path: Path) -> None:
    """A broken line in the middle names the file and its line."""
    write_run(tmp_path, multi_turn_run())
    path = tmp_path / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    lines.insert(2, "{not json")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunFormatError, match=r"trajectories\.jsonl, line 3: not valid JSON") as info:
        load_run(tmp_path)
    assert info.value.line == 3
    assert isinstance(info.value, AgentEnvError)


def test_a_line_that_is_not_a_trajectory_is_rejected(tmp_path: Path) -> None:
    """JSON that is not an object, or lacks task_name, or has bad turns, names its line."""
    for bad, message in (("[1, 2]", "expected a JSON object"),
                         ('{"turns": []}', "task_name"),
                         ('{"task_name": "x", "turns": 3}', "turns"),
                         ('{"task_name": "x", "turns": [{"turn": 1}]}', "not a trajectory")):
        (tmp_path / "trajectories.jsonl").write_text(bad + "\n")
        with pytest.raises(RunFormatError, match=f"line 1: .*{message}"):
            load_run(tmp_path)


def test_a_torn_last_line_from_a_run_in_flight_is_skipped(tmp_path: Path) -> None:
    """A last line cut short (no newline, not JSON) is left out; the rest loads."""
    write_run(tmp_path, multi_turn_run())
    path = tmp_path / "trajectories.jsonl"
    path.write_text(path.read_text() + '{"task_name": "add", "tu')
    assert len(load_run(tmp_path)) == 6


def test_an_episode_written_twice_counts_once_and_the_last_line_wins(tmp_path: Path) -> None:
    """Duplicate episode ids keep the later record, in the position of the first."""
    first = multi_turn("add", [("wrong_answer", 0.5)], sample=0)
    again = multi_turn("add", [("pass", 1.0)], sample=0)
    other = multi_turn("sort", [("pass", 1.0)], sample=0)
    write_run(tmp_path, [first, other, again])
    loaded = load_run(tmp_path)
    assert [t.task_name for t in loaded] == ["add", "sort"]
    assert loaded[0].final_reward == 1.0


def test_an_empty_trajectories_file_is_an_error(tmp_path: Path) -> None:
    """A run with no finished episode cannot be reported on."""
    (tmp_path / "trajectories.jsonl").write_text("\n\n")
    with pytest.raises(RunFormatError, match="no episodes"):
        load_run(tmp_path)


def test_load_summary_returns_the_dict_or_none_and_rejects_bad_json(tmp_path: Path) -> None:
    """summary.json is optional, but when present it must be a JSON object."""
    assert load_summary(tmp_path) is None
    (tmp_path / "summary.json").write_text(json.dumps({"pass@1": 0.5}))
    assert load_summary(tmp_path) == {"pass@1": 0.5}
    (tmp_path / "summary.json").write_text("{oops")
    with pytest.raises(RunFormatError, match=r"summary\.json, line 1"):
        load_summary(tmp_path)


def test_run_mode_names_the_mode_and_refuses_a_mixed_run() -> None:
    """One mode per run; mixing single-step and multi-turn episodes is an error."""
    multi = multi_turn("add", [("pass", 1.0)])
    single = single_step("add", True)
    assert run_mode([multi]) == "multi_turn"
    assert run_mode([single]) == "single_step"
    with pytest.raises(RunFormatError, match="one mode"):
        run_mode([multi, single])
