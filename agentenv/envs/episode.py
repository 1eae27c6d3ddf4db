"""The episode core both coding envs are configurations of, composed of its parts.

:class:`EpisodeCore` runs an episode: ``reset`` poses a task as a chat rendered from the Jinja
templates, each ``step`` extracts the code from the reply, grades it, records the turn and
either ends the episode or appends the feedback. What it composes, one concern each:

- the conversation (:mod:`agentenv.envs.conversation`): the state machine, the history and its
  token count;
- the budget (:mod:`agentenv.envs.budget`): the reply's allowance, cutting, fitting feedback;
- visibility (:mod:`agentenv.envs.visibility`): what the policy is shown, what ends the episode,
  and the separate run of the visible checks;
- shaping (:mod:`agentenv.envs.shaping`): the turn's score and the step reward paid for it;
- recording (:mod:`agentenv.envs.recording`): redaction, the trajectory, turn records and
  ``info``.

``step`` and ``astep`` differ only in how they await the :class:`Grader`; the halves before and
after grading are shared and I/O-free. :class:`~agentenv.envs.multiturn.MultiTurnCodingEnv` is
the core with ``max_turns`` turns, :class:`~agentenv.envs.coding.CodingEnv` its single-step
face; the semantics of every option are documented in :mod:`agentenv.envs.multiturn`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv.choices import FeedbackSource, Mode, StopReason
from agentenv.envs.budget import ReplyBudget
from agentenv.envs.conversation import STOP_REASON_OF, Conversation, ConversationState
from agentenv.envs.info import StepInfo
from agentenv.envs.recording import Recorder, Submission, graded_info, infra_info
from agentenv.envs.shaping import Shaping
from agentenv.envs.visibility import Visibility
from agentenv.errors import ConfigError, SandboxError, SnapshotMismatch
from agentenv.extract import extract_code
from agentenv.grading.scoring import Grader, SandboxGrader, Scored
from agentenv.prompts import Prompts
from agentenv.records import Trajectory, classify_outcome
from agentenv.rewards import RewardFn, dense_reward
from agentenv.settings import DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT
from agentenv.tasks import select
from agentenv.tasks.schema import Task
from agentenv.tokens import TokenCounter, Tokenizer

__all__ = ["EpisodeCore", "EpisodeSnapshot", "StepResult"]

StepResult = tuple[dict[str, Any], float, bool, StepInfo]


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


class EpisodeCore:
    """The one episode core: ``MultiTurnCodingEnv`` is it with ``max_turns`` turns, ``CodingEnv``
    its single-step face (one turn)."""

    # "multi_turn", or "single_step" for the bandit face (its own stop reason, always terminated)
    mode: Mode = Mode.MULTI_TURN

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
        self.visibility = Visibility(feedback_from, stop_when)
        self.shaping = Shaping(reward_fn, step_reward)
        if grader is not None and isolation is not None:
            raise ConfigError("pass isolation= or grader=, not both (a custom grader picks its own isolation)")
        if on_infra_error not in ("flag", "raise"):
            raise ConfigError(f"on_infra_error must be 'flag' or 'raise', got {on_infra_error!r}")
        self.on_infra_error = on_infra_error
        self.max_turns = max_turns
        self.seed = seed
        self.timeout = float(timeout)
        self.grader: Grader = grader if grader is not None else SandboxGrader(isolation)
        self.prompts = Prompts(prompts_dir)
        self.counter = TokenCounter(tokenizer)
        self._conversation = Conversation(self.counter, token_budget)
        self.budget = ReplyBudget(self._conversation, self.counter, self.prompts, max_turns,
                                  self.visibility.feedback_from)
        self.recorder = Recorder()
        # The task sampler, made on first use: most episodes name their task, and seeding a
        # Mersenne Twister costs more than the rest of building or resetting an env.
        self._rng: random.Random | None = None
        self._rng_seed = seed
        self.current_task: Task | None = None
        self._feedback = ""

    # -- the options, as the envs and their callers read them ------------------------------------
    @property
    def feedback_from(self) -> FeedbackSource:
        return self.visibility.feedback_from

    @property
    def stop_when(self) -> str:
        return self.visibility.stop_when

    @property
    def visible_apart(self) -> bool:
        return self.visibility.apart

    @property
    def step_reward(self) -> str:
        return self.shaping.step_reward

    @property
    def reward_fn(self) -> RewardFn:
        return self.shaping.reward_fn

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

    @property
    def trajectory(self) -> Trajectory | None:
        """The episode's :class:`Trajectory` (None before the first reset)."""
        return self.recorder.trajectory

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
        self.visibility.begin(task)
        self._feedback = ""
        self.recorder.open(
            task, seed=seed if seed is not None else self.seed, max_turns=self.max_turns,
            token_budget=self.token_budget, template_ids=self.template_ids,
            opening=[("system", system), ("user", user)], mode=self.mode,
            feedback_from=self.feedback_from, decided_by=self.visibility.decided_by,
            metadata={"tokenizer": self.counter.name, "prompt_tokens": prompt_tokens,
                      "reward_fn": self.shaping.reward_name, "step_reward": self.step_reward})
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
        self.visibility.begin(task)
        self._feedback = snapshot.feedback
        self.recorder.resume(snapshot.trajectory, seed)
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
            "max_tokens": self.budget.reply_limit() if running else 0 if conv.token_budget is not None else None,
        }

    # -- step: the I/O-free halves --------------------------------------------------------------
    def _begin_step(self, action: object) -> Submission:
        awaiting = self._conversation.state is ConversationState.AWAITING_SUBMISSION
        limit = self.budget.reply_limit() if awaiting else None
        self._conversation.begin_turn()  # raises EnvStateError before reset / after the end
        task = self.current_task
        assert task is not None
        # Graded as cut, as the server would have cut it had the policy sent max_tokens.
        text, cut = self.budget.cut(str(action) if isinstance(action, str) else "", limit)
        return Submission(task=task, text=text, code=extract_code(text, task.entry_point),
                          action=action, cut=cut)

    def _finish_step(self, sub: Submission, scored: Scored) -> StepResult:
        conv = self._conversation
        task, code = sub.task, sub.code
        hidden = self.recorder.redact(scored.hidden)
        visible = self.recorder.redact(scored.visible) if scored.visible is not None else None
        score = self.shaping.score(hidden, code)
        turn = conv.turn + 1
        turns_left = self.max_turns - turn
        shown = self.visibility.shown(hidden, visible)
        solved = self.visibility.stops_on(hidden, visible).all_passed
        outcome = classify_outcome(code, shown) if shown.total or not code.strip() else "not_shown"
        feedback = self.prompts.feedback(
            turn=turn, turns_left=0 if solved else turns_left, passed=shown.passed, total=shown.total,
            failures=shown.failures, solved=solved and shown.all_passed, outcome=outcome,
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
            fitted = self.budget.fit(feedback)
            if fitted is None:
                next_state = ConversationState.OUT_OF_TOKENS
            else:
                trimmed = fitted != feedback
                feedback = fitted
                observation_tokens = conv.add("user", feedback)
                next_state = ConversationState.AWAITING_SUBMISSION
        self._feedback = feedback

        previous = self.recorder.last_turn
        stop_reason = self._stop_reason(next_state)
        record = self.recorder.turn(
            sub, turn=turn, hidden=hidden, visible=visible, score=score,
            action_tokens=action_tokens, observation_tokens=observation_tokens,
            cumulative_tokens=conv.tokens_used, feedback=feedback, stop_reason=stop_reason)
        conv.end_turn(next_state)
        reward = self.shaping.paid(score, previous.reward if previous is not None else None, conv.done)
        single = self.mode == Mode.SINGLE_STEP
        info = graded_info(
            task=task, turn=turn, view=self.visibility.view, shown=shown, outcome=outcome,
            visible=visible, feedback_trimmed=trimmed, reply_cut=sub.cut,
            action_tokens=action_tokens, observation_tokens=observation_tokens,
            tokens_used=conv.tokens_used, tokens_left=conv.tokens_left,
            isolation=self.visibility.isolation(hidden, visible),
            terminated=next_state is ConversationState.SOLVED or single,
            truncated=not single and next_state in (ConversationState.OUT_OF_TURNS,
                                                    ConversationState.OUT_OF_TOKENS),
            stop_reason=stop_reason,
            hidden_extras=({"delta": record.delta, "exec_seconds": hidden.exec_seconds}
                           if self.visibility.shows_hidden else None))
        return self._observation(), reward, conv.done, info

    def _stop_reason(self, state: ConversationState) -> StopReason | None:
        if self.mode == Mode.SINGLE_STEP:
            return StopReason.SINGLE_STEP  # a bandit episode simply ends: neither solved nor cut short
        return STOP_REASON_OF.get(state)

    def step(self, action: str) -> StepResult:
        """Grade one submission and advance the conversation."""
        submission = self._begin_step(action)
        try:
            scored = self.visibility.grade(self.grader, submission.task, submission.code, self.timeout)
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
            scored = await self.visibility.agrade(self.grader, submission.task, submission.code,
                                                  self.timeout)
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

    def _infra_step(self, sub: Submission, exc: SandboxError) -> StepResult:
        """A submission the sandbox could not grade: not the model's failure. The turn is taken
        back (nothing recorded but the fault); a single-step episode ends there, flagged."""
        conv = self._conversation
        single = self.mode == Mode.SINGLE_STEP
        reason = self.recorder.infra_fault(exc, StopReason.INFRA_ERROR if single else None)
        assert self.trajectory is not None
        info = infra_info(task=sub.task, turn=conv.turn + 1, view=self.visibility.view,
                          reply_cut=sub.cut, tokens_used=conv.tokens_used,
                          tokens_left=conv.tokens_left, stop_reason=self.trajectory.stop_reason,
                          reason=reason)
        return self._observation(), 0.0, single, info
