"""What an episode leaves behind: redacted results, its trajectory, turn records and info."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentenv.envs.recording import Recorder, Submission, graded_info, infra_info
from agentenv.errors import SandboxError
from agentenv.grading.result import Failure, RunResult
from agentenv.tasks.schema import Task

TASK = Task(name="t", prompt="p", entry_point="f", checks=("assert f(1) == 2",), source="unit")


def opened() -> Recorder:
    recorder = Recorder()
    recorder.open(TASK, seed=7, max_turns=3, token_budget=None, template_ids={"system": "abc"},
                  opening=[("system", "s"), ("user", "u")], mode="multi_turn",
                  feedback_from="all", decided_by="checks", metadata={"tokenizer": "cl100k_base"})
    return recorder


def test_a_trajectory_opens_with_the_options_and_the_tasks_source() -> None:
    trajectory = opened().trajectory
    assert trajectory is not None
    assert (trajectory.task_name, trajectory.seed, trajectory.max_turns) == ("t", 7, 3)
    assert trajectory.opening == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert trajectory.metadata == {"tokenizer": "cl100k_base", "source": "unit"}


def test_secret_values_are_redacted_before_anything_reads_a_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_API_KEY", "sk-secret-value-123456")
    recorder = opened()  # secrets are read when the episode starts
    leaked = RunResult.from_counts(0, 1, timed_out=False, stdout="key sk-secret-value-123456",
                                   failures=(Failure(0, "c", "assertion", "got sk-secret-value-123456"),))
    clean = recorder.redact(leaked)
    assert "sk-secret-value-123456" not in clean.stdout + clean.failures[0].message


def test_turn_records_carry_token_ids_only_for_a_reply_graded_as_sent() -> None:
    recorder = opened()
    action = SimpleNamespace(prompt_token_ids=[1, 2], token_ids=[3], logprobs=[-0.5],
                             usage=None, finish_reason="stop")
    result = RunResult.from_counts(1, 1, timed_out=False)
    whole = Submission(TASK, "text", "def f(x): return x + 1", action)
    cut = Submission(TASK, "te", "", action, cut=True)
    first = recorder.turn(whole, turn=1, hidden=result, visible=None, score=1.0, action_tokens=3,
                          observation_tokens=0, cumulative_tokens=20, feedback="", stop_reason="solved")
    second = recorder.turn(cut, turn=2, hidden=result, visible=None, score=1.0, action_tokens=2,
                           observation_tokens=0, cumulative_tokens=22, feedback="", stop_reason="solved")
    assert first.completion_token_ids == [3] and first.logprobs == [-0.5]
    assert second.completion_token_ids is None and second.finish_reason == "length"
    assert recorder.trajectory is not None and recorder.trajectory.stop_reason == "solved"


def test_an_infrastructure_fault_is_flagged_until_a_turn_is_graded() -> None:
    recorder = opened()
    reason = recorder.infra_fault(SandboxError("worker lost"), None)
    assert recorder.trajectory is not None and recorder.trajectory.infra_error == reason
    assert reason.startswith("SandboxError") and "worker lost" in reason
    recorder.turn(Submission(TASK, "t", "c", None), turn=1,
                  hidden=RunResult.from_counts(0, 1, timed_out=False), visible=None, score=0.0,
                  action_tokens=1, observation_tokens=1, cumulative_tokens=5, feedback="f",
                  stop_reason=None)
    assert recorder.trajectory.infra_error is None


def test_info_holds_no_hidden_value_under_the_visible_view() -> None:
    shown = RunResult.from_counts(1, 2, timed_out=False, isolation="strict")
    common = dict(task=TASK, turn=1, shown=shown, outcome="wrong_answer", visible=shown,
                  feedback_trimmed=False, reply_cut=False, action_tokens=3, observation_tokens=4,
                  tokens_used=10, tokens_left=None, isolation="strict", terminated=False,
                  truncated=False, stop_reason=None)
    hidden_view = graded_info(view="hidden", hidden_extras={"delta": 0.5, "exec_seconds": 0.1},
                              **common)  # type: ignore[arg-type]
    visible_view = graded_info(view="visible", hidden_extras=None, **common)  # type: ignore[arg-type]
    assert hidden_view["delta"] == 0.5 and "delta" not in visible_view
    assert "exec_seconds" not in visible_view and visible_view["passed"] == 1
    flagged = infra_info(task=TASK, turn=2, view="visible", reply_cut=False, tokens_used=10,
                         tokens_left=None, stop_reason=None, reason="SandboxError: x")
    assert flagged["outcome"] == "infra_error" and flagged["infra_error"] == "SandboxError: x"
