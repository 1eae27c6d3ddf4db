"""MultiTurnCodingEnv: submit code, read which tests failed, revise; with exact RL semantics.

What it owns: the episode logic of the multi-turn environment. ``reset()`` poses a task as a
chat (system + task message rendered from Jinja templates); each ``step(raw_text)`` extracts
the code, grades it against the task's hidden checks, records a :class:`TurnRecord` and either
ends the episode or appends the feedback message. The conversation itself (state machine,
history, token budget) is :class:`agentenv.envs.conversation.Conversation`.

How an episode ends (``info["stop_reason"]``, also ``env.trajectory.stop_reason``):

- ``"solved"``: every hidden check passed, or with ``stop_when="visible"`` every visible one
  (``terminated``; an absorbing state);
- ``"max_turns"``: ``max_turns`` submissions were graded (``truncated``);
- ``"token_budget"``: the next observation, with room for a reply, would not fit in
  ``token_budget`` even with the feedback trimmed (``truncated``). RL code bootstraps values on
  truncation, not termination.

The score of a turn always comes from the hidden ``checks``. What the policy is shown, and what
ends the episode, are two options, and each says what it leaks:

- ``feedback_from="all"`` (default): feedback lists the hidden checks' failures (their text,
  kinds and messages). Everything about the hidden tests reaches the policy; one sandbox run
  grades both lists.
- ``feedback_from="visible"``: the task's ``visible_checks`` run in a sandbox run of their own,
  before the hidden run, and every field the policy can read (``messages``, the observation,
  ``info``, the template variables ``passed``/``total``/``failures``/``outcome``/``timed_out``,
  token counts) is computed from that run alone: what the candidate does on hidden inputs
  (exit, hang, print) cannot show. ``info["view"]`` says which. The hidden results stay in
  ``env.trajectory`` (listed as ``researcher_only``) and in the step's ``reward``.
- ``stop_when="hidden"`` (default): the episode ends when the hidden checks all pass, so whether
  it goes on leaks one bit per turn (hidden all passed or not); the wall time of a step also
  includes the hidden run, which no observation reports.
- ``stop_when="visible"`` (RLEF): the episode ends when the visible checks pass (``decided_by`` is
  ``"visible_checks"``); together with ``feedback_from="visible"`` nothing the policy observes
  depends on the hidden checks. A task without visible checks then runs to ``max_turns``.

A submission the sandbox could not grade (a ``SandboxError``: a worker lost, the pool closed, a
sandbox that could not start) is an infrastructure fault, never the model's failure. By default
(``on_infra_error="flag"``) the step returns reward 0.0 with ``info["infra_error"]`` the fault
(``None`` on every graded step) and ``outcome="infra_error"``; the turn is taken back (no turn
record, the same turn may be stepped again) and ``env.trajectory.infra_error`` holds the fault
until a later step is graded, so an episode left there is in no report's metrics. A multi-turn
step returns ``done=False``; a single-step episode ends (``stop_reason="infra_error"``, neither
terminated nor truncated). ``on_infra_error="raise"`` raises the ``SandboxError`` instead (the
trainer integrations use it to take the turn back their own way).

The step reward (``step_reward``) is paid so that, by default, an episode's summed step rewards
equal its final score: ``"delta"`` pays each turn's score minus the previous one (potential-based
shaping, dense); ``"final"`` pays 0 until the last step, then the final score; ``"absolute"``
pays every turn its own score (a learner that stalls at 0.5 for three turns earns 1.5, more than
one that solves at once: never the default). ``TurnRecord.reward`` is always the turn's score.

Failure messages are truncated, quoted and neutralised, and values of secret-looking environment
variables are redacted (by grading, :mod:`agentenv.grading.redact`, and again here for a
custom grader), before they reach an observation or a record.

The episode logic is I/O-free and shared: ``step`` and ``astep`` differ only in how they call
the :class:`Grader` (the sandbox by default). Pass ``grader=`` to plug in another one, e.g. a
remote sandbox service or, in benchmarks, a stub that measures the env's own overhead.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv.choices import FeedbackSource, Mode, StepReward, StopReason, StopWhen, parse, values
from agentenv.envs.conversation import (
    STOP_REASON_OF,
    Conversation,
    ConversationState,
)
from agentenv.envs.info import StepInfo
from agentenv.errors import ConfigError, SandboxError, SnapshotMismatch
from agentenv.extract import extract_code
from agentenv.grading.redact import redact_result, redact_secrets, secret_values
from agentenv.grading.result import RunResult
from agentenv.grading.scoring import (
    Grader,
    SandboxGrader,
    Scored,
    ascore_apart,
    score_apart,
    split_task,
)
from agentenv.prompts import Prompts
from agentenv.records import Trajectory, TurnRecord, classify_outcome
from agentenv.rewards import RewardFn, checked_reward, dense_reward
from agentenv.settings import DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT
from agentenv.tasks import select
from agentenv.tasks.schema import Task
from agentenv.tokens import TokenCounter, Tokenizer

__all__ = ["FEEDBACK_SOURCES", "STEP_REWARDS", "STOP_CONDITIONS", "EpisodeCore", "EpisodeSnapshot",
           "Grader", "MultiTurnCodingEnv", "SandboxGrader", "redact_secrets", "secret_values"]

FEEDBACK_SOURCES: tuple[str, ...] = values(FeedbackSource)
STOP_CONDITIONS: tuple[str, ...] = values(StopWhen)
# How the step reward is paid (see the class docstring): "delta" sums to the final score.
STEP_REWARDS: tuple[str, ...] = values(StepReward)
TRIM_MARKER = "\n[… feedback truncated to fit the token budget]"
# Below this many tokens of real content, trimmed feedback would say nothing useful.
MIN_FEEDBACK_TOKENS = 16
# Feedback is trimmed so that at least this many tokens stay for the reply that follows it;
# if that cannot be done, the episode ends on its token budget.
MIN_REPLY_TOKENS = 64
@dataclass(frozen=True)
class EpisodeSnapshot:
    """An episode between turns, as plain data: the conversation, the records so far, the last
    feedback, and the env settings it must be restored under."""

    task_name: str
    conversation: Mapping[str, Any]
    trajectory: Mapping[str, Any]
    feedback: str
    settings: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"task_name": self.task_name, "conversation": dict(self.conversation),
                "trajectory": dict(self.trajectory), "feedback": self.feedback,
                "settings": dict(self.settings)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeSnapshot:
        return cls(task_name=str(data["task_name"]), conversation=dict(data["conversation"]),
                   trajectory=dict(data["trajectory"]), feedback=str(data["feedback"]),
                   settings=dict(data["settings"]))


@dataclass(frozen=True)
class _Submission:
    """A step in progress: what the policy sent, before grading."""

    task: Task
    text: str
    code: str
    action: object
    cut: bool = False  # the reply overran the observation's max_tokens and was cut there


StepResult = tuple[dict[str, Any], float, bool, StepInfo]


def _token_record(sub: _Submission) -> dict[str, Any]:
    """The server's token ids and logprobs for the turn record, when the policy returned them
    (never for a cut reply: they would not match the text that was graded)."""
    if sub.cut:
        return {}
    return {"prompt_token_ids": getattr(sub.action, "prompt_token_ids", None),
            "completion_token_ids": getattr(sub.action, "token_ids", None),
            "logprobs": getattr(sub.action, "logprobs", None)}


class EpisodeCore:
    """The one episode core: ``MultiTurnCodingEnv`` is it with ``max_turns`` turns, ``CodingEnv``
    its single-step face (one turn). The I/O-free halves of a step are shared by ``step`` and
    ``astep``, which differ only in how they await the grader."""

    # "multi_turn", or "single_step" for the bandit face (its own stop reason, always terminated)
    mode: str = Mode.MULTI_TURN.value

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        seed: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        token_budget: int | None = None,
        tokenizer: Tokenizer | str | None = None,
        prompts_dir: str | Path | None = None,
        feedback_from: str = "all",
        reward_fn: RewardFn = dense_reward,
        *,
        grader: Grader | None = None,
        isolation: str | None = None,
        stop_when: str = "hidden",
        step_reward: str = "delta",
        on_infra_error: str = "flag",
    ) -> None:
        if tasks is None:
            from agentenv.tasks.builtin import builtin_tasks

            tasks = builtin_tasks()
        self.tasks = list(tasks)
        if not self.tasks:
            raise ConfigError("MultiTurnCodingEnv needs at least one task; pass tasks=load_tasks(...)")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"max_turns must be an int >= 1, got {max_turns!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        feedback_from = parse(FeedbackSource, feedback_from, "feedback_from").value
        stop_when = parse(StopWhen, stop_when, "stop_when").value
        step_reward = parse(StepReward, step_reward, "step_reward").value
        if grader is not None and isolation is not None:
            raise ConfigError("pass isolation= or grader=, not both (a custom grader picks its own isolation)")
        if on_infra_error not in ("flag", "raise"):
            raise ConfigError(f"on_infra_error must be 'flag' or 'raise', got {on_infra_error!r}")
        self.on_infra_error = on_infra_error
        self.max_turns = max_turns
        self.seed = seed
        self.timeout = float(timeout)
        self.feedback_from = feedback_from
        self.stop_when = stop_when
        self.step_reward = step_reward
        # Visible checks get a sandbox run of their own whenever the policy is shown (or stopped
        # by) their result: then nothing it sees can depend on what the code did on hidden inputs.
        self.visible_apart = feedback_from == FeedbackSource.VISIBLE or stop_when == StopWhen.VISIBLE
        self._parts: tuple[Task, Task | None] | None = None
        self._floors: dict[int, int] = {}  # _feedback_floor by turns left (the templates are fixed)
        self.reward_fn = reward_fn
        self.grader: Grader = grader if grader is not None else SandboxGrader(isolation)
        self.prompts = Prompts(prompts_dir)
        self.counter = TokenCounter(tokenizer)
        self._conversation = Conversation(self.counter, token_budget)
        # The task sampler, made on first use: most episodes name their task, and seeding a
        # Mersenne Twister costs more than the rest of building or resetting an env.
        self._rng: random.Random | None = None
        self._rng_seed = seed
        self.current_task: Task | None = None
        self.trajectory: Trajectory | None = None
        self._feedback = ""
        self._secrets: tuple[str, ...] = ()

    # -- public state ---------------------------------------------------------------------------
    @property
    def state(self) -> ConversationState:
        """Where the episode is (see :class:`ConversationState`)."""
        return self._conversation.state

    @property
    def episodes(self) -> int:
        """Episodes started since construction (never goes backwards)."""
        return self._conversation.episodes

    @property
    def token_budget(self) -> int | None:
        return self._conversation.token_budget

    @property
    def template_ids(self) -> Mapping[str, str]:
        return self.prompts.template_ids

    # -- reset ----------------------------------------------------------------------------------
    def reset(self, task_index: int | None = None, *, seed: int | None = None) -> dict[str, Any]:
        """Start an episode on ``tasks[task_index]``, or a seeded random task; return the first observation.

        ``seed`` re-seeds the task sampler first (and is recorded as the episode's seed).
        """
        self._conversation.require("reset")
        if seed is not None:
            self._rng, self._rng_seed = None, seed
        if task_index is None:
            if self._rng is None:
                self._rng = random.Random(self._rng_seed)
            task = self._rng.choice(self.tasks)
        else:
            task = self.tasks[select.task_index(self.tasks, task_index, negative=True)]
        system = self.prompts.system(max_turns=self.max_turns)
        user = self.prompts.task(task, max_turns=self.max_turns)
        prompt_tokens = self._conversation.start([("system", system), ("user", user)])
        self.current_task = task
        self._parts = split_task(task) if self.visible_apart else None
        self._feedback = ""
        self._secrets = secret_values()
        self.trajectory = Trajectory(
            task_name=task.name,
            seed=seed if seed is not None else self.seed,
            max_turns=self.max_turns,
            token_budget=self.token_budget,
            template_ids=dict(self.template_ids),
            opening=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            difficulty=task.difficulty,
            mode=self.mode,
            feedback_from=self.feedback_from,
            decided_by="checks" if self.stop_when == StopWhen.HIDDEN else "visible_checks",
            metadata={
                "tokenizer": self.counter.name,
                "prompt_tokens": prompt_tokens,
                "reward_fn": getattr(self.reward_fn, "__name__", type(self.reward_fn).__name__),
                "step_reward": self.step_reward,
                "source": task.source,
            },
        )
        return self._observation()

    # -- branching ------------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        """What a snapshot may only be restored under: the options that shape an episode."""
        return {"max_turns": self.max_turns, "token_budget": self.token_budget,
                "feedback_from": self.feedback_from, "stop_when": self.stop_when,
                "step_reward": self.step_reward, "mode": self.mode, "tokenizer": self.counter.name,
                "template_ids": dict(self.template_ids)}

    def snapshot(self) -> EpisodeSnapshot:
        """The episode as it stands between turns, to :meth:`restore` later, here or in another
        env built with the same options and tasks (it is plain data: ``to_dict``/``from_dict``).

        A repair tree snapshots a failing state once and restores it for each repair, so the
        shared prefix is never generated or graded again.
        """
        conversation = self._conversation.snapshot()  # raises unless awaiting a submission
        assert self.current_task is not None and self.trajectory is not None
        return EpisodeSnapshot(task_name=self.current_task.name, conversation=conversation,
                               trajectory=self.trajectory.to_dict(), feedback=self._feedback,
                               settings=self._settings())

    def restore(self, snapshot: EpisodeSnapshot, *, seed: int | None = None) -> dict[str, Any]:
        """Continue the episode of ``snapshot`` (a branch of it); return its observation.

        ``seed`` (recorded as the episode's seed, and in the observation) lets each branch sample
        its own continuation.
        """
        if snapshot.settings != self._settings():
            changed = sorted(k for k in snapshot.settings if snapshot.settings.get(k) != self._settings().get(k))
            raise SnapshotMismatch(f"this snapshot was taken under other env settings ({', '.join(changed)}); "
                                   "restore it into an env built with the same options")
        task = next((t for t in self.tasks if t.name == snapshot.task_name), None)
        if task is None:
            raise SnapshotMismatch(f"this snapshot is of task {snapshot.task_name!r}, which this env "
                                   "does not have; build it with the same tasks")
        self._conversation.restore(snapshot.conversation)
        self.current_task = task
        self._parts = split_task(task) if self.visible_apart else None
        self._feedback = snapshot.feedback
        self._secrets = secret_values()
        trajectory = Trajectory.from_dict(snapshot.trajectory)
        if seed is not None:
            trajectory.seed = seed
        self.trajectory = trajectory
        return self._observation()

    def _observation(self) -> dict[str, Any]:
        task = self.current_task
        assert task is not None
        conv = self._conversation
        running = not conv.done
        return {
            "prompt": task.prompt,
            "entry_point": task.entry_point,
            "task_name": task.name,
            "messages": conv.messages(),
            "feedback": self._feedback,
            # the episode's seed (per sample in a rollout run): policies sample with it
            "seed": self.trajectory.seed if self.trajectory is not None else None,
            # the 1-based turn this observation asks for (after the end: the last turn played)
            "turn": conv.turn + 1 if running else conv.turn,
            "turns_left": self.max_turns - conv.turn if running else 0,
            "max_turns": self.max_turns,
            "tokens_used": conv.tokens_used,
            "tokens_left": conv.tokens_left,
            # tokens the reply may have (None without a budget): send it as max_tokens
            "max_tokens": self._reply_limit() if running else 0 if conv.token_budget is not None else None,
        }

    # -- the budget -------------------------------------------------------------------------------
    def _feedback_floor(self, turns_left: int) -> int:
        """Tokens of the shortest feedback :meth:`_fit` may produce: its instructions paragraph
        (rendered for ``turns_left``), the trim marker and the minimum of real content."""
        floor = self._floors.get(turns_left)
        if floor is None:
            tail = self.prompts.feedback(turn=1, turns_left=turns_left, passed=0, total=1, failures=(),
                                         source=self.feedback_from).rsplit("\n\n", 1)[-1]
            floor = self.counter.count(TRIM_MARKER + "\n\n" + tail) + MIN_FEEDBACK_TOKENS + 2  # +2: joins
            self._floors[turns_left] = floor
        return floor

    def _reply_limit(self) -> int | None:
        """The reply's token allowance: what the budget leaves after this request, minus a
        reserve for the next observation and a minimal reply to it, while turns remain after
        this one (without the reserve when it would leave less than a minimal reply)."""
        conv = self._conversation
        if conv.token_budget is None:
            return None
        room = max(0, conv.token_budget - conv.tokens_used)
        turns_after = self.max_turns - conv.turn - 1
        if turns_after > 0:
            # The reply's own closing and the priming of the next request (together, what the
            # reply costs as a history message beyond its content), the feedback message at its
            # shortest, and a minimal reply to it.
            reserve = (self.counter.count_message("", "assistant") + self.counter.count_message("", "user")
                       + self._feedback_floor(turns_after - 1) + MIN_REPLY_TOKENS)
            if room - reserve >= MIN_REPLY_TOKENS:
                return room - reserve
        return room

    # -- step: the I/O-free halves --------------------------------------------------------------
    def _begin_step(self, action: object) -> _Submission:
        limit = self._reply_limit() if self._conversation.state is ConversationState.AWAITING_SUBMISSION else None
        self._conversation.begin_turn()  # raises EnvStateError before reset / after the end
        task = self.current_task
        assert task is not None
        text = str(action) if isinstance(action, str) else ""
        cut = False
        if limit is not None and self.counter.count(text) > limit:
            # Graded as cut, as the server would have cut it had the policy sent max_tokens.
            text, cut = self.counter.truncate(text, limit), True
        return _Submission(task=task, text=text, code=extract_code(text, task.entry_point), action=action,
                           cut=cut)

    def _redacted(self, result: RunResult) -> RunResult:
        # The sandbox redacts its own results; this covers a custom grader's too.
        return redact_result(result, self._secrets)

    def _fit(self, feedback: str) -> str | None:
        """The feedback as it fits the room left with a minimal reply after it (trimmed with a
        marker, its last paragraph, the instructions, kept whole), or None if it cannot."""
        room = self._conversation.room_for_message("user", keep=MIN_REPLY_TOKENS)
        count = self.counter.count
        if room is None or count(feedback) <= room:
            return feedback
        head, sep, tail = feedback.rpartition("\n\n")
        if not sep:
            head, tail = feedback, ""
        ending = TRIM_MARKER + ("\n\n" + tail if tail else "")
        if room < count(ending) + MIN_FEEDBACK_TOKENS:
            return None
        low, high = 0, len(head)  # longest prefix of the head whose text plus the ending fits
        while low < high:
            mid = (low + high + 1) // 2
            if count(head[:mid].rstrip() + ending) <= room:
                low = mid
            else:
                high = mid - 1
        trimmed = head[:low].rstrip() + ending
        if count(trimmed) > room or count(head[:low]) < MIN_FEEDBACK_TOKENS:
            return None
        return trimmed

    def _grade(self, sub: _Submission) -> Scored:
        if self.visible_apart:
            return score_apart(self.grader, sub.task, sub.code, timeout=self.timeout, parts=self._parts)
        return self.grader.score(sub.task, sub.code, timeout=self.timeout)

    async def _agrade(self, sub: _Submission) -> Scored:
        if self.visible_apart:
            return await ascore_apart(self.grader, sub.task, sub.code, timeout=self.timeout, parts=self._parts)
        return await self.grader.ascore(sub.task, sub.code, timeout=self.timeout)

    def _paid(self, score: float, previous: TurnRecord | None, last: bool) -> float:
        """The step reward for a turn that scored ``score`` (see ``step_reward``)."""
        if self.step_reward == StepReward.ABSOLUTE:
            return score
        if self.step_reward == StepReward.FINAL:
            return score if last else 0.0
        return score - (previous.reward if previous is not None else 0.0)

    def _finish_step(self, sub: _Submission, scored: Scored) -> StepResult:
        conv = self._conversation
        trajectory = self.trajectory
        assert trajectory is not None
        task, code = sub.task, sub.code
        hidden = self._redacted(scored.hidden)
        visible = self._redacted(scored.visible) if scored.visible is not None else None
        score = checked_reward(self.reward_fn, hidden, code)  # the turn's score: hidden checks
        turn = conv.turn + 1
        turns_left = self.max_turns - turn
        no_checks = RunResult.from_counts(0, 0, timed_out=False)

        # What the policy may see. Under feedback_from="visible" it is the visible run alone
        # (its own sandbox run), never anything computed from the hidden result.
        shown = hidden if self.feedback_from == FeedbackSource.ALL else (visible if visible is not None else no_checks)
        # Which tests end the episode: the hidden ones, or (RLEF) the visible ones.
        stop_on = hidden if self.stop_when == StopWhen.HIDDEN else (visible if visible is not None else no_checks)
        solved = stop_on.all_passed
        shown_outcome = classify_outcome(code, shown) if shown.total or not code.strip() else "not_shown"

        feedback = self.prompts.feedback(
            turn=turn, turns_left=0 if solved else turns_left, passed=shown.passed, total=shown.total,
            failures=shown.failures, solved=solved and shown.all_passed, outcome=shown_outcome,
            source=self.feedback_from, entry_point=task.entry_point, timed_out=shown.timed_out,
        )

        # Everything that can fail has run: now commit the turn.
        action_tokens = conv.add("assistant", sub.text)
        observation_tokens = 0
        trimmed = False
        next_state: ConversationState
        if solved:
            next_state = ConversationState.SOLVED
        elif turns_left == 0:
            next_state = ConversationState.OUT_OF_TURNS
        else:
            fitted = self._fit(feedback)
            if fitted is None:
                next_state = ConversationState.OUT_OF_TOKENS
            else:
                trimmed = fitted != feedback
                feedback = fitted
                observation_tokens = conv.add("user", feedback)
                next_state = ConversationState.AWAITING_SUBMISSION
        self._feedback = feedback

        previous = trajectory.turns[-1] if trajectory.turns else None
        record = TurnRecord.from_result(
            turn=turn, response_text=sub.text, code=code, result=hidden, reward=score,
            previous=previous, visible=visible,
            action_tokens=action_tokens, observation_tokens=observation_tokens,
            cumulative_tokens=conv.tokens_used, feedback=feedback,
            usage=getattr(sub.action, "usage", None),
            finish_reason="length" if sub.cut else getattr(sub.action, "finish_reason", None),
            reply_cut=sub.cut,
            **_token_record(sub),
        )
        trajectory.turns.append(record)
        trajectory.infra_error = None  # graded: a fault of an earlier try of this turn is past
        conv.end_turn(next_state)
        stop_reason = self._stop_reason(next_state)
        trajectory.stop_reason = stop_reason
        reward = self._paid(score, previous, conv.done)

        info: StepInfo = {
            "task_name": task.name,
            "turn": turn,
            # What the feedback was built from ("hidden" checks, or the "visible" run alone):
            # under "visible", no value in this dict depends on a hidden check.
            "view": "hidden" if self.feedback_from == FeedbackSource.ALL else "visible",
            "passed": shown.passed,
            "total": shown.total,
            "fraction": shown.fraction,
            "timed_out": shown.timed_out,
            "outcome": shown_outcome,
            "visible_passed": visible.passed if visible is not None else None,
            "visible_total": visible.total if visible is not None else None,
            "failures": [f.to_dict() for f in shown.failures],
            "feedback_trimmed": trimmed,
            "reply_cut": sub.cut,
            "action_tokens": action_tokens,
            "observation_tokens": observation_tokens,
            "tokens_used": conv.tokens_used,
            "tokens_left": conv.tokens_left,
            "isolation": (visible or hidden).isolation if self.feedback_from == FeedbackSource.VISIBLE else hidden.isolation,
            "terminated": next_state is ConversationState.SOLVED or self.mode == Mode.SINGLE_STEP,
            "truncated": self.mode != Mode.SINGLE_STEP and next_state in (ConversationState.OUT_OF_TURNS,
                                                                       ConversationState.OUT_OF_TOKENS),
            "stop_reason": stop_reason,
            "infra_error": None,
        }
        if self.feedback_from == FeedbackSource.ALL:
            info["delta"] = record.delta
            info["exec_seconds"] = hidden.exec_seconds
        return self._observation(), reward, conv.done, info

    def _stop_reason(self, state: ConversationState) -> str | None:
        if self.mode == Mode.SINGLE_STEP:
            return StopReason.SINGLE_STEP.value  # a bandit episode simply ends: neither solved nor cut short
        return STOP_REASON_OF.get(state)


    def step(self, action: str) -> StepResult:
        """Grade one submission and advance the conversation."""
        submission = self._begin_step(action)
        try:
            scored = self._grade(submission)
        except BaseException as exc:
            self._conversation.abort_turn()  # nothing was committed: the turn may be retried
            if isinstance(exc, SandboxError) and self.on_infra_error == "flag":
                return self._infra_step(submission, exc)
            raise
        try:
            return self._finish_step(submission, scored)
        except BaseException:
            self._conversation.abort_turn()
            raise

    async def astep(self, action: str) -> StepResult:
        """Async twin of :meth:`step`: the grading is awaited, the rest is the same code."""
        submission = self._begin_step(action)
        try:
            scored = await self._agrade(submission)
        except BaseException as exc:
            self._conversation.abort_turn()
            if isinstance(exc, SandboxError) and self.on_infra_error == "flag":
                return self._infra_step(submission, exc)
            raise
        try:
            return self._finish_step(submission, scored)
        except BaseException:
            self._conversation.abort_turn()
            raise

    def _infra_step(self, sub: _Submission, exc: SandboxError) -> StepResult:
        """A submission the sandbox could not grade: not the model's failure. The turn is taken
        back (nothing recorded but the fault); a single-step episode ends there, flagged."""
        conv = self._conversation
        trajectory = self.trajectory
        assert trajectory is not None
        reason = f"{type(exc).__name__}: {exc}"[:300]
        trajectory.infra_error = reason
        single = self.mode == Mode.SINGLE_STEP
        if single:
            trajectory.stop_reason = StopReason.INFRA_ERROR.value
        info: StepInfo = {
            "task_name": sub.task.name, "turn": conv.turn + 1,
            "view": "hidden" if self.feedback_from == FeedbackSource.ALL else "visible",
            "passed": 0, "total": 0, "fraction": 0.0, "timed_out": False, "outcome": "infra_error",
            "visible_passed": None, "visible_total": None, "failures": [],
            "feedback_trimmed": False, "reply_cut": sub.cut, "action_tokens": 0,
            "observation_tokens": 0, "tokens_used": conv.tokens_used, "tokens_left": conv.tokens_left,
            "isolation": "", "terminated": False, "truncated": False,
            "stop_reason": trajectory.stop_reason, "infra_error": reason,
        }
        return self._observation(), 0.0, single, info


# The core's earlier private name, for code written against it.
_MultiTurnLogic = EpisodeCore


class MultiTurnCodingEnv(EpisodeCore):
    """Revise-on-failure coding environment: ``done`` once the hidden tests pass or turns/tokens run out.

    The walk-through's loop works as written::

        env = MultiTurnCodingEnv(max_turns=3, seed=0)
        obs = env.reset(task_index=idx)
        done = False
        while not done:
            obs, reward, done, info = env.step(policy(obs))

    The observation has ``prompt``, ``entry_point``, ``task_name``, ``messages`` (the whole
    conversation in OpenAI chat format), ``feedback`` (the latest feedback text), ``turn`` (the
    1-based turn it asks for; after the end, the last turn played), ``turns_left`` (submissions
    still allowed), ``max_turns``, ``tokens_used``, ``tokens_left`` and ``max_tokens`` (None
    without a budget), and ``seed`` (the episode's seed, for policies that sample).
    Feedback is appended to ``messages`` only while the episode goes on; the final verdict is
    in ``feedback`` and the turn record.

    The token budget binds. Tokens are counted as OpenAI's API counts a chat (see
    :class:`agentenv.tokens.TokenCounter`): ``tokens_used`` is the next request's prompt tokens.
    ``max_tokens`` in the observation is what the reply may have: the budget left, minus (while
    turns remain after this one) a reserve for the next observation and a minimal reply to it;
    the OpenAI-compatible policy sends it as ``max_tokens``. A reply that still overruns it is
    cut there and graded as cut (``info["reply_cut"]``, ``finish_reason="length"`` in the
    record), as the server would have cut it; the episode goes on. Feedback that does not fit is
    trimmed with a marker, keeping its last paragraph (the attempts-left instructions) and room
    for a reply of ``MIN_REPLY_TOKENS``; if even that cannot fit, the episode ends with
    ``stop_reason="token_budget"``. No request plus its reply ever exceeds the budget.
    The reward of each step follows ``step_reward`` (see the module docstring: by default the
    change in the turn's score, so the rewards sum to the final score). ``info``
    carries ``terminated``, ``truncated`` and ``stop_reason``. ``env.state`` is the conversation
    state; ``env.trajectory`` the episode's :class:`Trajectory` of :class:`TurnRecord`.

    ``tokenizer`` is a model or encoding name for tiktoken, or any object with
    ``.encode(str) -> list`` (a Hugging Face tokenizer); ``prompts_dir`` overrides the packaged
    templates one by one; ``grader`` replaces the sandbox (``isolation`` picks the sandbox's
    isolation level otherwise).
    """
