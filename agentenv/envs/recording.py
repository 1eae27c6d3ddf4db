"""What an episode leaves behind: its :class:`~agentenv.records.Trajectory`, a
:class:`~agentenv.records.TurnRecord` per graded turn, the ``info`` of each step, and the
redaction that comes first.

:class:`Recorder` opens the trajectory at reset (options, templates, the opening messages),
redacts every result before anything reads it (values of secret-looking environment variables:
grading redacts its own results, this covers a custom grader's too), records each graded turn
(with the server's token ids and logprobs when the policy returned them, never for a reply that
was cut) and flags a step the sandbox could not grade (an infrastructure fault: no turn record,
the fault kept until a later step is graded). :func:`graded_info` and :func:`infra_info` build
the step's :class:`~agentenv.envs.info.StepInfo`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentenv.choices import FeedbackSource, Mode, StopReason
from agentenv.envs.info import StepInfo
from agentenv.grading.redact import redact_result, secret_values
from agentenv.grading.result import RunResult
from agentenv.records import Trajectory, TurnRecord
from agentenv.tasks.schema import Task

__all__ = ["Recorder", "Submission", "graded_info", "infra_info"]


@dataclass(frozen=True)
class Submission:
    """A step in progress: what the policy sent, before grading."""

    task: Task
    text: str
    code: str
    action: object
    cut: bool = False  # the reply overran the observation's max_tokens and was cut there

    def token_record(self) -> dict[str, Any]:
        """The server's token ids and logprobs for the turn record, when the policy returned
        them (never for a cut reply: they would not match the text that was graded)."""
        if self.cut:
            return {}
        return {"prompt_token_ids": getattr(self.action, "prompt_token_ids", None),
                "completion_token_ids": getattr(self.action, "token_ids", None),
                "logprobs": getattr(self.action, "logprobs", None)}


class Recorder:
    """The trajectory of the episode in progress, and the secrets its records must not hold."""

    def __init__(self) -> None:
        self.trajectory: Trajectory | None = None
        self._secrets: tuple[str, ...] = ()

    def open(self, task: Task, *, seed: int | None, max_turns: int, token_budget: int | None,
             template_ids: Mapping[str, str], opening: Sequence[tuple[str, str]], mode: Mode,
             feedback_from: FeedbackSource, decided_by: str,
             metadata: Mapping[str, Any]) -> Trajectory:
        """Start the trajectory of a new episode."""
        self._secrets = secret_values()
        self.trajectory = Trajectory(
            task_name=task.name, seed=seed, max_turns=max_turns, token_budget=token_budget,
            template_ids=dict(template_ids),
            opening=[{"role": role, "content": content} for role, content in opening],
            difficulty=task.difficulty, mode=mode, feedback_from=feedback_from,
            decided_by=decided_by, metadata={**metadata, "source": task.source})
        return self.trajectory

    def resume(self, data: Mapping[str, Any], seed: int | None) -> Trajectory:
        """Continue a snapshot's trajectory (``seed``, when given, is the branch's own)."""
        self._secrets = secret_values()
        trajectory = Trajectory.from_dict(data)
        if seed is not None:
            trajectory.seed = seed
        self.trajectory = trajectory
        return trajectory

    def redact(self, result: RunResult) -> RunResult:
        return redact_result(result, self._secrets)

    @property
    def last_turn(self) -> TurnRecord | None:
        assert self.trajectory is not None
        return self.trajectory.turns[-1] if self.trajectory.turns else None

    def turn(self, sub: Submission, *, turn: int, hidden: RunResult, visible: RunResult | None,
             score: float, action_tokens: int, observation_tokens: int, cumulative_tokens: int,
             feedback: str, stop_reason: StopReason | None) -> TurnRecord:
        """Record a graded turn (and the episode's stop reason so far)."""
        trajectory = self.trajectory
        assert trajectory is not None
        record = TurnRecord.from_result(
            turn=turn, response_text=sub.text, code=sub.code, result=hidden, reward=score,
            previous=self.last_turn, visible=visible,
            action_tokens=action_tokens, observation_tokens=observation_tokens,
            cumulative_tokens=cumulative_tokens, feedback=feedback,
            usage=getattr(sub.action, "usage", None),
            finish_reason="length" if sub.cut else getattr(sub.action, "finish_reason", None),
            reply_cut=sub.cut, **sub.token_record())
        trajectory.turns.append(record)
        trajectory.infra_error = None  # graded: a fault of an earlier try of this turn is past
        trajectory.stop_reason = stop_reason
        return record

    def infra_fault(self, exc: BaseException, stop_reason: StopReason | None) -> str:
        """Flag a step the sandbox could not grade; the fault as recorded."""
        trajectory = self.trajectory
        assert trajectory is not None
        reason = f"{type(exc).__name__}: {exc}"[:300]
        trajectory.infra_error = reason
        if stop_reason is not None:
            trajectory.stop_reason = stop_reason
        return reason


def graded_info(*, task: Task, turn: int, view: str, shown: RunResult, outcome: str,
                visible: RunResult | None, feedback_trimmed: bool, reply_cut: bool,
                action_tokens: int, observation_tokens: int, tokens_used: int,
                tokens_left: int | None, isolation: str, terminated: bool, truncated: bool,
                stop_reason: str | None, hidden_extras: Mapping[str, float] | None) -> StepInfo:
    """A graded step's ``info``. ``hidden_extras`` (``delta``, ``exec_seconds``) only where the
    policy's view is the hidden checks: under ``view="visible"`` no value here depends on one."""
    info: StepInfo = {
        "task_name": task.name, "turn": turn, "view": view,
        "passed": shown.passed, "total": shown.total, "fraction": shown.fraction,
        "timed_out": shown.timed_out, "outcome": outcome,
        "visible_passed": visible.passed if visible is not None else None,
        "visible_total": visible.total if visible is not None else None,
        "failures": [f.to_dict() for f in shown.failures],
        "feedback_trimmed": feedback_trimmed, "reply_cut": reply_cut,
        "action_tokens": action_tokens, "observation_tokens": observation_tokens,
        "tokens_used": tokens_used, "tokens_left": tokens_left, "isolation": isolation,
        "terminated": terminated, "truncated": truncated, "stop_reason": stop_reason,
        "infra_error": None,
    }
    if hidden_extras is not None:
        info["delta"] = hidden_extras["delta"]
        info["exec_seconds"] = hidden_extras["exec_seconds"]
    return info


def infra_info(*, task: Task, turn: int, view: str, reply_cut: bool, tokens_used: int,
               tokens_left: int | None, stop_reason: str | None, reason: str) -> StepInfo:
    """The ``info`` of a step the sandbox could not grade: nothing scored, the fault named."""
    return {
        "task_name": task.name, "turn": turn, "view": view,
        "passed": 0, "total": 0, "fraction": 0.0, "timed_out": False, "outcome": "infra_error",
        "visible_passed": None, "visible_total": None, "failures": [],
        "feedback_trimmed": False, "reply_cut": reply_cut, "action_tokens": 0,
        "observation_tokens": 0, "tokens_used": tokens_used, "tokens_left": tokens_left,
        "isolation": "", "terminated": False, "truncated": False,
        "stop_reason": stop_reason, "infra_error": reason,
    }
