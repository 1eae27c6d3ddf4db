"""The command line as a click package: global options before or after the subcommand, option
types that refuse bad values as one line pointing at the subcommand's help, help and version,
one module per command, and a resumed run's progress seeded from the runner's own resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from agentenv.cli import app, main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("argv", "option", "help_of"), [
    (["run", "--limit", "0"], "--limit", "agentenv run"),
    (["run", "--samples", "two"], "--samples", "agentenv run"),
    (["run", "--temperature", "nan"], "--temperature", "agentenv run"),
    (["run", "--temperature", "-1"], "--temperature", "agentenv run"),
    (["run", "--policy-timeout", "0"], "--policy-timeout", "agentenv run"),
    (["run", "--max-retries", "-1"], "--max-retries", "agentenv run"),
    (["run", "--repair-tree", "5"], "--repair-tree", "agentenv run"),
    (["run", "--repair-tree", "0,2"], "--repair-tree", "agentenv run"),
    (["run", "--backend", "k8s"], "--backend", "agentenv run"),
    (["check", "x.py", "--task", "t", "--isolation", "none"], "--isolation", "agentenv check"),
    (["check", "x.py"], "--task", "agentenv check"),
    (["tasks", "validate", "--timeout", "-2"], "--timeout", "agentenv tasks validate"),
    (["report", "r", "--k", "0"], "--k", "agentenv report"),
    (["compare", "a", "b", "--boot", "0"], "--boot", "agentenv compare"),
])
def test_a_bad_value_is_one_line_naming_the_option_and_the_help(
        argv: list[str], option: str, help_of: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert option in lines[0] and f"(see `{help_of} --help`)" in lines[0]


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_goes_before_or_after_the_subcommand(
        where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = ["run", "--limit", "1", "--no-progress", "--out", str(tmp_path / "r")]
    argv = ["-q", *run] if where == "before" else [*run, "-q"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and err == "" and "overall" in out


def test_a_log_level_given_after_the_subcommand_is_the_one_used(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "--log-level", "info", "tasks", "list", "--log-level", "loud")
    assert code == 2 and "unknown log level 'loud'" in err and "`agentenv tasks list --help`" in err


def test_help_and_version_exit_0_and_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "run", "-h")
    assert code == 0 and "--repair-tree" in out and "--log-level" in out
    code, out, _err = run_cli(capsys, "--version")
    assert code == 0 and out.startswith("agentenv ")
    code, out, _err = run_cli(capsys)
    assert code == 2 and "run" in out and "compare" in out


def test_every_command_lives_in_its_own_module() -> None:
    modules = {name: command.callback.__module__ for name, command in app.commands.items()
               if command.callback is not None}
    assert modules == {"run": "agentenv.cli.run", "tasks": "agentenv.cli.tasks", "check": "agentenv.cli.check",
                       "report": "agentenv.cli.report", "compare": "agentenv.cli.compare"}
    tasks = app.commands["tasks"]
    assert isinstance(tasks, click.Group) and sorted(tasks.commands) == ["list", "show", "validate"]


def test_a_resumed_run_shows_the_runners_count_and_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The progress line of a resumed run counts the episodes the runner resumed (not a second
    reading of the directory): 2 of 4 after a 2-task run, and the bar's mean covers the resumed
    episodes too, as the summary's does."""
    out_dir = tmp_path / "run"
    assert run_cli(capsys, "run", "--limit", "2", "--out", str(out_dir), "--no-progress")[0] == 0
    code, _out, err = run_cli(capsys, "run", "--limit", "2", "--samples", "2", "--out", str(out_dir))
    summary = json.loads((out_dir / "summary.json").read_text())
    assert code == 0 and f"resuming: 2 of 4 episodes already in {out_dir}" in err
    assert summary["episodes"] == 4 and f"mean reward {summary['mean_reward']:.3f}" in err


def test_python_dash_m_runs_the_package(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agentenv.cli", "tasks", "list", "--limit", "1"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and "1 task(s) in builtin" in done.stdout, done.stderr
