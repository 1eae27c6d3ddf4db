"""Episode records: one ``TurnRecord`` per ``step()``, gathered in a ``Trajectory``.

These are the JSON-shaped records that environments write, the rollout runner stores one per
line in ``trajectories.jsonl``, and ``agentenv.credit`` / ``agentenv.report`` read back. They
round-trip through ``to_dict``/``from_dict`` (and ``Trajectory.to_json``/``from_json``), by
:mod:`agentenv.serial`. ``Completion`` is the raw text a policy returns,
optionally carrying the server's usage numbers and finish reason so they reach the record.
``episode_weights`` says how much each record weighs in a run's numbers (a repair tree's
branches share their root's weight).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentenv import serial
from agentenv.choices import FeedbackSource, Mode, StopReason, values
from agentenv.choices import Outcome as OutcomeKind
from agentenv.grading.result import Failure, RunResult

__all__ = [
    "OUTCOMES",
    "PARTIAL_STOP_REASONS",
    "RESEARCHER_ONLY",
    "STOP_REASONS",
    "Completion",
    "Outcome",
    "Trajectory",
    "TurnRecord",
    "classify_outcome",
    "code_hash",
    "episode_weights",
    "weighted_mean",
]

Outcome = Literal["no_code", "syntax_error", "runtime_error", "timeout", "wrong_answer", "pass"]
OUTCOMES: tuple[str, ...] = values(OutcomeKind)
# "single_step" ends every CodingEnv episode; "solved", "max_turns" and "token_budget" are
# MultiTurnCodingEnv's; "context_length" and "policy_error" end an episode of either kind whose
# model call the server rejected (the rollout loop sets them, keeping the turns graded so far).
STOP_REASONS: tuple[str, ...] = values(StopReason)
# The stop reasons of a partial episode: not ended, only stopped by the infrastructure (the model
# server down, a sandbox fault, a cancelled run) with its graded turns kept; a resumed run
# continues it from its last graded turn (see agentenv.rollout.partial).
PARTIAL_STOP_REASONS: tuple[str, ...] = (StopReason.SERVER_UNAVAILABLE.value, StopReason.INTERRUPTED.value)
# The fields of a TurnRecord computed from the hidden checks. Under feedback_from="visible" the
# policy never saw them (its feedback came from a separate run of the visible checks alone):
# they are for the researcher, and a trajectory says so in its "researcher_only" list.
RESEARCHER_ONLY: tuple[str, ...] = ("outcome", "passed", "total", "fraction", "reward", "delta",
                                    "newly_passed", "newly_failed", "exec_seconds", "timed_out",
                                    "failures", "passed_indices")


class Completion(str):
    """Raw policy text that may also carry ``usage`` and ``finish_reason`` from the server, and,
    when the server returns them (vLLM's ``return_token_ids``, ``logprobs``), the prompt and
    completion token ids and the completion's per-token logprobs.

    It *is* a ``str``, so every place that takes raw text takes it; environments read the
    extra attributes, when present, into the turn record.
    """

    usage: dict[str, int] | None
    finish_reason: str | None
    prompt_token_ids: tuple[int, ...] | None
    token_ids: tuple[int, ...] | None
    logprobs: tuple[float, ...] | None

    def __new__(cls, text: str, usage: Mapping[str, int] | None = None,
                finish_reason: str | None = None, *, prompt_token_ids: Sequence[int] | None = None,
                token_ids: Sequence[int] | None = None, logprobs: Sequence[float] | None = None
                ) -> Completion:
        obj = super().__new__(cls, text)
        obj.usage = dict(usage) if usage is not None else None
        obj.finish_reason = finish_reason
        obj.prompt_token_ids = tuple(int(i) for i in prompt_token_ids) if prompt_token_ids is not None else None
        obj.token_ids = tuple(int(i) for i in token_ids) if token_ids is not None else None
        obj.logprobs = tuple(float(x) for x in logprobs) if logprobs is not None else None
        return obj


def code_hash(code: str) -> str:
    """Short stable hash of extracted code (whitespace at the ends ignored)."""
    return hashlib.sha256(code.strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]


def classify_outcome(code: str, result: RunResult) -> Outcome:
    """Name what happened to one submission, most severe cause first."""
    if not code.strip():
        return "no_code"
    if result.all_passed:
        return "pass"
    kinds = {f.kind for f in result.failures}
    if "syntax" in kinds and result.passed == 0:
        return "syntax_error"
    if result.timed_out or "timeout" in kinds:
        return "timeout"
    if kinds & {"exception", "no_result"} and not kinds & {"assertion"}:
        return "runtime_error"
    return "wrong_answer"


@dataclass(frozen=True)
class TurnRecord:
    """Everything one ``step()`` did, for replay and credit assignment.

    ``delta`` is this turn's reward minus the previous turn's (the first turn's previous reward
    is 0). ``newly_passed``/``newly_failed`` are check indices relative to the previous turn.
    Token counts are what this turn added: ``action_tokens`` for the policy's text,
    ``observation_tokens`` for the feedback it got back; ``cumulative_tokens`` is the running
    total of the whole conversation, as the API counts it. ``usage``/``finish_reason`` come from
    the policy's server; ``reply_cut`` says the reply overran the observation's ``max_tokens``
    and was cut there before grading (its ``finish_reason`` is then "length").
    ``prompt_token_ids``/``completion_token_ids``/``logprobs`` are the server's, when the policy
    returned them (a :class:`Completion` that carries them); None otherwise, and for a cut reply
    (its ids would not match the text that was graded).
    """

    turn: int
    response_text: str
    code: str
    code_hash: str
    outcome: Outcome
    passed: int
    total: int
    fraction: float
    reward: float
    delta: float
    newly_passed: tuple[int, ...] = ()
    newly_failed: tuple[int, ...] = ()
    action_tokens: int = 0
    observation_tokens: int = 0
    cumulative_tokens: int = 0
    exec_seconds: float = 0.0
    timed_out: bool = False
    failures: tuple[Failure, ...] = ()
    feedback: str = ""
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    passed_indices: tuple[int, ...] = ()
    visible_passed: int | None = None
    visible_total: int | None = None
    reply_cut: bool = False
    prompt_token_ids: tuple[int, ...] | None = None
    completion_token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = serial.to_data(self)
        return data

    @classmethod
    def from_result(
        cls,
        *,
        turn: int,
        response_text: str,
        code: str,
        result: RunResult,
        reward: float,
        previous: TurnRecord | None = None,
        visible: RunResult | None = None,
        **extra: Any,
    ) -> TurnRecord:
        """Build the record of one scored submission; delta and newly_* are relative to ``previous``."""
        failed = set(result.failed_indices)
        passed_now = tuple(i for i in range(result.total) if i not in failed)
        before = set(previous.passed_indices) if previous is not None else set()
        return cls(
            turn=turn,
            response_text=str(response_text),
            code=code,
            code_hash=code_hash(code),
            outcome=classify_outcome(code, result),
            passed=result.passed,
            total=result.total,
            fraction=result.fraction,
            reward=reward,
            delta=reward - (previous.reward if previous is not None else 0.0),
            newly_passed=tuple(i for i in passed_now if i not in before),
            newly_failed=tuple(sorted(before - set(passed_now))),
            exec_seconds=result.exec_seconds,
            timed_out=result.timed_out,
            failures=result.failures,
            passed_indices=passed_now,
            visible_passed=visible.passed if visible is not None else None,
            visible_total=visible.total if visible is not None else None,
            **extra,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnRecord:
        return serial.from_data(dict(data), cls)


@dataclass
class Trajectory:
    """One episode: the task, the settings, a TurnRecord per step and how it ended.

    ``stop_reason`` is "solved", "max_turns", "token_budget" or "single_step", or
    "context_length"/"policy_error" when the server rejected a model call; ``None`` while
    the episode is running; "server_unavailable"/"interrupted" for a partial episode
    (:attr:`partial`), stopped by the infrastructure and continued on resume; "infra_error" for
    a single-step episode the sandbox could not grade. ``infra_error`` is the fault's reason
    when the episode's last submission could not be graded (:attr:`infra_failed`: in no
    metric), None otherwise. ``template_ids`` maps each template used ("system", "task",
    "feedback") to ``name@contenthash`` so prompt experiments can be told apart; ``opening``
    holds the messages the episode opened with (the rendered system and task prompts, in chat
    format), so that with the turns the whole conversation can be read back from the record.
    ``decided_by`` says which tests decided termination ("checks": the hidden checks;
    "visible_checks": the visible ones, ``stop_when="visible"``). With ``feedback_from="visible"``
    the turn fields in :data:`RESEARCHER_ONLY` come from hidden checks the policy never saw.
    """

    task_name: str
    seed: int | None = None
    max_turns: int = 1
    token_budget: int | None = None
    template_ids: dict[str, str] = field(default_factory=dict)
    opening: list[dict[str, str]] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    stop_reason: StopReason | None = None
    difficulty: str | None = None
    mode: Mode = Mode.MULTI_TURN
    feedback_from: FeedbackSource = FeedbackSource.ALL
    decided_by: str = "checks"
    episode_id: str | None = None
    sample: int = 0
    policy: str | None = None
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    infra_error: str | None = None

    @property
    def infra_failed(self) -> bool:
        """The sandbox could not grade the episode's last submission (an infrastructure fault,
        :attr:`infra_error` says which): no score, so no metric counts it."""
        return self.infra_error is not None

    @property
    def done(self) -> bool:
        """The episode has ended (a partial one has not: it is to be continued)."""
        return self.stop_reason is not None and not self.partial

    @property
    def partial(self) -> bool:
        """Stopped by the infrastructure before its end, its graded turns kept (see
        :data:`PARTIAL_STOP_REASONS`): neither terminated nor truncated, and left out of a
        run's metrics until a resumed run finishes it."""
        return self.stop_reason in PARTIAL_STOP_REASONS

    @property
    def terminated(self) -> bool:
        """Ended because the task was solved (an absorbing state)."""
        return self.stop_reason in ("solved",) or (
            self.stop_reason == "single_step" and bool(self.turns) and self.turns[-1].outcome == "pass"
        )

    @property
    def truncated(self) -> bool:
        """Ended by a limit (turns, tokens, the model's context) before the task was solved."""
        return self.stop_reason in ("max_turns", "token_budget", "context_length", "policy_error")

    @property
    def solved_turn(self) -> int | None:
        """1-based turn at which all hidden checks first passed, or None."""
        for record in self.turns:
            if record.outcome == "pass":
                return record.turn
        return None

    @property
    def first_turn_solved(self) -> bool:
        return self.solved_turn == 1

    @property
    def final_reward(self) -> float:
        return self.turns[-1].reward if self.turns else 0.0

    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.turns]

    @property
    def total_tokens(self) -> int:
        return self.turns[-1].cumulative_tokens if self.turns else 0

    @property
    def action_tokens(self) -> int:
        return sum(t.action_tokens for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data, with what is derived from it (read back, it is ignored):
        the turn fields the policy never saw (``feedback_from="visible"``), how it ended and
        its totals."""
        return {
            **serial.to_data(self),
            "researcher_only": list(RESEARCHER_ONLY) if self.feedback_from == "visible" else [],
            "partial": self.partial,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "first_turn_solved": self.first_turn_solved,
            "solved_turn": self.solved_turn,
            "final_reward": self.final_reward,
            "total_tokens": self.total_tokens,
            "action_tokens": self.action_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trajectory:
        return serial.from_data(dict(data), cls)

    def to_json(self) -> bytes:
        """One line of ``trajectories.jsonl`` (no newline): :meth:`to_dict` as JSON."""
        return serial.encode(self.to_dict())

    @classmethod
    def from_json(cls, line: bytes | str) -> Trajectory:
        """A trajectory read from one line of ``trajectories.jsonl``."""
        return serial.decode(line, cls)


def episode_weights(trajectories: Sequence[Trajectory]) -> list[float]:
    """Each trajectory's weight in a run's numbers: 1, or for a branch of a repair tree
    (``metadata["tree"]["branch"]`` set) one over the number of its root's branches among
    ``trajectories``, so that every root counts once, as a plain run's episode does."""
    keys: list[tuple[str, Any] | None] = []
    for t in trajectories:
        tree = t.metadata.get("tree")
        if isinstance(tree, Mapping) and tree.get("branch") is not None:
            keys.append((t.task_name, tree.get("root")))
        else:
            keys.append(None)
    counts = Counter(key for key in keys if key is not None)
    return [1.0 if key is None else 1.0 / counts[key] for key in keys]


def weighted_mean(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """The mean of the values that are not None, each weighing its weight (see
    :func:`episode_weights`); None when no value (or no weight) is left."""
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None]
    total = math.fsum(w for _, w in pairs)
    return math.fsum(v * w for v, w in pairs) / total if pairs and total else None
