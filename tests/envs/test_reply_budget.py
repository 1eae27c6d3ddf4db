"""The episode's token budget: the reply's allowance, cutting a reply, fitting feedback."""

from __future__ import annotations

from agentenv.envs.budget import MIN_FEEDBACK_TOKENS, MIN_REPLY_TOKENS, TRIM_MARKER, ReplyBudget
from agentenv.envs.conversation import Conversation
from agentenv.prompts import Prompts
from agentenv.tokens import TokenCounter

OPENING = [("system", "You write Python."), ("user", "Write f(x) that returns x + 1.")]


def budget(token_budget: int | None, max_turns: int = 3) -> ReplyBudget:
    counter = TokenCounter(None)
    conversation = Conversation(counter, token_budget)
    conversation.start(list(OPENING))
    return ReplyBudget(conversation, counter, Prompts(None), max_turns, "all")


def test_without_a_budget_nothing_is_limited() -> None:
    b = budget(None)
    assert b.reply_limit() is None
    assert b.cut("word " * 5000, None) == ("word " * 5000, False)
    feedback = "x\n\n" * 2000
    assert b.fit(feedback) == feedback


def test_the_allowance_keeps_room_for_the_next_observation_while_turns_remain() -> None:
    many, last = budget(2000, max_turns=3), budget(2000, max_turns=1)
    room = 2000 - many.conversation.tokens_used
    assert last.reply_limit() == room  # no turn after this one: all that is left
    limit = many.reply_limit()
    assert limit is not None and MIN_REPLY_TOKENS <= limit < room
    reserve = room - limit
    assert reserve >= many.feedback_floor(1) + MIN_REPLY_TOKENS


def test_a_reply_over_its_allowance_is_cut_there() -> None:
    b = budget(2000)
    text = "print('hello world')\n" * 400
    cut, was_cut = b.cut(text, 50)
    assert was_cut and b.counter.count(cut) <= 50 and text.startswith(cut)
    assert b.cut("short", 50) == ("short", False)


def test_feedback_is_trimmed_to_fit_keeping_its_last_paragraph_or_ends_the_episode() -> None:
    b = budget(700, max_turns=3)
    instructions = "You have 2 attempts left. Reply with the whole corrected function."
    long_feedback = "\n".join(f"check {i} failed: expected {i}, got {i + 1}" for i in range(300))
    fitted = b.fit(long_feedback + "\n\n" + instructions)
    assert fitted is not None
    assert fitted.endswith(TRIM_MARKER + "\n\n" + instructions)
    room = b.conversation.room_for_message("user", keep=MIN_REPLY_TOKENS)
    assert room is not None and b.counter.count(fitted) <= room
    assert b.counter.count(fitted.split(TRIM_MARKER)[0]) >= MIN_FEEDBACK_TOKENS
    short = "1 of 3 checks failed.\n\n" + instructions
    assert b.fit(short) == short
    tight = budget(b.conversation.tokens_used + MIN_REPLY_TOKENS + 10, max_turns=3)
    assert tight.fit(long_feedback + "\n\n" + instructions) is None  # no room: the budget ends it
