"""The token budget of an episode: how long a reply may be, and how feedback is made to fit.

:class:`ReplyBudget` reads the conversation's count (:class:`~agentenv.envs.conversation.
Conversation`) and answers three questions. How many tokens may the next reply have
(:meth:`ReplyBudget.reply_limit`: what the budget leaves, minus, while turns remain after this
one, a reserve for the next observation and a minimal reply to it)? Is a reply over that, and
where is it cut (:meth:`ReplyBudget.cut`)? Does the feedback fit the room left, and if not,
what trimmed text does (:meth:`ReplyBudget.fit`: the head cut with :data:`TRIM_MARKER`, its last
paragraph, the instructions, kept whole; None when even that cannot leave room for a minimal
reply, which ends the episode on its budget)? Without a budget every answer is "no limit".
"""

from __future__ import annotations

from agentenv.envs.conversation import Conversation
from agentenv.prompts import Prompts
from agentenv.tokens import TokenCounter

__all__ = ["MIN_FEEDBACK_TOKENS", "MIN_REPLY_TOKENS", "TRIM_MARKER", "ReplyBudget"]

TRIM_MARKER = "\n[… feedback truncated to fit the token budget]"
# Below this many tokens of real content, trimmed feedback would say nothing useful.
MIN_FEEDBACK_TOKENS = 16
# Feedback is trimmed so that at least this many tokens stay for the reply that follows it;
# if that cannot be done, the episode ends on its token budget.
MIN_REPLY_TOKENS = 64


class ReplyBudget:
    """The budget's arithmetic for one env (its templates, its counter, its turns)."""

    def __init__(self, conversation: Conversation, counter: TokenCounter, prompts: Prompts,
                 max_turns: int, feedback_source: str) -> None:
        self.conversation = conversation
        self.counter = counter
        self.prompts = prompts
        self.max_turns = max_turns
        self.feedback_source = feedback_source
        self._floors: dict[int, int] = {}  # feedback_floor by turns left (the templates are fixed)

    def feedback_floor(self, turns_left: int) -> int:
        """Tokens of the shortest feedback :meth:`fit` may produce: its instructions paragraph
        (rendered for ``turns_left``), the trim marker and the minimum of real content."""
        floor = self._floors.get(turns_left)
        if floor is None:
            tail = self.prompts.feedback(turn=1, turns_left=turns_left, passed=0, total=1, failures=(),
                                         source=self.feedback_source).rsplit("\n\n", 1)[-1]
            floor = self.counter.count(TRIM_MARKER + "\n\n" + tail) + MIN_FEEDBACK_TOKENS + 2  # +2: joins
            self._floors[turns_left] = floor
        return floor

    def reply_limit(self) -> int | None:
        """The reply's token allowance: what the budget leaves after this request, minus a
        reserve for the next observation and a minimal reply to it, while turns remain after
        this one (without the reserve when it would leave less than a minimal reply)."""
        conv = self.conversation
        if conv.token_budget is None:
            return None
        room = max(0, conv.token_budget - conv.tokens_used)
        turns_after = self.max_turns - conv.turn - 1
        if turns_after > 0:
            # The reply's own closing and the priming of the next request (together, what the
            # reply costs as a history message beyond its content), the feedback message at its
            # shortest, and a minimal reply to it.
            reserve = (self.counter.count_message("", "assistant") + self.counter.count_message("", "user")
                       + self.feedback_floor(turns_after - 1) + MIN_REPLY_TOKENS)
            if room - reserve >= MIN_REPLY_TOKENS:
                return room - reserve
        return room

    def cut(self, text: str, limit: int | None) -> tuple[str, bool]:
        """``text`` cut at ``limit`` tokens (as a server given ``max_tokens`` would have cut
        it), and whether it was."""
        if limit is not None and self.counter.count(text) > limit:
            return self.counter.truncate(text, limit), True
        return text, False

    def fit(self, feedback: str) -> str | None:
        """The feedback as it fits the room left with a minimal reply after it (trimmed with a
        marker, its last paragraph, the instructions, kept whole), or None if it cannot."""
        room = self.conversation.room_for_message("user", keep=MIN_REPLY_TOKENS)
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
