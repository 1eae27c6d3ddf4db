"""Rough edges a researcher meets on the first day: a policy module in the current directory,
task sets given the same way to every subcommand, errors that point to the subcommand's help,
Ctrl-C without a traceback, a syntax error fed back once, one set of metric names, no
invitation to report on a failed run, `tasks show` without trailing spaces, and a directly
awaited `acall` that leaves no unclosed session behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentenv import MultiTurnCodingEnv
from agentenv.cli import main
from agentenv.tasks.builtin import builtin_tasks
from agentenv.testing import ChatReply, ChatServer

TASKS = builtin_tasks()[:2]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in TASKS))
    return path


# -- --policy module:Class ------------------------------------------------------------------------

def test_a_policy_module_in_the_current_directory_is_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The `agentenv` script's directory, not the current one, starts sys.path; the CLI looks
    in the current directory too, as `python -m` would."""
    (tmp_path / "rough_edges_policy.py").write_text(textwrap.dedent('''
        class Adder:
            def __init__(self, tasks=None):
                self.tasks = tasks

            def __call__(self, obs):
                return "```python\\ndef add(a, b):\\n    return a + b\\n```"
        '''))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "rough_edges_policy", raising=False)
    try:
        code, _out, err = run_cli(capsys, "run", "--policy", "rough_edges_policy:Adder", "--limit", "1",
                                  "--out", str(tmp_path / "run"), "--no-progress")
    finally:
        sys.modules.pop("rough_edges_policy", None)
    assert code == 0, err
    (record,) = [json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert record["final_reward"] == 1.0


# -- task sets and help pointers ----------------------------------------------------------------

@pytest.mark.parametrize("action", ["list", "validate"])
def test_tasks_list_and_validate_take_the_set_as_run_does(
        action: str, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["--no-progress"] if action == "validate" else []
    by_flag = run_cli(capsys, "tasks", action, "--tasks", str(tasks_file), *extra)
    by_position = run_cli(capsys, "tasks", action, str(tasks_file), *extra)
    assert by_flag[0] == by_position[0] == 0
    assert by_flag[1] == by_position[1]
    assert (TASKS[1].name if action == "list" else "2 of 2 reference solution(s) pass") in by_flag[1]
    code, _out, err = run_cli(capsys, "tasks", action, "builtin", "--tasks", str(tasks_file))
    assert code == 2 and "two task sets" in err and f"`agentenv tasks {action} --help`" in err


@pytest.mark.parametrize(("argv", "help_of"), [
    (["run", "--bogus"], "agentenv run"),
    (["tasks", "list", "--bogus"], "agentenv tasks list"),
    (["tasks"], "agentenv tasks"),
    (["run", "--option", "colour=red", "--limit", "1"], "agentenv run"),
    (["tasks", "validate", "--option", "colour=red"], "agentenv tasks validate"),
    (["run", "--policy", "mock", "--model", "m"], "agentenv run"),
])
def test_errors_point_to_the_help_of_the_subcommand_given(
        argv: list[str], help_of: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, *argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert f"`{help_of} --help`" in lines[0]


# -- Ctrl-C -------------------------------------------------------------------------------------

def test_ctrl_c_prints_the_resume_line_and_no_traceback(tmp_path: Path) -> None:
    """SIGINT once the first episode is stored, while sandbox runs are in flight: exit 130, the
    line to resume, and no "exception was never retrieved" traceback from the event loop."""
    out = tmp_path / "run"
    run = subprocess.Popen([sys.executable, "-m", "agentenv.cli", "run", "--samples", "40", "--out", str(out),
                            "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120  # hang guard only
        stored = out / "trajectories.jsonl"
        while run.poll() is None and not (stored.exists() and stored.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert run.poll() is None, "the run ended before it could be interrupted"
        run.send_signal(signal.SIGINT)
        _stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, stderr
    assert f"--out {out} to resume" in stderr
    assert "Traceback" not in stderr and "never retrieved" not in stderr


# -- feedback -------------------------------------------------------------------------------------

def test_a_syntax_error_in_the_whole_solution_is_one_feedback_line() -> None:
    env = MultiTurnCodingEnv(max_turns=2)
    env.reset(task_index=0)
    obs, _reward, _done, _info = env.step("```python\ndef add(a, b)\n    return a + b\n```")
    feedback = obs["messages"][-1]["content"]
    total = len(env.tasks[0].checks)
    assert feedback.count("SyntaxError") == 1
    assert f"{total} tests, all failing the same way" in feedback


def test_failures_of_separate_checks_are_still_listed_one_by_one() -> None:
    env = MultiTurnCodingEnv(max_turns=2)
    env.reset(task_index=0)
    obs, _reward, _done, _info = env.step("```python\ndef add(a, b):\n    return a - b\n```")
    feedback = obs["messages"][-1]["content"]
    assert "all failing the same way" not in feedback
    assert feedback.count("\n- `assert add(") >= 2


# -- the run's table and the report ---------------------------------------------------------------

def test_the_run_table_and_the_report_use_the_same_metric_names(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code, run_out, _ = run_cli(capsys, "run", "--tasks", str(tasks_file), "--max-turns", "3", "--out", str(out),
                               "--no-progress")
    assert code == 0
    code, report_out, _ = run_cli(capsys, "report", str(out), "-q")
    assert code == 0
    run_header = next(line for line in run_out.splitlines() if "pass@1" in line)
    report_header = next(line for line in report_out.splitlines() if "pass@1" in line)
    for name in ("pass@1", "solve@3", "repair", "mean reward", "mean turns", "conv tok"):
        assert name in run_header and name in report_header, name
    assert "solve rate" not in run_out and "tokens/episode" not in run_out


def test_no_invitation_to_report_after_a_run_that_stopped(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def down_after_preflight(body: dict) -> ChatReply:
        return ChatReply("OK") if body.get("max_tokens") == 1 else ChatReply("worker died", status=503)

    with ChatServer(down_after_preflight) as server:
        code, out, err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url,
                                 "--tasks", str(tasks_file), "--max-retries", "0", "--breaker-failures", "1",
                                 "--breaker-seconds", "0", "--out", str(tmp_path / "run"), "--no-progress")
    assert code == 1 and "stopped:" in err
    assert "next: agentenv report" not in out


def test_a_run_that_succeeded_still_says_what_to_do_next(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "run", "--tasks", str(tasks_file), "--out", str(tmp_path / "run"),
                           "--no-progress")
    assert code == 0 and "next: agentenv report" in out


# -- tasks show ---------------------------------------------------------------------------------

def test_tasks_show_adds_no_trailing_spaces(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "tasks", "show", "add")
    assert code == 0 and "reference solution" in out and "def add(a, b):" in out
    assert [line for line in out.splitlines() if line != line.rstrip()] == []


# -- acall --------------------------------------------------------------------------------------

def test_a_directly_awaited_acall_leaves_no_unclosed_session() -> None:
    """`asyncio.run(policy.acall(obs))`: the session closes with its loop; a blocking call's
    session and loop thread close when the policy goes."""
    script = textwrap.dedent('''
        import asyncio, gc, warnings
        warnings.simplefilter("always")
        from agentenv.policies import OpenAIPolicy
        from agentenv.testing import ChatServer
        with ChatServer(["OK"]) as server:
            for how in ("async", "sync", "both"):
                policy = OpenAIPolicy("m", base_url=server.url)
                if how != "sync":
                    assert asyncio.run(policy.acall({"prompt": "hi"})) == "OK"
                if how != "async":
                    assert policy({"prompt": "hi"}) == "OK"
                del policy
                gc.collect()
        print("answered")
        ''')
    done = subprocess.run([sys.executable, "-X", "dev", "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONWARNINGS": "always"})
    assert done.returncode == 0 and "answered" in done.stdout, done.stderr
    assert "Unclosed" not in done.stderr and "ResourceWarning" not in done.stderr, done.stderr
