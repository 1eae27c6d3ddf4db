"""The conversation state machine: its table, its errors, its events, and random call sequences."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from agentenv import MultiTurnCodingEnv
from agentenv.envs.conversation import (
    ILLEGAL_CALLS,
    STOP_REASON_OF,
    TERMINAL_STATES,
    TRANSITIONS,
    Conversation,
    ConversationState,
)
from agentenv.errors import ConfigError, EnvStateError
from agentenv.grading.scoring import SandboxGrader, Scored
from agentenv.tasks import Task
from agentenv.tokens import TokenCounter

S = ConversationState


class WordTokenizer:
    """A tiny real tokenizer (whitespace words) that also remembers every text it encoded."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, text: str) -> list[str]:
        self.seen.append(text)
        return text.split()


# -- the table --------------------------------------------------------------------------------

def test_every_state_has_a_row_in_the_transition_table() -> None:
    """TRANSITIONS names every state, and every target is a state."""
    assert set(TRANSITIONS) == set(ConversationState)
    for targets in TRANSITIONS.values():
        assert targets <= set(ConversationState)


def test_terminal_states_lead_only_to_a_new_episode() -> None:
    """SOLVED, OUT_OF_TURNS and OUT_OF_TOKENS can only be left by reset()."""
    assert {S.SOLVED, S.OUT_OF_TURNS, S.OUT_OF_TOKENS} == TERMINAL_STATES
    for state in TERMINAL_STATES:
        assert TRANSITIONS[state] == {S.AWAITING_SUBMISSION}
        assert ("step", state) in ILLEGAL_CALLS and "reset()" in ILLEGAL_CALLS[("step", state)]
    assert {STOP_REASON_OF[s] for s in TERMINAL_STATES} == {"solved", "max_turns", "token_budget"}


def test_step_before_start_raises_a_message_naming_reset() -> None:
    """Conversation.begin_turn() in IDLE raises EnvStateError telling to call reset()."""
    conv = Conversation(TokenCounter(WordTokenizer()))
    with pytest.raises(EnvStateError, match=r"before reset\(\)"):
        conv.begin_turn()
    assert conv.state is S.IDLE


def test_illegal_transition_is_refused_by_the_table() -> None:
    """end_turn() outside GRADING raises, and the state is unchanged."""
    conv = Conversation(TokenCounter(WordTokenizer()))
    conv.start([("system", "be brief"), ("user", "write add")])
    with pytest.raises(EnvStateError):
        conv.end_turn(S.SOLVED)
    assert conv.state is S.AWAITING_SUBMISSION


# -- history and tokens -----------------------------------------------------------------------

def test_each_message_is_encoded_exactly_once() -> None:
    """Adding messages encodes only the new text: the history is never re-counted."""
    tokenizer = WordTokenizer()
    conv = Conversation(TokenCounter(tokenizer, per_message=2))
    conv.start([("system", "a b c"), ("user", "d e")])
    for i in range(20):
        conv.begin_turn()
        conv.add("assistant", f"answer {i} here")
        conv.add("user", f"feedback {i}")
        conv.end_turn(S.AWAITING_SUBMISSION)
    assert len(tokenizer.seen) == 2 + 40 + 3  # every text once, and each role once
    assert len(set(tokenizer.seen)) == len(tokenizer.seen)
    # each message: content + 2 delimiters + its role (1 word); the request primes the reply (3)
    assert conv.tokens_used == (3 + 2 + 1) + (2 + 2 + 1) + 20 * ((3 + 2 + 1) + (2 + 2 + 1)) + 3
    assert conv.turn == 20


def test_opening_messages_larger_than_the_budget_are_a_config_error() -> None:
    """A budget that cannot hold the first observation raises ConfigError saying to raise it."""
    conv = Conversation(TokenCounter(WordTokenizer(), per_message=0), token_budget=3)
    with pytest.raises(ConfigError, match="raise the budget"):
        conv.start([("user", "one two three four")])


def test_budget_must_be_positive() -> None:
    """token_budget=0 or negative is refused."""
    for bad in (0, -5):
        with pytest.raises(ConfigError):
            Conversation(TokenCounter(WordTokenizer()), token_budget=bad)


def test_aborting_a_turn_undoes_its_messages_and_tokens() -> None:
    """abort_turn() restores the history and count from before the turn began."""
    conv = Conversation(TokenCounter(WordTokenizer(), per_message=0), token_budget=100)
    conv.start([("user", "task text")])
    conv.begin_turn()
    conv.add("assistant", "some answer")
    conv.abort_turn()
    assert conv.state is S.AWAITING_SUBMISSION
    assert len(conv) == 1 and conv.tokens_used == 6 and conv.tokens_left == 94  # 2 words, role, priming


def test_messages_returns_copies() -> None:
    """Editing the returned messages does not change the conversation."""
    conv = Conversation(TokenCounter(WordTokenizer()))
    conv.start([("user", "task")])
    messages = conv.messages()
    messages[0]["content"] = "changed"
    messages.append({"role": "user", "content": "x"})
    assert conv.messages() == [{"role": "user", "content": "task"}]


# -- events -----------------------------------------------------------------------------------

def test_every_transition_is_logged_as_a_structured_event(captured_events: list[MutableMapping[str, Any]]) -> None:
    """Each move emits event="transition" with from_state, to_state, turn and tokens."""
    conv = Conversation(TokenCounter(WordTokenizer(), per_message=0))
    conv.start([("user", "write add")])
    conv.begin_turn()
    conv.add("assistant", "def add")
    conv.end_turn(S.SOLVED)
    moves = [(e["from_state"], e["to_state"], e["turn"], e["tokens"])
             for e in captured_events if e["event"] == "transition"]
    assert moves == [
        ("idle", "awaiting_submission", 0, 6),       # 2 words + role + 3 priming the reply
        ("awaiting_submission", "grading", 0, 6),
        ("grading", "solved", 1, 8),                 # the reply's 2 words fill the primed slot
    ]


# -- random call sequences against the real env -----------------------------------------------

TASK = Task(
    name="add_sm",
    prompt="Write a Python function `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0",
            "assert add(10, 5) == 15"),
    visible_checks=("assert add(2, 3) == 5",),
)
ANSWERS = [
    "```python\ndef add(a, b):\n    return a + b\n```",
    "```python\ndef add(a, b):\n    return a - b\n```",
    "```python\ndef add(a, b):\n    return abs(a) + abs(b)\n```",
    "```python\ndef add(a, b)\n    return a + b\n```",
    "I do not know.",
    "```python\ndef add(a, b):\n    raise RuntimeError('no')\n```" + " padding" * 40,
]


class ReplayGrader:
    """Grades each distinct (task, code) once in the real sandbox, then replays the verdict.

    Keeps hundreds of random steps fast while every verdict still comes from the sandbox.
    """

    def __init__(self) -> None:
        self.inner = SandboxGrader()
        self.cache: dict[tuple[str, str], Scored] = {}

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        key = (task.name, code)
        if key not in self.cache:
            self.cache[key] = self.inner.score(task, code, timeout=timeout)
        return self.cache[key]

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self.score(task, code, timeout=timeout)


GRADER = ReplayGrader()


class EnvMachine(RuleBasedStateMachine):
    """Random reset/step/bad-call sequences never leave the legal states; counters never go back."""

    env: MultiTurnCodingEnv

    @initialize(max_turns=st.integers(1, 4), budget=st.sampled_from([None, 200, 260, 330, 700]),
                feedback_from=st.sampled_from(["all", "visible"]))
    def build(self, max_turns: int, budget: int | None, feedback_from: str) -> None:
        self.env = MultiTurnCodingEnv(tasks=[TASK], max_turns=max_turns, token_budget=budget,
                                      feedback_from=feedback_from, grader=GRADER,
                                      tokenizer=WordTokenizer())
        self.max_turns, self.budget = max_turns, budget
        self.episodes = 0
        self.turn = 0
        self.tokens = 0
        self.returned = 0.0
        self.reset()  # start in an episode so that steps come early in short runs

    @rule()
    def reset(self) -> None:
        obs = self.env.reset()
        self.episodes += 1
        assert self.env.state is S.AWAITING_SUBMISSION
        assert (obs["turn"], obs["turns_left"]) == (1, self.max_turns)
        self.turn, self.tokens = 0, obs["tokens_used"]

    @precondition(lambda self: self.env.state is S.AWAITING_SUBMISSION)
    @rule(answer=st.sampled_from(ANSWERS))
    def step(self, answer: str) -> None:
        before = self.env.state
        obs, reward, done, info = self.env.step(answer)
        after = self.env.state
        assert after in TRANSITIONS[S.GRADING] and S.GRADING in TRANSITIONS[before]
        assert done == (after in TERMINAL_STATES)
        assert info["terminated"] == (after is S.SOLVED)
        assert info["truncated"] == (after in (S.OUT_OF_TURNS, S.OUT_OF_TOKENS))
        assert info["stop_reason"] == STOP_REASON_OF.get(after)
        assert -1.0 <= reward <= 1.0  # a delta of scores in [0, 1]
        self.returned = (self.returned if self.turn else 0.0) + reward
        if done:  # the summed step rewards are the final score
            assert self.env.trajectory is not None
            assert abs(self.returned - self.env.trajectory.final_reward) < 1e-9
        event(f"stop_reason={info['stop_reason']}, trimmed={info['feedback_trimmed']}")
        assert info["turn"] == self.turn + 1  # counters never go backwards
        assert obs["tokens_used"] >= self.tokens
        self.turn, self.tokens = info["turn"], obs["tokens_used"]
        if not done and self.budget is not None:
            assert obs["tokens_used"] <= self.budget

    @precondition(lambda self: self.env.state is not S.AWAITING_SUBMISSION)
    @rule(answer=st.sampled_from(ANSWERS))
    def bad_step(self, answer: str) -> None:
        before = self.env.state
        turns = len(self.env.trajectory.turns) if self.env.trajectory else 0
        with pytest.raises(EnvStateError, match=r"reset\(\)"):
            self.env.step(answer)
        assert self.env.state is before  # a refused call changes nothing
        assert (len(self.env.trajectory.turns) if self.env.trajectory else 0) == turns

    @invariant()
    def legal_and_consistent(self) -> None:
        if not hasattr(self, "env"):
            return
        state = self.env.state
        assert state in ConversationState and state is not S.GRADING
        assert self.env.episodes == self.episodes
        traj = self.env.trajectory
        if traj is not None:
            assert len(traj.turns) == self.turn <= self.max_turns
            assert [t.turn for t in traj.turns] == list(range(1, self.turn + 1))
            cumulative = [t.cumulative_tokens for t in traj.turns]
            assert cumulative == sorted(cumulative)
            assert traj.stop_reason == STOP_REASON_OF.get(state)


EnvMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=20, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestEnvStateMachine = EnvMachine.TestCase
