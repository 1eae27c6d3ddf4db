"""The conversation of a multi-turn episode: its state machine, message history and token budget.

What it owns:

- ``ConversationState``: the named states of an episode, and ``TRANSITIONS``, the one table of
  legal moves between them. ``ILLEGAL_CALLS`` holds the message for every env method called in
  a state that does not allow it (each says what to do instead).
- ``Conversation``: the current state, the message history in OpenAI chat format, the turn
  counter and the token count. Every message is counted once, when it is added, so a step costs
  the tokens it adds and never re-counts the history. ``tokens_used`` is what the API counts:
  awaiting a submission, the next request's ``prompt_tokens`` (every message, and the tokens
  that prime the reply); after a reply, that request's prompt plus completion tokens. Every transition is logged as a structured
  event (``event="transition"``, ``from_state``, ``to_state``, ``turn``, ``tokens``).

It does no I/O besides logging and knows nothing of tasks, sandboxes or rewards:
``agentenv.envs.multiturn`` drives it.

::

    IDLE ──reset──▶ AWAITING_SUBMISSION ──step──▶ GRADING ─┬─▶ AWAITING_SUBMISSION  (not solved, room left)
                                                            ├─▶ SOLVED              (all hidden checks pass)
                                                            ├─▶ OUT_OF_TURNS        (max_turns graded)
                                                            └─▶ OUT_OF_TOKENS       (next observation would not fit)

``reset`` (to AWAITING_SUBMISSION) is legal from every state but GRADING. A grading that raises
(an infrastructure fault, a cancelled await) returns to AWAITING_SUBMISSION with the turn's
messages undone, so the same turn can be retried.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from agentenv.choices import StopReason
from agentenv.errors import ConfigError, EnvStateError
from agentenv.log import get_logger
from agentenv.tokens import TokenCounter

__all__ = [
    "ILLEGAL_CALLS",
    "STOP_REASON_OF",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "Conversation",
    "ConversationState",
    "Role",
]

Role = Literal["system", "user", "assistant"]


class ConversationState(enum.Enum):
    """Where an episode is. Terminal states say why it ended."""

    IDLE = "idle"                                  # constructed, no episode yet
    AWAITING_SUBMISSION = "awaiting_submission"    # an observation is out; step() may be called
    GRADING = "grading"                            # a submission is being run (async steps overlap here)
    SOLVED = "solved"                              # all hidden checks passed: terminated
    OUT_OF_TURNS = "out_of_turns"                  # max_turns submissions made: truncated
    OUT_OF_TOKENS = "out_of_tokens"                # the next observation would not fit: truncated


_S = ConversationState

TRANSITIONS: Mapping[ConversationState, frozenset[ConversationState]] = MappingProxyType({
    _S.IDLE: frozenset({_S.AWAITING_SUBMISSION}),
    _S.AWAITING_SUBMISSION: frozenset({_S.GRADING, _S.AWAITING_SUBMISSION}),
    _S.GRADING: frozenset({_S.AWAITING_SUBMISSION, _S.SOLVED, _S.OUT_OF_TURNS, _S.OUT_OF_TOKENS}),
    _S.SOLVED: frozenset({_S.AWAITING_SUBMISSION}),
    _S.OUT_OF_TURNS: frozenset({_S.AWAITING_SUBMISSION}),
    _S.OUT_OF_TOKENS: frozenset({_S.AWAITING_SUBMISSION}),
})

TERMINAL_STATES: frozenset[ConversationState] = frozenset({_S.SOLVED, _S.OUT_OF_TURNS, _S.OUT_OF_TOKENS})

STOP_REASON_OF: Mapping[ConversationState, StopReason] = MappingProxyType({
    _S.SOLVED: StopReason.SOLVED,
    _S.OUT_OF_TURNS: StopReason.MAX_TURNS,
    _S.OUT_OF_TOKENS: StopReason.TOKEN_BUDGET,
})


def _ended(why: str) -> str:
    return (f"Cannot call step(): the episode has ended ({why}). "
            "Call env.reset() to start a new episode.")


ILLEGAL_CALLS: Mapping[tuple[str, ConversationState], str] = MappingProxyType({
    ("step", _S.IDLE): "Cannot call step() before reset(): call env.reset() to start an episode.",
    ("step", _S.GRADING): ("Cannot call step() while the previous submission is being graded: "
                           "await the pending astep() before stepping again, or use one env per "
                           "concurrent episode."),
    ("step", _S.SOLVED): _ended("solved"),
    ("step", _S.OUT_OF_TURNS): _ended("max_turns reached"),
    ("step", _S.OUT_OF_TOKENS): _ended("token budget spent"),
    ("reset", _S.GRADING): ("Cannot call reset() while a submission is being graded: await the "
                            "pending astep() first, or use one env per concurrent episode."),
})


class Conversation:
    """State, history, turn counter and token count of one episode at a time.

    ``token_budget`` caps ``tokens_used`` (all messages, counted with ``counter`` as the API
    counts a chat); None means no cap. Counters only grow within an episode; ``start`` begins
    the next one.
    """

    def __init__(self, counter: TokenCounter, token_budget: int | None = None) -> None:
        if token_budget is not None and (isinstance(token_budget, bool) or token_budget <= 0):
            raise ConfigError(f"token_budget must be a positive number of tokens or None, got {token_budget!r}")
        self.counter = counter
        self.token_budget = token_budget
        self._state = ConversationState.IDLE
        self._messages: list[dict[str, str]] = []
        self._tokens_used = 0
        self._history = 0  # every message's full cost (delimiters, role, content)
        self._turn = 0
        self._episodes = 0
        self._checkpoint = (0, 0, 0)
        self._log = get_logger(__name__)

    # -- reading ------------------------------------------------------------------------------
    @property
    def state(self) -> ConversationState:
        return self._state

    @property
    def turn(self) -> int:
        """Submissions graded so far in this episode."""
        return self._turn

    @property
    def episodes(self) -> int:
        """Episodes started since construction."""
        return self._episodes

    @property
    def tokens_used(self) -> int:
        return self._tokens_used

    @property
    def tokens_left(self) -> int | None:
        """Room left under the budget (never negative), or None without a budget."""
        if self.token_budget is None:
            return None
        return max(0, self.token_budget - self._tokens_used)

    @property
    def done(self) -> bool:
        return self._state in TERMINAL_STATES

    @property
    def stop_reason(self) -> str | None:
        return STOP_REASON_OF.get(self._state)

    def messages(self) -> list[dict[str, str]]:
        """The history in OpenAI chat format (a new list of new dicts; edits do not leak back)."""
        return [dict(m) for m in self._messages]

    def __len__(self) -> int:
        return len(self._messages)

    # -- checking -----------------------------------------------------------------------------
    def require(self, call: str) -> None:
        """Raise EnvStateError (saying what to do) if ``call`` is not allowed in this state."""
        message = ILLEGAL_CALLS.get((call, self._state))
        if message is not None:
            raise EnvStateError(message)

    def _move(self, to_state: ConversationState) -> None:
        from_state = self._state
        if to_state not in TRANSITIONS[from_state]:
            # A bug in the driver, not a user mistake: the table is the single source of truth.
            raise EnvStateError(
                f"illegal transition {from_state.name} -> {to_state.name}; legal targets are "
                f"{sorted(s.name for s in TRANSITIONS[from_state])}. Call env.reset() to recover."
            )
        self._state = to_state
        self._log.debug("transition", from_state=from_state.value, to_state=to_state.value,
                        turn=self._turn, tokens=self._tokens_used, episode=self._episodes)

    # -- driving ------------------------------------------------------------------------------
    def start(self, messages: list[tuple[Role, str]]) -> int:
        """Begin a new episode with these opening messages; return their token count.

        Raises ConfigError if they alone exceed the budget (no turn could ever be played).
        """
        self.require("reset")
        history = sum(self.counter.count_message(content, role) for role, content in messages)
        total = history + self.counter.reply_priming
        if self.token_budget is not None and total >= self.token_budget:
            raise ConfigError(
                f"token_budget={self.token_budget} leaves no room for a reply after the first "
                f"observation ({total} tokens by {self.counter.name}); raise the budget or "
                "shorten the prompt"
            )
        self._messages = [{"role": role, "content": content} for role, content in messages]
        self._history = history
        self._tokens_used = total
        self._turn = 0
        self._episodes += 1
        self._move(ConversationState.AWAITING_SUBMISSION)
        return total

    def begin_turn(self) -> None:
        """A submission arrived: move to GRADING (raises the ILLEGAL_CALLS message otherwise)."""
        self.require("step")
        self._checkpoint = (len(self._messages), self._tokens_used, self._history)
        self._move(ConversationState.GRADING)

    def abort_turn(self) -> None:
        """Grading failed (an infrastructure fault, a cancelled await): undo the turn's messages
        so that it may be retried."""
        if self._state is ConversationState.GRADING:
            length, tokens, history = self._checkpoint
            del self._messages[length:]
            self._tokens_used, self._history = tokens, history
            self._move(ConversationState.AWAITING_SUBMISSION)

    def add(self, role: Role, content: str) -> int:
        """Append one message during a turn; return the tokens it added to ``tokens_used``.

        A reply (``"assistant"``) fills the slot the last request primed: it adds its content
        tokens, the API's ``completion_tokens``. Any other message makes the next request.
        """
        if self._state is not ConversationState.GRADING:
            raise EnvStateError(f"messages are added while grading a turn, not in state {self._state.name}")
        before = self._tokens_used
        cost = self.counter.count_message(content, role)  # the content is encoded once
        if role == "assistant":
            content_tokens = cost - self.counter.count_message("", role)
            self._tokens_used = self._history + self.counter.reply_priming + content_tokens
        self._history += cost
        if role != "assistant":
            self._tokens_used = self._history + self.counter.reply_priming
        self._messages.append({"role": role, "content": content})
        return self._tokens_used - before

    def room_for_message(self, role: Role = "user", *, keep: int = 0) -> int | None:
        """Content tokens a next ``role`` message may have so that the request it makes still
        leaves ``keep`` tokens for a reply under the budget (None: unlimited)."""
        if self.token_budget is None:
            return None
        return (self.token_budget - keep - self._history - self.counter.count_message("", role)
                - self.counter.reply_priming)

    def snapshot(self) -> dict[str, Any]:
        """The conversation between turns as JSON-shaped data (for :meth:`restore`)."""
        if self._state is not ConversationState.AWAITING_SUBMISSION:
            raise EnvStateError(f"a conversation is snapshotted between turns (awaiting a "
                                f"submission), not in state {self._state.name}; step or reset first")
        return {"messages": self.messages(), "tokens_used": self._tokens_used,
                "history": self._history, "turn": self._turn}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Continue from a :meth:`snapshot`: the same messages, counts and turn, awaiting the next
        submission. Counts as a new episode (a branch); nothing is re-counted."""
        self.require("reset")
        self._messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in snapshot["messages"]]
        self._tokens_used = int(snapshot["tokens_used"])
        self._history = int(snapshot["history"])
        self._turn = int(snapshot["turn"])
        self._episodes += 1
        self._move(ConversationState.AWAITING_SUBMISSION)

    def end_turn(self, to_state: ConversationState) -> None:
        """Finish grading a turn: continue (AWAITING_SUBMISSION) or end in a terminal state."""
        if self._state is not ConversationState.GRADING:
            raise EnvStateError(f"end_turn() needs state GRADING, not {self._state.name}")
        self._turn += 1
        self._move(to_state)
