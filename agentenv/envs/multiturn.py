"""MultiTurnCodingEnv: submit code, read which tests failed, revise; with exact RL semantics.

What it owns: the episode logic of the multi-turn environment. ``reset()`` poses a task as a
chat (system + task message rendered from Jinja templates); each ``step(raw_text)`` extracts
the code, grades it against the task's hidden checks, records a :class:`TurnRecord` and either
ends the episode or appends the feedback message. The conversation itself (state machine,
history, token budget) is :class:`agentenv.envs.conversation.Conversation`.

How an episode ends (``info["stop_reason"]``, also ``env.trajectory.stop_reason``):

- ``"solved"``: every hidden check passed (``terminated``; an absorbing state);
- ``"max_turns"``: ``max_turns`` submissions were graded (``truncated``);
- ``"token_budget"``: the next observation would not fit in ``token_budget`` even with the
  feedback trimmed (``truncated``). RL code bootstraps values on truncation, not termination.

Rewards and termination always come from the hidden ``checks``. Feedback comes from all of them
(``feedback_from="all"``, the default) or only from the task's ``visible_checks``
(``feedback_from="visible"``, RLEF-style: hidden test text never reaches the policy). Failure
messages are truncated, and values of secret-looking environment variables are redacted (by the
sandbox, :mod:`agentenv.sandbox._redact`, and again here for a custom grader), before they
reach an observation or a record.

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

from agentenv.envs.conversation import (
    STOP_REASON_OF,
    Conversation,
    ConversationState,
)
from agentenv.envs.scoring import Grader, SandboxGrader, Scored
from agentenv.errors import ConfigError
from agentenv.extract import extract_code
from agentenv.prompts import Prompts
from agentenv.records import Trajectory, TurnRecord, classify_outcome
from agentenv.rewards import RewardFn, checked_reward, dense_reward
from agentenv.sandbox._redact import redact_result, redact_secrets, secret_values
from agentenv.sandbox.result import RunResult
from agentenv.tasks.schema import Task
from agentenv.tokens import TokenCounter, Tokenizer

__all__ = ["FEEDBACK_SOURCES", "Grader", "MultiTurnCodingEnv", "SandboxGrader", "redact_secrets",
           "secret_values"]

FEEDBACK_SOURCES: tuple[str, ...] = ("all", "visible")
TRIM_MARKER = "\n[… feedback truncated to fit the token budget]"
# Below this many tokens of real content, trimmed feedback would say nothing useful.
MIN_FEEDBACK_TOKENS = 16
@dataclass(frozen=True)
class _Submission:
    """A step in progress: what the policy sent, before grading."""

    task: Task
    text: str
    code: str
    action: object


StepResult = tuple[dict[str, Any], float, bool, dict[str, Any]]


class _MultiTurnLogic:
    """Everything but the grader call: shared by the sync and async step."""

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        max_turns: int = 3,
        seed: int | None = None,
        timeout: float = 5.0,
        token_budget: int | None = None,
        tokenizer: Tokenizer | str | None = None,
        prompts_dir: str | Path | None = None,
        feedback_from: str = "all",
        reward_fn: RewardFn = dense_reward,
        *,
        grader: Grader | None = None,
        isolation: str | None = None,
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
        if feedback_from not in FEEDBACK_SOURCES:
            raise ConfigError(f"feedback_from must be one of {', '.join(FEEDBACK_SOURCES)}, "
                              f"got {feedback_from!r}")
        if grader is not None and isolation is not None:
            raise ConfigError("pass isolation= or grader=, not both (a custom grader picks its own isolation)")
        self.max_turns = max_turns
        self.seed = seed
        self.timeout = float(timeout)
        self.feedback_from = feedback_from
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
            if isinstance(task_index, bool) or not isinstance(task_index, int) or \
                    not -len(self.tasks) <= task_index < len(self.tasks):
                raise ConfigError(f"task_index must be an int in [0, {len(self.tasks)}), got {task_index!r}")
            task = self.tasks[task_index]
        system = self.prompts.system(max_turns=self.max_turns)
        user = self.prompts.task(task, max_turns=self.max_turns)
        prompt_tokens = self._conversation.start([("system", system), ("user", user)])
        self.current_task = task
        self._feedback = ""
        self._secrets = secret_values()
        self.trajectory = Trajectory(
            task_name=task.name,
            seed=seed if seed is not None else self.seed,
            max_turns=self.max_turns,
            token_budget=self.token_budget,
            template_ids=dict(self.template_ids),
            difficulty=task.difficulty,
            mode="multi_turn",
            feedback_from=self.feedback_from,
            decided_by="checks",
            metadata={
                "tokenizer": self.counter.name,
                "prompt_tokens": prompt_tokens,
                "reward_fn": getattr(self.reward_fn, "__name__", type(self.reward_fn).__name__),
                "source": task.source,
            },
        )
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
            # the 1-based turn this observation asks for (after the end: the last turn played)
            "turn": conv.turn + 1 if running else conv.turn,
            "turns_left": self.max_turns - conv.turn if running else 0,
            "max_turns": self.max_turns,
            "tokens_used": conv.tokens_used,
            "tokens_left": conv.tokens_left,
        }

    # -- step: the I/O-free halves --------------------------------------------------------------
    def _begin_step(self, action: object) -> _Submission:
        self._conversation.begin_turn()  # raises EnvStateError before reset / after the end
        task = self.current_task
        assert task is not None
        text = str(action) if isinstance(action, str) else ""
        return _Submission(task=task, text=text, code=extract_code(text, task.entry_point), action=action)

    def _redacted(self, result: RunResult) -> RunResult:
        # The sandbox redacts its own results; this covers a custom grader's too.
        return redact_result(result, self._secrets)

    def _fit(self, feedback: str) -> str | None:
        """The feedback as it fits the room left (trimmed with a marker), or None if it cannot."""
        room = self._conversation.room_for_message()
        count = self.counter.count
        if room is None or count(feedback) <= room:
            return feedback
        if room < count(TRIM_MARKER) + MIN_FEEDBACK_TOKENS:
            return None
        low, high = 0, len(feedback)  # longest prefix whose text plus marker fits
        while low < high:
            mid = (low + high + 1) // 2
            if count(feedback[:mid] + TRIM_MARKER) <= room:
                low = mid
            else:
                high = mid - 1
        trimmed = feedback[:low].rstrip() + TRIM_MARKER
        if count(trimmed) > room or count(feedback[:low]) < MIN_FEEDBACK_TOKENS:
            return None
        return trimmed

    def _finish_step(self, sub: _Submission, scored: Scored) -> StepResult:
        conv = self._conversation
        trajectory = self.trajectory
        assert trajectory is not None
        task, code = sub.task, sub.code
        hidden = self._redacted(scored.hidden)
        visible = self._redacted(scored.visible) if scored.visible is not None else None
        reward = checked_reward(self.reward_fn, hidden, code)
        turn = conv.turn + 1
        turns_left = self.max_turns - turn
        solved = hidden.all_passed  # termination is decided by the hidden checks only

        if self.feedback_from == "all":
            shown = hidden
        else:
            shown = visible if visible is not None else \
                RunResult.from_counts(0, 0, timed_out=hidden.timed_out)
        outcome = classify_outcome(code, hidden)
        feedback = self.prompts.feedback(
            turn=turn, turns_left=turns_left, passed=shown.passed, total=shown.total,
            failures=shown.failures, solved=solved, outcome=outcome, source=self.feedback_from,
            entry_point=task.entry_point, timed_out=shown.timed_out,
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
            turn=turn, response_text=sub.text, code=code, result=hidden, reward=reward,
            previous=previous, visible=visible,
            action_tokens=action_tokens, observation_tokens=observation_tokens,
            cumulative_tokens=conv.tokens_used, feedback=feedback,
            usage=getattr(sub.action, "usage", None),
            finish_reason=getattr(sub.action, "finish_reason", None),
        )
        trajectory.turns.append(record)
        conv.end_turn(next_state)
        stop_reason = STOP_REASON_OF.get(next_state)
        trajectory.stop_reason = stop_reason

        info: dict[str, Any] = {
            "task_name": task.name,
            "turn": turn,
            "passed": hidden.passed,
            "total": hidden.total,
            "fraction": hidden.fraction,
            "timed_out": hidden.timed_out,
            "outcome": record.outcome,
            "delta": record.delta,
            "visible_passed": record.visible_passed,
            "visible_total": record.visible_total,
            # the failures the feedback was built from: never hidden ones when feedback_from="visible"
            "failures": [f.to_dict() for f in shown.failures],
            "feedback_trimmed": trimmed,
            "action_tokens": action_tokens,
            "observation_tokens": observation_tokens,
            "tokens_used": conv.tokens_used,
            "tokens_left": conv.tokens_left,
            "exec_seconds": hidden.exec_seconds,
            "isolation": hidden.isolation,
            "terminated": next_state is ConversationState.SOLVED,
            "truncated": next_state in (ConversationState.OUT_OF_TURNS, ConversationState.OUT_OF_TOKENS),
            "stop_reason": stop_reason,
        }
        return self._observation(), reward, conv.done, info


class MultiTurnCodingEnv(_MultiTurnLogic):
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
    still allowed), ``max_turns``, ``tokens_used`` and ``tokens_left`` (None without a budget).
    Feedback is appended to ``messages`` only while the episode goes on; the final verdict is
    in ``feedback`` and the turn record. A submission is always graded, even one that overruns
    the budget; the budget is checked for the observation that would follow it.
    The reward of each step is that turn's score (``reward_fn``, dense by default). ``info``
    carries ``terminated``, ``truncated`` and ``stop_reason``. ``env.state`` is the conversation
    state; ``env.trajectory`` the episode's :class:`Trajectory` of :class:`TurnRecord`.

    ``tokenizer`` is a model or encoding name for tiktoken, or any object with
    ``.encode(str) -> list`` (a Hugging Face tokenizer); ``prompts_dir`` overrides the packaged
    templates one by one; ``grader`` replaces the sandbox (``isolation`` picks the sandbox's
    isolation level otherwise).
    """

    def step(self, action: str) -> StepResult:
        """Grade one submission and advance the conversation."""
        submission = self._begin_step(action)
        try:
            scored = self.grader.score(submission.task, submission.code, timeout=self.timeout)
            return self._finish_step(submission, scored)
        except BaseException:
            self._conversation.abort_turn()  # nothing was committed: the turn may be retried
            raise

    async def astep(self, action: str) -> StepResult:
        """Async twin of :meth:`step`: the grading is awaited, the rest is the same code."""
        submission = self._begin_step(action)
        try:
            scored = await self.grader.ascore(submission.task, submission.code, timeout=self.timeout)
            return self._finish_step(submission, scored)
        except BaseException:
            self._conversation.abort_turn()
            raise
